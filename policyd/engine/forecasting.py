"""The forecast beside every decision: each job's history read out of the snapshot, forecast
(`policyd.engine.forecast`), and attached to its assessment.

Theory of operation. A container's evaluation samples are the forecast's sample times; at each
the steps done are the last `steps` sample at or before it (the counter holds between scrapes)
and the cores used are the last `cpu_usage` sample at or before it (each is the mean over the
interval before it). The node was busy at a sample when its containers used at least
`BUSY_SHARE` of its cores then (summed over every container of the snapshot on it, at the
sample times they share): a job that used less than its allocation on a busy node was held back
by the others' CPU shares, not by its own threads (`policyd.engine.speed`). The job's
allocation in cores is its CPU fraction times its node's capacity, and the most it could have
is that capacity. Its total steps come from the snapshot (the exporter's progress), a target
loss from the label or annotation `policyd.io/target-loss` on the workload (a malformed value
is a note, never a guess). The policy says what "converged"
means for jobs that do not know their total (`settings_of`: its kind's alpha,
`Kind.convergence_alpha`, per base interval, with the policy's normalization).

`with_forecasts` is the step every kind's decision goes through after its plan: assessments
that carry no forecast yet (a kind that forecasts for itself, Predictive, fills its own) get one,
or a `forecast_note` saying why there is none. Pure: the snapshot and the policy are the only
inputs; no clock, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from policyd.engine.forecast import forecast
from policyd.engine.forecast_input import Histories, History, Settings
from policyd.engine.forecast_output import Forecast, Forecasts
from policyd.engine.spec import PolicyDocument
from policyd.model import Container, Decision, JobForecast, Snapshot
from policyd.model import labels as keys
from policyd.model.snapshot import FloatArray


def target_loss(container: Container) -> tuple[float | None, str]:
    """The loss the job declares as its target (`policyd.io/target-loss`), or None; and a note
    when a value is given but unusable."""
    text = container.annotations.get(keys.TARGET_LOSS, container.labels.get(keys.TARGET_LOSS))
    if text is None or not text.strip():
        return None, ""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        return None, (f"{keys.TARGET_LOSS}={text[:40]!r} is not a positive number; no target "
                      "taken")
    return value, ""


BUSY_SHARE = 0.9
"""A node whose containers use at least this share of its cores is busy (no cores to spare)."""


def _held(times: FloatArray, at: FloatArray, values: FloatArray) -> FloatArray:
    """`values` of the last sample at or before each of `at` (NaN before the first)."""
    if times.size == 0:
        return np.full(at.size, np.nan)
    index = np.searchsorted(times, at, side="right") - 1
    return np.where(index >= 0, values[np.clip(index, 0, times.size - 1)], np.nan)


@dataclass(frozen=True, eq=False)
class _Load:
    """A node's summed CPU use at the sample times of its containers' CPU series."""

    times: FloatArray
    cores: FloatArray

    def busy_at(self, at: FloatArray, capacity_cores: float) -> FloatArray:
        index = np.searchsorted(self.times, at)
        found = (index < self.times.size) & (
            self.times[np.clip(index, 0, max(self.times.size - 1, 0))] == at)
        used = np.where(found, self.cores[np.clip(index, 0, max(self.cores.size - 1, 0))],
                        np.nan)
        return np.where(np.isnan(used), np.nan, (used >= BUSY_SHARE * capacity_cores) * 1.0)


def _loads(snapshot: Snapshot, nodes: set[str]) -> dict[str, _Load]:
    """Per node in `nodes`: every container's CPU samples summed by sample time."""
    by_node: dict[str, list[Container]] = {n: [] for n in nodes}
    for c in snapshot.containers:
        if c.node in by_node and len(c.cpu_usage):
            by_node[c.node].append(c)
    loads = {}
    for node, members in by_node.items():
        if not members:
            loads[node] = _Load(np.empty(0), np.empty(0))
            continue
        times = np.concatenate([c.cpu_usage.times_seconds for c in members])
        values = np.concatenate([c.cpu_usage.values for c in members])
        unique, where = np.unique(times, return_inverse=True)
        sums = np.zeros(unique.size)
        np.add.at(sums, where, np.nan_to_num(values))
        loads[node] = _Load(unique, sums)
    return loads


