"""Predictive on one worker: the jobs ranked by their forecasts and the worker's cores granted
in that order (`policyd.engine.predictive`'s module docstring, steps 1-5).

`jobs_of` forecasts the selected jobs and keys each by the time it would still need with the
most cores it can use on its worker; `node_plans` orders one worker's jobs, grants its cores
and turns them into limits with the floor, each with its reason. What a plan leaves a job short
of a whole first core makes it a candidate for a move (`Plan.waits`). Used alike by the
one-snapshot planner and by a node agent reporting its worker (`predictive_reports`). Pure: no
I/O, no clock.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from policyd.engine.forecast_output import Forecast
from policyd.engine.forecasting import Forecasted, forecast_containers, settings_of
from policyd.engine.guards import action_blocked
from policyd.model import Container, JobForecast, Snapshot, WaitingJob

if TYPE_CHECKING:  # the kind's module imports this one
    from policyd.engine.predictive import PredictivePolicy, PredictiveSpec

NEW_KEY = 1e300
"""A job that has just started, before its first forecast, ranks after every forecast one
(its whole run is still ahead of it) and before those that cannot be forecast."""

SERVED, FLOOR, NEW, FREE = "SERVED", "FLOOR", "NEW", "FREE"
"""Categories: granted cores above the floor; waiting at the floor; just started, no forecast
yet (ranked after the forecast jobs); no job on the worker has a forecast (free competition)."""


@dataclass(frozen=True, kw_only=True)
class Job:
    """A selected job on its worker: its forecast (or why it has none) and its rank's key."""

    container: Container
    forecast: Forecast | None
    reported: JobForecast | None  # the forecast as the decision reports it
    note: str  # why there is no forecast ("" when there is one)
    key: float  # predicted seconds left at its best on this worker (-inf: new, inf: unknown)
    best_cores: float  # what it can use on this worker


def _one_core_work(jobs: Sequence[Job]) -> list[float]:
    """Each job's remaining seconds on one core (NaN without a forecast)."""
    return [j.forecast.remaining_seconds_at(1.0) if j.forecast is not None else math.nan
            for j in jobs]


def critical(jobs: Sequence[Job], capacity: float,
             work: Sequence[float] | None = None) -> tuple[int, str] | None:
    """The job that bounds the worker's makespan, if one does, and why: the one whose
    remaining work on one core is at least the worker's whole remaining work spread over its
    cores (nothing can finish before it then, so every interval it waits is added to the
    makespan). `work`: `_one_core_work(jobs)`, when the caller has it."""
    if work is None:
        work = _one_core_work(jobs)
    known = [(w, i) for i, w in enumerate(work) if math.isfinite(w)]
    if len(known) < 2:
        return None
    longest, index = max(known)
    spread = sum(w for w, _ in known) / capacity
    if longest < spread:
        return None
    return index, (f"served before its turn: it bounds the worker's makespan ({longest:.0f} s "
                   f"of work on one core, the worker's {spread:.0f} s over its "
                   f"{capacity:g} cores)")


def _grant(jobs: Sequence[Job], capacity: float, first: Sequence[int] = ()) -> list[float]:
    """Cores per job (in `jobs`' order): first cores in order (the `first` jobs before all:
    the makespan's and the ones waiting too long), then extras in order."""
    cores = [0.0] * len(jobs)
    left = capacity
    order = [*first, *(i for i in range(len(jobs)) if i not in first)]
    rounds = ([min(j.best_cores, 1.0) for j in jobs], [j.best_cores for j in jobs])
    for limit, sequence in zip(rounds, (order, range(len(jobs))), strict=True):
        for i in sequence:
            if left <= 1e-12:
                break
            extra = min(limit[i] - cores[i], left)
            if extra > 0:
                cores[i] += extra
                left -= extra
    return cores


def _order(jobs: list[Job], *, hysteresis: float, floor: float) -> list[Job]:
    """Shortest key first; a served job's (limit above `floor`) counts `hysteresis` shorter
    (module docstring)."""
    def key(j: Job) -> tuple[float, str]:
        served = j.container.cpu_allocation > floor + 1e-9
        k = j.key * (1.0 - hysteresis) if served and math.isfinite(j.key) else j.key
        return (k, j.container.id)
    return sorted(jobs, key=key)


def selected(policy: PredictivePolicy, snapshot: Snapshot) -> list[Container]:
    """The containers `policy` selects in `snapshot`, by node then id."""
    return sorted((c for c in snapshot.containers if policy.spec.selector.selects(c)),
                  key=lambda c: (c.node, c.id))


