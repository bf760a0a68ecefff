"""A job's QoE target: its declaration read, and the job measured against it.

A job declares `policyd.io/qoe-target` (label or annotation) as `<metric><op><number>`:
`steps_per_second>=40` (a training job's throughput) or `p95_latency_ms<=80` (a serving
container's latency). `>=` means higher is better, `<=` lower is better; the number is finite
and positive. The metric is `steps_per_second` (read from the steps counter the snapshot
already holds: no query of its own) or a name the policy maps to PromQL (`QoE.spec.metrics`,
`Container.metrics[name]`).

`read_target` turns the declaration into a `Target` or a note saying what is wrong and what is
allowed (unknown metric, bad comparison, not a number): a malformed target means no action on
that job. `measure` reads the metric over the policy's measuring window: steps per second is
the steps made over the window's span; a named metric is the mean of its samples in the window.
A job whose metric has no fresh samples gets a note and is left alone. `short_seconds` says how
long, counted back from the latest sample, every sample has been short of the target: the
alert's clock, recomputed from the window on every call (stateless, like everything here).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from policyd.model import Container, Series
from policyd.model import labels as keys
from policyd.model.qoe import Comparison
from policyd.model.snapshot import FloatArray

STEPS_PER_SECOND = "steps_per_second"
"""The built-in metric: the exporter's steps counter over time."""

_DECLARATION = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(>=|<=|=>|=<|>|<|==|=)?\s*(.*?)\s*$")
COMPARISONS: tuple[Comparison, ...] = (">=", "<=")


@dataclass(frozen=True, kw_only=True)
class Target:
    """A well-formed declaration."""

    text: str
    metric: str
    comparison: Comparison
    value: float

    def met_by(self, measured: float) -> bool:
        return measured >= self.value if self.comparison == ">=" else measured <= self.value

    def ratio(self, measured: float) -> float:
        """>= 1 meets the target (`QoeStatus.ratio`)."""
        if self.comparison == ">=":
            return measured / self.value
        return self.value / measured if measured > 0 else math.inf


def declaration(container: Container) -> str | None:
    """The job's `policyd.io/qoe-target` (annotation first, then label), or None."""
    text = container.annotations.get(keys.QOE_TARGET, container.labels.get(keys.QOE_TARGET))
    return text if text is not None and text.strip() else None


def read_target(text: str, known: Collection[str]) -> Target | str:
    """The target `text` declares, or a note saying why it cannot be read (`known`: the metric
    names the policy can measure)."""
    shown = repr(text[:60])
    allowed = ", ".join(sorted(known))
    match = _DECLARATION.match(text)
    if match is None:
        return (f"{keys.QOE_TARGET}={shown} is not <metric><op><number> (e.g. "
                f"{STEPS_PER_SECOND}>=40); no action on this job")
    metric, op, number = match.groups()
    if metric not in known:
        return (f"{keys.QOE_TARGET}={shown}: unknown metric {metric!r} (known: {allowed}); "
                "no action on this job")
    if op not in COMPARISONS:
        return (f"{keys.QOE_TARGET}={shown}: comparison {op or '(none)'!r} is not one of "
                f"{', '.join(COMPARISONS)}; no action on this job")
    try:
        value = float(number)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        return (f"{keys.QOE_TARGET}={shown}: {number!r} is not a positive number; no action "
                "on this job")
    comparison: Comparison = ">=" if op == ">=" else "<="
    return Target(text=text.strip(), metric=metric, comparison=comparison, value=value)


@dataclass(frozen=True, kw_only=True)
class Measured:
    """The metric over the window: its value, the cores the job used meanwhile (NaN: not
    known), and how long it has been short without a break."""

    value: float
    cores: float
    short_seconds: float


def _window(series: Series, since: float) -> tuple[FloatArray, FloatArray]:
    times, values = series.times_seconds, series.values
    keep = (times >= since) & np.isfinite(values)
    return times[keep], values[keep]


def _rates(times: FloatArray, steps: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per interval between consecutive samples: its end time and steps per second."""
    spans = np.diff(times)
    good = spans > 0
    return times[1:][good], np.diff(steps)[good] / spans[good]


def _short_seconds(target: Target, times: FloatArray, values: FloatArray) -> float:
    """From the last sample back: how long every sample has been short of the target."""
    if times.size == 0:
        return 0.0
    met = values >= target.value if target.comparison == ">=" else values <= target.value
    if met[-1]:
        return 0.0
    ok = np.flatnonzero(met)
    start = float(times[ok[-1]]) if ok.size else float(times[0])
    return float(times[-1]) - start


def _cores(container: Container, since: float) -> float:
    times, values = _window(container.cpu_usage, since)
    return float(values.mean()) if times.size else math.nan


def measure(target: Target, container: Container, *, now: float, window_seconds: float,
            stale_seconds: float) -> Measured | str:
    """The job's metric over the last `window_seconds` (module docstring), or a note why it
    cannot be measured (no series, no fresh samples)."""
    if target.metric == STEPS_PER_SECOND:
        series, what = container.steps, "its steps (policyd_training_steps_total)"
    else:
        found = container.metrics.get(target.metric)
        series = found if found is not None else Series.empty()
        what = f"its metric {target.metric!r}"
    if len(series) == 0:
        return f"no samples of {what}: left alone"
    last = float(series.times_seconds[-1])
    if now - last > stale_seconds:
        return f"{what} is stale (last sample {now - last:.0f} s old): left alone"
    since = last - window_seconds
    times, values = _window(series, since - 1e-9)
    if target.metric == STEPS_PER_SECOND:
        if times.size < 2:  # the window's start: the last sample before it, if any
            every_t, every_v = _window(series, -math.inf)
            times, values = every_t[-2:], every_v[-2:]
        if times.size < 2 or times[-1] <= times[0]:
            return f"too few samples of {what} to measure a rate: left alone"
        value = float((values[-1] - values[0]) / (times[-1] - times[0]))
        every_t, every_v = _window(series, -math.inf)
        rate_t, rate_v = _rates(every_t, every_v)
        short = _short_seconds(target, rate_t, rate_v)
    else:
        if times.size == 0:
            return f"no finite samples of {what} in the last {window_seconds:g} s: left alone"
        value = float(values.mean())
        every_t, every_v = _window(series, -math.inf)
        short = _short_seconds(target, every_t, every_v)
    if not math.isfinite(value) or value < 0:
        return f"{what} reads {value:g}: left alone"
    return Measured(value=value, cores=_cores(container, since - 1e-9), short_seconds=short)