def history_of(container: Container, capacity_cores: float,
               load: _Load | None = None) -> History:
    """The forecast's input for one container (module docstring)."""
    times = container.evaluation.times_seconds
    target, _ = target_loss(container)
    cpu_times = container.cpu_usage.times_seconds
    busy = None
    if load is not None and cpu_times.size:
        # The node's load at the CPU sample each evaluation sample reads.
        index = np.searchsorted(cpu_times, times, side="right") - 1
        read_at = np.where(index >= 0, cpu_times[np.clip(index, 0, cpu_times.size - 1)],
                           np.nan)
        busy = load.busy_at(read_at, capacity_cores)
    return History(
        times_seconds=times, losses=container.evaluation.values,
        steps=_held(container.steps.times_seconds, times, container.steps.values),
        cores=_held(cpu_times, times, container.cpu_usage.values),
        allocation_cores=container.cpu_allocation * capacity_cores, max_cores=capacity_cores,
        total_steps=container.total_steps, target_loss=target, busy=busy)


def settings_of(policy: PolicyDocument, snapshot: Snapshot, *, alpha: float,
                interval_seconds: float) -> Settings:
    """What "converged" means for this policy's forecasts (its kind's `alpha` per base
    interval, its evaluation's normalization), at the snapshot's time."""
    evaluation = policy.spec.evaluation
    return Settings(now_seconds=snapshot.time, alpha=alpha, interval_seconds=interval_seconds,
                    normalization=evaluation.normalization, direction=evaluation.direction)


@dataclass(frozen=True, kw_only=True, eq=False)
class Forecasted:
    """The forecasts of some containers: `by_id[id]` the engine's forecast (None: `notes[id]`
    says why), and the arrays for vectorised use (`forecasts`, rows in `ids` order)."""

    ids: tuple[str, ...]
    forecasts: Forecasts | None
    by_id: Mapping[str, Forecast | None]
    notes: Mapping[str, str]


def forecast_containers(settings: Settings, snapshot: Snapshot,
                        containers: Sequence[Container]) -> Forecasted:
    """Forecast every one of `containers` under `settings` (`settings_of`)."""
    capacity = {n.name: n.cpu_capacity for n in snapshot.nodes}
    notes: dict[str, str] = {}
    judged = []
    for c in containers:
        if len(c.steps) == 0:
            notes[c.id] = ("no steps reported (the exporter's policyd_training_steps_total): "
                           "the job's speed cannot be measured")
        else:
            judged.append(c)
    by_id: dict[str, Forecast | None] = {cid: None for cid in notes}
    forecasts = None
    if judged:
        loads = _loads(snapshot, {c.node for c in judged})
        forecasts = forecast(Histories.of([history_of(c, capacity[c.node], loads[c.node])
                                           for c in judged]), settings)
        for i, c in enumerate(judged):
            by_id[c.id] = forecasts.at(i)
            if by_id[c.id] is None:
                notes[c.id] = forecasts.notes[i]
    for c in containers:
        _, why = target_loss(c)
        if why and by_id.get(c.id) is not None:
            notes[c.id] = why
    return Forecasted(ids=tuple(c.id for c in judged), forecasts=forecasts, by_id=by_id,
                      notes=notes)


def job_forecast(f: Forecast, note: str = "") -> JobForecast:
    """The engine's forecast as a decision reports it."""
    remaining = max(f.remaining_seconds, 0.0)
    return JobForecast(
        steps_done=f.steps_done, total_steps=f.total_steps, remaining_steps=f.remaining_steps,
        remaining_seconds=remaining, finish_at=f.finish_at,
        low_seconds=min(f.low_seconds, remaining), high_seconds=max(f.high_seconds, remaining),
        steps_per_second=f.steps_per_second, basis=f.basis, target_loss=f.target_loss,
        target_eta_seconds=f.target_eta_seconds,
        note="; ".join(n for n in (f.note, note) if n))


def with_forecasts(decision: Decision, settings: Settings, snapshot: Snapshot) -> Decision:
    """`decision` with a forecast (or a note why there is none) on every assessment that has
    neither yet, under `settings`."""
    wanted = {a.container for a in decision.assessments
              if a.forecast is None and not a.forecast_note}
    if not wanted:
        return decision
    containers = [c for c in snapshot.containers if c.id in wanted]
    found = forecast_containers(settings, snapshot, containers)
    assessments = []
    for a in decision.assessments:
        if a.container in wanted:
            f = found.by_id.get(a.container)
            note = found.notes.get(a.container, "")
            if f is not None:
                a = replace(a, forecast=job_forecast(f, note))  # noqa: PLW2901
            else:
                a = replace(a, forecast_note=note or "not forecast")  # noqa: PLW2901
        assessments.append(a)
    return replace(decision, assessments=tuple(assessments))
