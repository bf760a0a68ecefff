"""The forecast beside every decision: each job's history read out of the snapshot, forecast
(`policyd.engine.forecast`), and attached to its assessment.

Theory of operation. A container's evaluation samples are the forecast's sample times; at each
the steps done are the last `steps` sample at or before it (the counter holds between scrapes)
and the cores used are the last `cpu_usage` sample at or before it (each is the mean over the
interval before it). The job's allocation in cores is its CPU fraction times its node's
capacity, and the most it could have is that capacity. Its total steps come from the snapshot
(the exporter's progress), a target loss from the label or annotation `policyd.io/target-loss`
on the workload (a malformed value is a note, never a guess). The policy says what "converged"
means for jobs that do not know their total: its kind's alpha (`Kind.convergence_alpha`) per
base interval, with the policy's normalization.

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
from policyd.engine.registry import KINDS
from policyd.engine.schedule import base_interval_seconds
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


def _held(times: FloatArray, at: FloatArray, values: FloatArray) -> FloatArray:
    """`values` of the last sample at or before each of `at` (NaN before the first)."""
    if times.size == 0:
        return np.full(at.size, np.nan)
    index = np.searchsorted(times, at, side="right") - 1
    return np.where(index >= 0, values[np.clip(index, 0, times.size - 1)], np.nan)


def history_of(container: Container, capacity_cores: float) -> History:
    """The forecast's input for one container (module docstring)."""
    times = container.evaluation.times_seconds
    target, _ = target_loss(container)
    return History(
        times_seconds=times, losses=container.evaluation.values,
        steps=_held(container.steps.times_seconds, times, container.steps.values),
        cores=_held(container.cpu_usage.times_seconds, times, container.cpu_usage.values),
        allocation_cores=container.cpu_allocation * capacity_cores, max_cores=capacity_cores,
        total_steps=container.total_steps, target_loss=target)


def settings_of(policy: PolicyDocument, snapshot: Snapshot) -> Settings:
    """What "converged" means for this policy's forecasts, at the snapshot's time."""
    evaluation = policy.spec.evaluation
    return Settings(now_seconds=snapshot.time,
                    alpha=KINDS.of(policy).convergence_alpha(policy),
                    interval_seconds=base_interval_seconds(policy),
                    normalization=evaluation.normalization, direction=evaluation.direction)


@dataclass(frozen=True, kw_only=True, eq=False)
class Forecasted:
    """The forecasts of some containers: `by_id[id]` the engine's forecast (None: `notes[id]`
    says why), and the arrays for vectorised use (`forecasts`, rows in `ids` order)."""

    ids: tuple[str, ...]
    forecasts: Forecasts | None
    by_id: Mapping[str, Forecast | None]
    notes: Mapping[str, str]


def forecast_containers(policy: PolicyDocument, snapshot: Snapshot,
                        containers: Sequence[Container]) -> Forecasted:
    """Forecast every one of `containers` under `policy`'s reading of convergence."""
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
        forecasts = forecast(Histories.of([history_of(c, capacity[c.node]) for c in judged]),
                             settings_of(policy, snapshot))
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


def with_forecasts(decision: Decision, policy: PolicyDocument, snapshot: Snapshot) -> Decision:
    """`decision` with a forecast (or a note why there is none) on every assessment that has
    neither yet."""
    wanted = {a.container for a in decision.assessments
              if a.forecast is None and not a.forecast_note}
    if not wanted:
        return decision
    containers = [c for c in snapshot.containers if c.id in wanted]
    found = forecast_containers(policy, snapshot, containers)
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
