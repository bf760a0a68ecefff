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
from functools import cached_property

import numpy as np
import numpy.typing as npt

from policyd.engine.forecast import forecast
from policyd.engine.forecast_input import DEFAULT_SMOOTHING_STEPS, Histories, History, Settings
from policyd.engine.forecast_output import Forecast, Forecasts, convergence_basis
from policyd.engine.spec import PolicyDocument
from policyd.model import Container, Decision, JobForecast, Series, Snapshot
from policyd.model import labels as keys
from policyd.model.forecast import valid
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


def history_of(container: Container, capacity_cores: float) -> History:
    """The forecast's input for one container, without its node's load (`histories` builds
    many at once, with it)."""
    times = container.evaluation.times_seconds
    target, _ = target_loss(container)
    return History(
        times_seconds=times, losses=container.evaluation.values,
        steps=_held(container.steps.times_seconds, times, container.steps.values),
        cores=_held(container.cpu_usage.times_seconds, times, container.cpu_usage.values),
        allocation_cores=container.cpu_allocation * capacity_cores, max_cores=capacity_cores,
        total_steps=container.total_steps, target_loss=target)


@dataclass(frozen=True, eq=False)
class _Packed:
    """Many series concatenated (series i's samples at starts[i] on, lengths[i] of them);
    `held` lays them on one axis, series i's samples at keys (t - origin) + i * span."""

    times: FloatArray
    values: FloatArray
    starts: npt.NDArray[np.int64]
    lengths: npt.NDArray[np.int64]

    @classmethod
    def of(cls, series: Sequence[Series]) -> _Packed:
        lengths = np.fromiter((x.times_seconds.size for x in series), dtype=np.int64,
                              count=len(series))
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
        if not lengths.sum():
            empty = np.empty(0)
            return cls(empty, empty, starts, lengths)
        return cls(np.concatenate([x.times_seconds for x in series]),
                   np.concatenate([x.values for x in series]), starts, lengths)

    def keys(self, origin: float, span: float, owners: FloatArray | None = None) -> FloatArray:
        """Each sample's place on the one axis: (t - origin) + its series' owner * span (owner
        i for series i unless `owners` says otherwise)."""
        owner = np.arange(self.lengths.size, dtype=np.float64) if owners is None else owners
        return (self.times - origin) + np.repeat(owner, self.lengths) * span

    def aligned(self, lengths: npt.NDArray[np.int64], flat: FloatArray) -> bool:
        """Whether every row's series has exactly the sample times `flat` (each row's
        `lengths[i]` times, concatenated), strictly increasing within each row: then the sample
        held at each of those times is the one taken at it (what Prometheus gives when every
        series of a container is read with the same range and step)."""
        if not (np.array_equal(self.lengths, lengths) and np.array_equal(self.times, flat)):
            return False
        rising = np.diff(flat) > 0
        rising[self.starts[1:][self.starts[1:] > 0] - 1] = True  # row boundaries
        return bool(rising.all())

    def held(self, at: FloatArray, origin: float, span: float) -> tuple[FloatArray, FloatArray]:
        """(value, time) of the last sample at or before each time of `at` (N, K) in its own
        row's series; NaN where there is none. Every time must lie in [origin, origin + span)."""
        if self.times.size == 0:
            nan = np.full(at.shape, np.nan)
            return nan, nan
        keys = self.keys(origin, span)
        rows = np.arange(at.shape[0], dtype=np.float64)[:, None]
        with np.errstate(invalid="ignore"):
            wanted = np.where(np.isfinite(at), (at - origin) + rows * span, -1.0)
        index = np.searchsorted(keys, wanted, side="right") - 1
        mine = (index >= self.starts[:, None]) & np.isfinite(at)
        safe = np.clip(index, 0, keys.size - 1)
        return (np.where(mine, self.values[safe], np.nan),
                np.where(mine, self.times[safe], np.nan))