def forecasts_of(policy: PredictivePolicy, snapshot: Snapshot,
                 chosen: Sequence[Container]) -> Forecasted:
    """The forecasts of `chosen`, the jobs `policy` selects (`jobs_of`'s `found`)."""
    spec = policy.spec
    settings = settings_of(policy, snapshot, alpha=spec.alpha,
                           interval_seconds=spec.interval_seconds)
    return forecast_containers(settings, snapshot, {c.id for c in chosen})


def jobs_of(policy: PredictivePolicy, snapshot: Snapshot, chosen: Sequence[Container],
            found: Forecasted | None = None) -> list[Job]:
    """The jobs of `chosen`, each with its forecast (`found`: made already for exactly these
    containers with this policy's settings, else made here) and its key in the order."""
    spec = policy.spec
    capacity = {n.name: n.cpu_capacity for n in snapshot.nodes}
    if found is None:
        found = forecasts_of(policy, snapshot, chosen)
    reported = found.jobs()
    young_seconds = 2 * snapshot.interval_seconds(policy.name, spec.interval_seconds)
    jobs = []
    for c in chosen:
        f = found.by_id.get(c.id)
        cap = capacity[c.node]
        if f is not None:
            # Any job can use a core: a cap below one comes from intervals spent at the floor
            # (the others' shares), not from the job's threads. The cap is lifted in the
            # forecast itself, which prices every time below (the key, the work on one core,
            # the late test, a move): `remaining_seconds_at` caps the cores it is given.
            f = f.on_a_whole_core()
            best = min(max(f.cap_cores, 1.0), cap)
            jobs.append(Job(container=c, forecast=f, reported=reported[c.id], note="",
                             best_cores=best,
                             key=f.remaining_seconds_at(best)))
            continue
        young = snapshot.time - c.started_at <= young_seconds
        jobs.append(Job(container=c, forecast=None, reported=None,
                         note=found.notes.get(c.id, ""),
                         best_cores=cap, key=NEW_KEY if young else math.inf))
    return jobs


def _time(seconds: float) -> str:
    return f"{seconds:.0f} s" if math.isfinite(seconds) else "unknown"


@dataclass(frozen=True, kw_only=True)
class Plan:
    """One job's outcome on its worker: its limit, category and why; `waits` when it did not
    get a whole first core (a candidate for a move)."""

    job: Job
    fraction: float
    category: str
    reason: str
    granted: float
    ahead_seconds: float  # work on one core of the jobs served before it, itself included

    @property
    def waits(self) -> bool:
        return self.job.forecast is not None and self.granted < min(self.job.best_cores,
                                                                     1.0) - 1e-9


def _slowdowns(ordered: Sequence[Job], work: Sequence[float], *, now: float,
               capacity: float) -> list[float]:
    """Per job, how late it would finish even if served from now on (its age plus its work at
    one core, `work` from `_one_core_work`), over how long its whole run takes at an equal
    share of the worker (its steps done and left at min(capacity / n, 1) cores); NaN without a
    forecast. Above 1 + `max_slowdown`, waiting any longer makes it slower than an equal share
    would."""
    equal = min(capacity / len(ordered), 1.0)
    out = []
    for j, one_core in zip(ordered, work, strict=True):
        f = j.forecast
        if f is None:
            out.append(math.nan)
            continue
        age = max(now - j.container.started_at, 0.0)
        fair = (f.steps_done + f.remaining_steps) * f.seconds_per_step_at(min(equal,
                                                                              j.best_cores))
        cores = min(1.0, j.best_cores)
        served_now = age + (one_core if cores == 1.0 else f.remaining_seconds_at(cores))
        out.append(served_now / fair if fair > 0 else math.nan)
    return out


