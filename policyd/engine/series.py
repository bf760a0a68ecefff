"""Reading the evaluation function at interval boundaries, for all containers at once.

Theory of operation. The thesis reads each job's evaluation function E at the instants t_m when
its algorithm runs, and "when queried in the middle of an iteration, the previous value will be
returned" (section 5.2.1). A stateless engine recomputes those readings from the snapshot: the
boundaries are t_m = now - (M - m) * interval for m = 0..M (M = the policy's window), and E(t_m)
is the last sample at or before t_m. From the readings come the gains

    relative:  g_m = |E(t_m) - E(t_{m-1})| / max(|E(t_{m-1})|, EPSILON)
    absolute:  g_m = |E(t_m) - E(t_{m-1})|

(docs/design.md, "Gain normalisation") and, for FlowCon, R_c: the mean cores a container used in
(t_{m-1}, t_m].

Everything is computed for all containers in a handful of numpy operations: the series are
concatenated and each container's samples are shifted onto a private stretch of one time axis,
so one `searchsorted` reads every container at every boundary. This is what keeps a 10,000
container decision well under a second.

A container gets a `problem` (and so no action) when a reading it needs is NaN or infinite, when
a reading comes from a sample older than `max_sample_age_seconds` (a gap: the job stopped
reporting), or when its series is structurally broken. Boundaries before a container's first
sample are simply not yet readable: the container is young, and the algorithms decide what a
young container is (Algorithm 2: new containers are NL; Algorithm 3: they start in PC).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from policyd.model import Container, Series
from policyd.model.snapshot import FloatArray

EPSILON = 1e-12
MOST_CORES = 1e6
"""A CPU figure beyond a million cores is a broken reading, not a machine: it is read as a
non-finite one (its container's problem), for the prefix sums below add every container's
samples, and two figures of 1e308 would overflow them for every container packed after."""
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, kw_only=True, eq=False)
class Window:
    """The readings of N containers at M + 1 boundaries.

    `values[i, m]` is E(t_m) of container i (NaN before its first sample); `first[i]` the index of
    its first readable boundary (M + 1 when none); `problems[i]` why it cannot be used, or None.
    """

    boundaries: FloatArray
    values: FloatArray
    first: IntArray
    problems: tuple[str | None, ...]

    @property
    def steps(self) -> int:
        """M: the number of intervals (gains) in the window."""
        return int(self.boundaries.size - 1)


def boundaries(now: float, interval_seconds: float, intervals: int) -> FloatArray:
    """t_0 .. t_M with t_M = now, spaced by the interval."""
    return now - interval_seconds * np.arange(intervals, -1, -1, dtype=np.float64)


@dataclass(frozen=True, eq=False)
class _Packed:
    """Several series on one axis: container i's samples occupy keys [i*span, (i+1)*span),
    `lengths[i]` of them from `starts[i]` on."""

    keys: FloatArray
    times: FloatArray
    values: FloatArray
    starts: IntArray
    lengths: IntArray
    origin: float
    span: float

    def grid(self, times: FloatArray) -> FloatArray:
        """The keys of `times` for every container, shape (N, len(times))."""
        n = self.starts.size
        offsets = np.arange(n, dtype=np.float64) * self.span
        return (times - self.origin)[None, :] + offsets[:, None]

    def firsts(self) -> FloatArray:
        """Each container's first sample time, inf for a container with none."""
        out = np.full(self.lengths.size, np.inf)
        some = self.lengths > 0
        out[some] = self.times[self.starts[some]]
        return out


def _pack(series: Sequence[Series], now: float, earliest: float) -> _Packed:
    # Each series is touched once, and `map(len, ...)` calls no Python function per series:
    # at 10,000 containers the cost is in reaching the arrays, not in the arithmetic.
    times_list = [s.times_seconds for s in series]
    values_list = [s.values for s in series]
    lengths = np.fromiter(map(len, times_list), dtype=np.int64, count=len(series))
    starts = np.zeros(len(series), dtype=np.int64)
    if len(series) > 1:
        np.cumsum(lengths[:-1], out=starts[1:])
    if lengths.sum() == 0:
        empty = np.empty(0, dtype=np.float64)
        return _Packed(keys=empty, times=empty, values=empty, starts=starts, lengths=lengths,
                       origin=earliest, span=1.0)
    times = np.concatenate(times_list)
    values = np.concatenate(values_list)
    # Samples outside [earliest, now] are clipped onto its ends: a sample before the window still
    # supplies the value held at t_0; one after `now` is never read (it sorts after the grid).
    origin = earliest - 1.0
    span = (now + 1.0) - origin + 1.0
    rel = np.clip(times, origin, now + 1.0) - origin
    owner = np.repeat(np.arange(len(series), dtype=np.float64), lengths)
    return _Packed(keys=rel + owner * span, times=times, values=values, starts=starts,
                   lengths=lengths, origin=origin, span=span)


def sample_window(
    containers: Sequence[Container],
    *,
    now: float,
    interval_seconds: float,
    intervals: int,
    max_sample_age_seconds: float,
) -> Window:
    """Read every container's evaluation function at the window's boundaries."""
    bounds = boundaries(now, interval_seconds, intervals)
    n, width = len(containers), bounds.size
    packed = _pack([c.evaluation for c in containers], now, float(bounds[0]))
    if packed.keys.size == 0:
        values = np.full((n, width), np.nan)
        ages = np.zeros((n, width))
    else:
        grid = packed.grid(bounds)
        idx = np.searchsorted(packed.keys, grid.ravel(), side="right").reshape(n, width) - 1
        mine = idx >= packed.starts[:, None]
        safe = np.clip(idx, 0, packed.keys.size - 1)
        values = np.where(mine, packed.values[safe], np.nan)
        ages = np.where(mine, bounds[None, :] - packed.times[safe], 0.0)
    # True where a sample exists at or before t_m, whatever its value (NaN included).
    readable = packed.firsts()[:, None] <= bounds[None, :]
    first = np.where(readable.any(axis=1), readable.argmax(axis=1), width).astype(np.int64)
    after_first = np.arange(width)[None, :] >= first[:, None]
    bad_value = after_first & ~np.isfinite(values)
    stale = after_first & (ages > max_sample_age_seconds)
    problems = _problems(containers, bounds=bounds, values=values, ages=ages, bad_value=bad_value,
                         stale=stale, max_age=max_sample_age_seconds)
    values.setflags(write=False)
    return Window(boundaries=bounds, values=values, first=first, problems=problems)


def _problems(
    containers: Sequence[Container],
    *,
    bounds: FloatArray,
    values: FloatArray,
    ages: FloatArray,
    bad_value: npt.NDArray[np.bool_],
    stale: npt.NDArray[np.bool_],
    max_age: float,
) -> tuple[str | None, ...]:
    problems: list[str | None] = [c.evaluation.problem for c in containers]
    for i in np.flatnonzero(bad_value.any(axis=1) | stale.any(axis=1)):
        if problems[i] is not None:
            continue
        if bad_value[i].any():
            m = int(bad_value[i].argmax())
            problems[i] = f"evaluation is {values[i, m]} at t={bounds[m]:.0f}"
        else:
            m = int(stale[i].argmax())
            problems[i] = (
                f"gap: no evaluation sample for {ages[i, m]:.0f} s before t={bounds[m]:.0f} "
                f"(more than {max_age:.0f} s)"
            )
    return tuple(problems)


def gains(window: Window, normalization: Literal["relative", "absolute"], *,
          gain: Literal["magnitude", "improvement"] = "magnitude",
          direction: Literal["minimize", "maximize"] = "minimize") -> FloatArray:
    """g_m for m = 1..M, shape (N, M); NaN where either reading is missing.

    `magnitude` (the thesis): |E(t_m) - E(t_{m-1})|, a change either way counts as growth.
    `improvement`: the change in the better direction (`direction`), a worsening counting as
    zero gain: E(t_{m-1}) - E(t_m) for a loss, E(t_m) - E(t_{m-1}) for an accuracy, floored at 0.
    """
    previous, current = window.values[:, :-1], window.values[:, 1:]
    # inf - inf, or a change of 1e308 over 1e-12: the container already has a problem
    with np.errstate(invalid="ignore", over="ignore"):
        if gain == "magnitude":
            change = np.abs(current - previous)
        else:
            better = previous - current if direction == "minimize" else current - previous
            change = np.maximum(better, 0.0)  # NaN (no reading) stays NaN
        if normalization == "absolute":
            return change
        return change / np.maximum(np.abs(previous), EPSILON)


@dataclass(frozen=True, kw_only=True, eq=False)
class CpuReadings:
    """R_c per container and interval, shape (N, M), and why a container's CPU is unusable."""

    cores: FloatArray
    problems: tuple[str | None, ...]


def _readable_cores(values: FloatArray) -> npt.NDArray[np.bool_]:
    """Where a CPU figure is one: finite and at most MOST_CORES (NaN is not)."""
    return np.isfinite(values) & (np.abs(values) <= MOST_CORES)


def mean_cpu_cores(containers: Sequence[Container], window: Window, *, now: float) -> CpuReadings:
    """R_c: mean cores used in each interval (t_{m-1}, t_m], shape (N, M).

    The mean of the cpu_usage samples inside the interval; when none fell inside it (samples
    sparser than the interval), the last sample at or before t_m; NaN when there is none. A NaN
    or infinite sample read for an interval (or one beyond MOST_CORES), or a broken CPU series,
    is a problem of that container (and its figures are NaN); it never spoils another
    container's.
    """
    bounds = window.boundaries
    n, steps = len(containers), window.steps
    problems: list[str | None] = [
        None if c.cpu_usage.problem is None else f"cpu_usage series: {c.cpu_usage.problem}"
        for c in containers
    ]
    packed = _pack([c.cpu_usage for c in containers], now, float(bounds[0]))
    if packed.keys.size == 0:
        return CpuReadings(cores=np.full((n, steps), np.nan), problems=tuple(problems))
    grid = packed.grid(bounds)
    right = np.searchsorted(packed.keys, grid.ravel(), side="right").reshape(n, bounds.size)
    # Prefix sums over finite samples only, and a prefix count of non-finite ones: a NaN sample
    # spoils its own interval, not every container packed after it.
    finite = _readable_cores(packed.values)
    total = np.concatenate(([0.0], np.cumsum(np.where(finite, packed.values, 0.0))))
    broken = np.concatenate(([0], np.cumsum(~finite)))
    sums = total[right[:, 1:]] - total[right[:, :-1]]
    counts = right[:, 1:] - right[:, :-1]
    held_idx = right[:, 1:] - 1
    held_ok = held_idx >= packed.starts[:, None]
    held = np.where(held_ok, packed.values[np.clip(held_idx, 0, packed.keys.size - 1)], np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        cores = np.where(counts > 0, sums / np.maximum(counts, 1), held)
    spoiled = ((broken[right[:, 1:]] - broken[right[:, :-1]]) > 0) | (
        (counts == 0) & held_ok & ~_readable_cores(held))
    for i in np.flatnonzero(spoiled.any(axis=1)):
        m = int(spoiled[i].argmax())
        problems[i] = problems[i] or (
            f"cpu_usage is not a finite number in ({bounds[m]:.0f}, {bounds[m + 1]:.0f}]")
    bad_rows = np.fromiter((p is not None for p in problems), dtype=bool, count=n)
    cores[spoiled | bad_rows[:, None]] = np.nan
    return CpuReadings(cores=cores, problems=tuple(problems))