def histories(snapshot: Snapshot, containers: Sequence[Container]) -> Histories:
    """The forecast's input for `containers` at once (module docstring): per container its
    evaluation samples, the steps and cores held at each, and whether its node was busy then
    (every container of the snapshot on the node counted)."""
    capacity = {n.name: n.cpu_capacity for n in snapshot.nodes}
    n = len(containers)
    # `.size` of the arrays rather than `len(series)`: a Python call per series adds up at
    # 10,000 containers.
    lengths = np.fromiter((c.evaluation.times_seconds.size for c in containers),
                          dtype=np.int64, count=n)
    width = int(lengths.max()) if n else 0
    rows = np.repeat(np.arange(n), lengths)
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64) if n else lengths
    cols = np.arange(int(lengths.sum())) - np.repeat(starts, lengths)

    def padded(concatenated: FloatArray) -> FloatArray:
        """Every container's samples, concatenated, as rows of (n, width), NaN after each
        row's own (a reshape when every container has `width` samples)."""
        if n and (lengths == width).all():
            return concatenated.reshape(n, width).copy()
        out = np.full((n, width), np.nan)
        if n and width:
            out[rows, cols] = concatenated
        return out

    flat = (np.concatenate([c.evaluation.times_seconds for c in containers]) if n
            else np.empty(0))
    times = padded(flat)
    losses = padded(np.concatenate([c.evaluation.values for c in containers]) if n
                    else np.empty(0))
    steps_packed = _Packed.of([c.steps for c in containers])
    cpu_packed = _Packed.of([c.cpu_usage for c in containers])
    members = [c for c in snapshot.containers if c.cpu_usage.times_seconds.size]
    load = _Packed.of([c.cpu_usage for c in members])
    # One axis for all of them: every time read lies in [low, high], NaN (a series with a
    # `problem`) passed over.
    read = (flat, steps_packed.times, cpu_packed.times, load.times)
    low = min(float(np.fmin.reduce(t, initial=np.inf)) for t in read)
    high = max(float(np.fmax.reduce(t, initial=-np.inf)) for t in read)
    low, high = (low - 1.0, high + 1.0) if low <= high else (-1.0, 1.0)
    span = high - low + 1.0

    def held(packed: _Packed) -> tuple[FloatArray, FloatArray]:
        if not (n and width and packed.aligned(lengths, flat)):
            return packed.held(times, low, span)
        return padded(packed.values), times.copy()

    steps, _ = held(steps_packed)
    cores, read_at = held(cpu_packed)
    node_cores = np.array([capacity[c.node] for c in containers], dtype=np.float64)
    busy = _busy(snapshot, containers, read_at, node_cores=node_cores, members=members,
                 load=load, low=low, span=span)
    targets = [target_loss(c)[0] for c in containers]
    return Histories(
        times_seconds=times, losses=losses, steps=steps, cores=cores, busy=busy,
        lengths=lengths.astype(np.float64),
        allocation_cores=np.array([c.cpu_allocation for c in containers],
                                  dtype=np.float64) * node_cores,
        max_cores=node_cores,
        total_steps=np.array([np.nan if c.total_steps is None else c.total_steps
                              for c in containers], dtype=np.float64),
        target_loss=np.array([np.nan if t is None else t for t in targets], dtype=np.float64),
        smoothing_steps=np.full(n, float(DEFAULT_SMOOTHING_STEPS)))


def _busy(snapshot: Snapshot, containers: Sequence[Container], read_at: FloatArray, *,
          node_cores: FloatArray, members: Sequence[Container], load: _Packed, low: float,
          span: float) -> FloatArray:
    """1 where the container's node used at least BUSY_SHARE of its cores at the CPU sample
    read at each evaluation sample (`read_at`), 0 where not, NaN where not known. `members`
    are the snapshot's containers with CPU samples, `load` their CPU series packed."""
    names = sorted({c.node for c in snapshot.containers})
    index = {name: k for k, name in enumerate(names)}
    if not members or not containers:
        return np.full(read_at.shape, np.nan)
    keys = load.keys(low, span, np.array([index[c.node] for c in members], dtype=np.float64))
    values = np.nan_to_num(load.values)
    unique, where = _groups(keys)
    node_load = np.bincount(where, weights=values, minlength=unique.size)
    node = np.array([index[c.node] for c in containers], dtype=np.float64)[:, None]
    with np.errstate(invalid="ignore"):
        wanted = (read_at - low) + node * span
    at = np.clip(np.searchsorted(unique, np.nan_to_num(wanted, nan=-1.0)), 0, unique.size - 1)
    found = np.isfinite(wanted) & (unique[at] == wanted)
    busy = node_load[at] >= BUSY_SHARE * node_cores[:, None]
    return np.where(found, busy.astype(np.float64), np.nan)