def node_plans(jobs: list[Job], capacity: float, spec: PredictiveSpec, *,
                now: float) -> list[Plan]:
    n = len(jobs)
    floor = 1.0 / (spec.beta * n)
    if not any(j.forecast is not None for j in jobs):
        return [Plan(job=j, fraction=1.0, category=FREE, granted=math.nan,
                      ahead_seconds=math.nan,
                      reason="no job on the worker has a forecast: free competition")
                for j in jobs]
    ordered = _order(jobs, hysteresis=spec.hysteresis, floor=floor)
    # Jobs granted before their turn, and why: the makespan's, then those waiting too long,
    # as many as leaves one core to the order itself.
    work = _one_core_work(ordered)
    bound = critical(ordered, capacity, work)
    before: dict[int, str] = {bound[0]: bound[1]} if bound is not None else {}
    late = sorted((-s, i) for i, s in enumerate(_slowdowns(ordered, work, now=now,
                                                           capacity=capacity))
                  if s > 1.0 + spec.max_slowdown and i not in before)
    for negative, i in late[:max(int(capacity) - 1 - len(before), 0)]:
        before[i] = (f"served before its turn: waiting longer would make it end over "
                     f"{1 + spec.max_slowdown:g}x as late as an equal share of the worker "
                     f"(served from now on, {-negative:.2f}x)")
    cores = _grant(ordered, capacity, list(before))
    top = max(cores)
    plans, ahead = [], 0.0
    for rank, (j, granted, one_core) in enumerate(zip(ordered, cores, work, strict=True),
                                                  start=1):
        if j.forecast is not None:
            ahead += one_core
        share = granted / top if spec.mode == "shares" else granted / capacity
        fraction = min(max(share, floor), 1.0)
        category = (NEW if j.forecast is None and j.key == NEW_KEY else
                    SERVED if share > floor + 1e-9 else FLOOR)
        plans.append(Plan(job=j, fraction=fraction, category=category, granted=granted,
                           ahead_seconds=ahead / capacity,
                           reason=_reason(j, rank, n, granted, fraction, floor=floor,
                                          spec=spec, before=before.get(rank - 1, ""))))
    return plans


def _reason(j: Job, rank: int, n: int, granted: float, fraction: float, *, floor: float,
            spec: PredictiveSpec, before: str = "") -> str:
    if j.forecast is None:
        why = ("new, no forecast yet: served after the forecast jobs" if j.key == NEW_KEY else
               f"no forecast ({j.note or 'unknown'}): served last")
        return f"#{rank} of {n}: {why}; {granted:.2f} cores -> {fraction:.3g}"
    f = j.forecast
    at_now = f.remaining_seconds
    return (f"#{rank} of {n} by predicted remaining time: {_time(j.key)} at its best "
            f"({j.best_cores:.2g} cores), {_time(at_now)} at its current allocation "
            f"({f.remaining_steps:.0f} steps left, {f.basis}); granted {granted:.2f} cores "
            f"-> {fraction:.3g}" + (f" (floor 1/({spec.beta:g}*{n})={floor:.3g})"
                                     if fraction <= floor + 1e-9 else "")
            + (f"; {before}" if before else ""))


def plans_of(policy: PredictivePolicy, snapshot: Snapshot, found: Forecasted | None = None,
             chosen: Sequence[Container] | None = None) -> dict[str, list[Plan]]:
    """Every worker's plan for the jobs `policy` selects in `snapshot`, by worker (in name
    order; a worker without such jobs has none). `found`: the forecasts of those jobs (in
    any order: they are looked up by id), when the caller has made them already (`jobs_of`);
    `chosen`: those jobs (`selected`), when the caller has them."""
    spec, now = policy.spec, snapshot.time
    chosen = selected(policy, snapshot) if chosen is None else chosen
    by_node: defaultdict[str, list[Job]] = defaultdict(list)
    for job in jobs_of(policy, snapshot, chosen, found):
        by_node[job.container.node].append(job)
    capacity = {n.name: n.cpu_capacity for n in snapshot.nodes}
    return {node: node_plans(jobs, capacity[node], spec, now=now)
            for node, jobs in by_node.items()}


def waiting_jobs(plans: Sequence[Plan], spec: PredictiveSpec, now: float
                 ) -> list[tuple[str, WaitingJob]]:
    """One worker's jobs left short of a whole first core that the guards let move, each as
    its worker and its `WaitingJob` (in its plan's order)."""
    out = []
    for p in plans:
        c, f = p.job.container, p.job.forecast
        if f is None or not p.waits or action_blocked(c, spec, now, disrupts=True) is not None:
            continue
        try:
            waiting = WaitingJob(
                container=c.id, ahead_seconds=p.ahead_seconds, best_cores=p.job.best_cores,
                remaining_steps=f.remaining_steps, serial_seconds=f.serial_seconds,
                parallel_seconds=f.parallel_seconds, cap_cores=f.cap_cores)
        except ValueError:  # a figure out of range (NaN): no move priced on it, no failed tick
            continue
        out.append((c.node, waiting))
    return out


def spare_cores(plans: Sequence[Plan], capacity: float) -> float:
    """A worker's cores its plan grants no job."""
    return capacity - sum(p.granted for p in plans if math.isfinite(p.granted))