def _groups(keys: FloatArray) -> tuple[FloatArray, npt.NDArray[np.int64]]:
    """`np.unique(keys, return_inverse=True)` by a stable argsort: the keys come as sorted runs
    (each container's samples in time order), which a stable sort merges several times faster
    than `unique`'s own sort."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    new = np.empty(ordered.size, dtype=np.bool_)
    new[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    where = np.empty(ordered.size, dtype=np.int64)
    where[order] = np.cumsum(new) - 1
    return ordered[new], where


def settings_of(policy: PolicyDocument, snapshot: Snapshot, *, alpha: float,
                interval_seconds: float) -> Settings:
    """What "converged" means for this policy's forecasts (its kind's `alpha` per base
    interval, its evaluation's normalization), at the snapshot's time, with each job's
    remaining improvement (what `on_converged` reads, `policyd.engine.delivery`)."""
    evaluation = policy.spec.evaluation
    return Settings(now_seconds=snapshot.time, alpha=alpha, interval_seconds=interval_seconds,
                    normalization=evaluation.normalization, direction=evaluation.direction,
                    improvement=True)


@dataclass(frozen=True, kw_only=True, eq=False)
class Forecasted:
    """The forecasts of some containers: the arrays for vectorised use (`forecasts`, rows in
    `ids` order), `notes[id]` why a container has none (or what its target could not say), and
    `unjudged` the containers not forecast at all (no steps reported). `by_id` (the engine's
    `Forecast` per container, None where there is none) is built on first use; `jobs()` gives
    the forecasts as a decision reports them straight from the arrays."""

    ids: tuple[str, ...]
    forecasts: Forecasts | None
    notes: Mapping[str, str]
    unjudged: tuple[str, ...] = ()

    @cached_property
    def by_id(self) -> Mapping[str, Forecast | None]:
        out: dict[str, Forecast | None] = dict.fromkeys(self.unjudged)
        if self.forecasts is not None:
            out.update(zip(self.ids, self.forecasts.every(), strict=True))
        return out

    def jobs(self) -> dict[str, JobForecast | None]:
        """`job_forecast` of every container's forecast, with its note, None where there is
        none; read out of the arrays once (10,000 at a time), without a `Forecast` between:
        what `_job_forecast` does to one, done to every row, and `JobForecast`'s check made
        on the arrays (a row that fails it is built the checking way, and raises)."""
        out: dict[str, JobForecast | None] = dict.fromkeys(self.unjudged)
        f = self.forecasts
        if f is None:
            return out
        convergence = convergence_basis(f.settings)
        remaining = np.maximum(f.remaining_seconds, 0.0)
        with np.errstate(divide="ignore"):
            columns = {"steps_done": f.steps_done, "remaining_steps": f.remaining_steps,
                       "remaining_seconds": remaining, "finish_at": f.finish_at,
                       "low_seconds": np.minimum(f.low_seconds, remaining),
                       "high_seconds": np.maximum(f.high_seconds, remaining),
                       "steps_per_second": 1.0 / f.seconds_per_step}
        fine = valid(columns).tolist()
        lists = {name: a.tolist() for name, a in columns.items()}
        total, target, eta = (f.total_steps.tolist(), f.target_loss.tolist(),
                              f.target_eta_seconds.tolist())
        improvement = (f.remaining_improvement.tolist() if f.remaining_improvement is not None
                       else [math.nan] * len(self.ids))
        notes = self.notes
        for i, (cid, note, remark) in enumerate(zip(self.ids, f.notes, f.remarks,
                                                    strict=True)):
            if note:
                out[cid] = None
                continue
            extra = notes.get(cid, "")
            t, gain = total[i], improvement[i]
            row = {name: values[i] for name, values in lists.items()}
            row.update(
                total_steps=None if math.isnan(t) else t,
                basis="total steps" if not math.isnan(t) else convergence,
                target_loss=None if math.isnan(target[i]) else target[i],
                target_eta_seconds=None if math.isnan(eta[i]) else eta[i],
                note=f"{remark}; {extra}" if remark and extra else remark or extra,
                remaining_improvement=None if math.isnan(gain) else gain)
            out[cid] = JobForecast.checked(row) if fine[i] else JobForecast(**row)
        return out


def forecast_containers(settings: Settings, snapshot: Snapshot,
                        containers: Sequence[Container]) -> Forecasted:
    """Forecast every one of `containers` under `settings` (`settings_of`)."""
    notes: dict[str, str] = {}
    judged = []
    for c in containers:
        if c.steps.times_seconds.size == 0:
            notes[c.id] = ("no steps reported (the exporter's policyd_training_steps_total): "
                           "the job's speed cannot be measured")
        else:
            judged.append(c)
    unjudged = tuple(notes)
    forecasts = None
    if judged:
        forecasts = forecast(histories(snapshot, judged), settings)
        for c, note in zip(judged, forecasts.notes, strict=True):
            if note:
                notes[c.id] = note
    for c in containers:
        _, why = target_loss(c)
        if why and c.id not in notes:
            notes[c.id] = why
    return Forecasted(ids=tuple(c.id for c in judged), forecasts=forecasts, notes=notes,
                      unjudged=unjudged)


def _job_forecast(*, steps_done: float, total_steps: float | None, remaining_steps: float,
                  remaining_seconds: float, finish_at: float, low_seconds: float,
                  high_seconds: float, steps_per_second: float, basis: str,
                  target_loss: float | None, target_eta_seconds: float | None,
                  notes: tuple[str, str], remaining_improvement: float | None) -> JobForecast:
    """The one reading of an engine forecast as a decision reports it: no negative seconds
    left, and the range widened to hold them."""
    remaining = max(remaining_seconds, 0.0)
    return JobForecast(
        steps_done=steps_done, total_steps=total_steps, remaining_steps=remaining_steps,
        remaining_seconds=remaining, finish_at=finish_at,
        low_seconds=min(low_seconds, remaining), high_seconds=max(high_seconds, remaining),
        steps_per_second=steps_per_second, basis=basis, target_loss=target_loss,
        target_eta_seconds=target_eta_seconds, note="; ".join(n for n in notes if n),
        remaining_improvement=remaining_improvement)


def job_forecast(f: Forecast, note: str = "") -> JobForecast:
    """The engine's forecast as a decision reports it."""
    return _job_forecast(
        steps_done=f.steps_done, total_steps=f.total_steps, remaining_steps=f.remaining_steps,
        remaining_seconds=f.remaining_seconds, finish_at=f.finish_at,
        low_seconds=f.low_seconds, high_seconds=f.high_seconds,
        steps_per_second=f.steps_per_second, basis=f.basis, target_loss=f.target_loss,
        target_eta_seconds=f.target_eta_seconds, notes=(f.note, note),
        remaining_improvement=f.remaining_improvement)


def with_forecasts(decision: Decision, settings: Settings, snapshot: Snapshot, *,
                   categorised_only: bool = False) -> Decision:
    """`decision` with a forecast (or a note why there is none) on every assessment that has
    neither yet (with `categorised_only`, only on those with a category), under `settings`."""
    wanted = {a.container for a in decision.assessments
              if a.forecast is None and not a.forecast_note
              and (a.category is not None or not categorised_only)}
    if not wanted:
        return decision
    containers = [c for c in snapshot.containers if c.id in wanted]
    found = forecast_containers(settings, snapshot, containers)
    jobs = found.jobs()
    assessments = []
    for a in decision.assessments:
        if a.container in wanted:
            f = jobs.get(a.container)
            a = (a.but(forecast=f) if f is not None  # noqa: PLW2901
                 else a.but(forecast_note=found.notes.get(a.container, "") or "not forecast"))
        assessments.append(a)
    return replace(decision, assessments=tuple(assessments))
