"""FlowCon2 split across node agents and the manager: each agent sets its own worker's limits and
reports its jobs as FlowCon2's model sees them; the manager moves converged jobs and admits held
ones from the reports alone (`policyd.model.node_report`).

Theory of operation. FlowCon2's limits (`policyd.engine.flowcon2`, step 1: FlowCon's Algorithm
1, or Predictive's per-worker plan under `order: remaining`) need only one worker's jobs, so a
node agent decides and applies them (`flowcon2.node_part`: that FlowCon or Predictive policy,
under the policy's name, without moves and admissions). Moves and admissions need every worker,
priced by the drain model (`policyd.engine.drain`): when each job of a worker would end with a
job moved in or out, or a held job started there. No fixed-size aggregate of a worker gives
those finishes exactly: they follow the order in which its jobs end, each at its own steps and
speed model, the cores flowing to the rest, and a converged job's limit changing once only
converged jobs are left; a job arriving from elsewhere changes that order. So each agent reports
its worker's jobs as the model sees them (`flowcon2.node_reports`, one `ResidentJob` each, a
dozen figures: its next limit, the cores it can use, whether it counts converged, its forecast's
steps and speed model, its current limit and start), and the worker's stated speed. That is
what the one-snapshot planner's model holds of a job (`flowcon2_placement.ModelJob`), so the
manager rebuilds the model from the reports and runs the same rules on it
(`flowcon2_placement.best_moves`, `admit_held`): the move's gain (the jobs left on its worker,
the job itself, the jobs on the target, each worker drained), FlowCon's or Predictive's limit
for the job on its target, and each held job's effective cores at an equal share beside the
jobs there. What is reported per worker follows its jobs (a worker admits jobs while one gets
`admission_min_cores` effective cores, so about one per core), never their samples: the manager
forecasts nothing, replays no category, and judges no speed.

The jobs the guards let move (converged, or FLOOR under `order: remaining`; forecast; not moved
before; not held back by opt-out, minimum age, cooldown or back-off: `flowcon2_placement.
may_move`) are flagged, except those whose bound on the gain does not beat the move's cost x
(1 + margin) (`flowcon2_placement.move_bound`: what the jobs left save plus the job's own finish
where it is, as if it ended at once elsewhere harming no one, which is the least a move's gain
counts the target's jobs losing: so no move of such a job could pass). The flags are not cut
to what a cycle may move off one worker, as Predictive's and Deadline's lists are: they cost
one figure of a job already reported, and which of a worker's converged jobs gains most
depends on the targets (a cut by the bound moved other jobs than one snapshot in
flowcon2-8w-60-hetero at `order: growth`).

A flagged job also carries its side of a move (`with_sides`): when it ends where it is as its
worker drains, and what the jobs left there save without it. Those take a drain of its worker
without it, one per movable job, which the agent has its worker's jobs for and the manager
would otherwise repeat for every movable job of the cluster each cycle (three in four of its
drains at 10,000 workers). The agent works them out on the very model the manager rebuilds
from the report (`worker_model`, the jobs in the order the source lists them, the node's
stated speed or 1), so the manager takes them as they are (`reported_sides`) where it prices
the worker alike, drains a worker only when it prices a move there or a move changes it, and
decides to the last digit what it decides without them. It works a side out itself for a
worker priced at another speed (not stated where other speeds are: their average) or holding
a job without a forecast under `admission: forecast` (taken to be the typical job), and for
an agent from before sides were reported.

Differences from deciding from one snapshot, all from the split itself:

* A node's speed is its stated one (`policyd.io/speed`, reported), else the average of the
  stated ones (1.0 if none): the manager does not judge speeds (`policyd.engine.node_speed`
  judges from the step times of jobs of one workload on several workers, screened against the
  spread of every job's residual around a cluster-wide fit, which no per-worker aggregate
  reproduces: it would take each job's step time). Judged speeds are one snapshot's only; a
  cluster of unequal machines states them.
* A worker whose report is missing is not in the manager's picture (the source says so); an
  agent judges its forecasts and the guards at its own snapshot's time.
* A job the manager moves had its limit set by its agent in the same cycle (the one-snapshot
  planner leaves a moving job's limit as it is).
* An agent whose snapshot holds its node alone reads its speed, when not stated, as 1.0 for the
  bound that decides whether a job is flagged movable; the manager prices it at the average of
  the stated speeds.
* A forecast with a figure out of range (not a finite number, or negative) counts as none in
  the report; a move's reason names no forecast basis (total steps or convergence).

tests/engine/test_flowcon2_reports.py plays whole scenarios both ways. The manager's decision
has one assessment per reported movable job (moved, or why not), the admissions and the queue;
the jobs' limits, categories and forecasts are in their agents' decisions. Pure: no I/O, no
clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from policyd.engine.flowcon2_placement import (
    ModelJob,
    drained,
    growth_arrival,
    move_reason,
    placed,
    remaining_arrival,
    source_side,
)
from policyd.engine.forecast_output import Forecast
from policyd.engine.node_speed import AVERAGE_SPEED, UNJUDGED, NodeSpeeds, unjudged
from policyd.engine.predictive_node import Job
from policyd.model import (
    Assessment,
    Container,
    Decision,
    NodeReport,
    ResidentJob,
    Series,
    Snapshot,
)

if TYPE_CHECKING:  # the kind's module imports this one
    from policyd.engine.flowcon2 import FlowCon2Policy
    from policyd.engine.predictive import PredictiveSpec

BASIS = "as its node agent forecast it"
"""A rebuilt forecast's basis, for reasons: the report does not say which it was."""


def resident(job: ModelJob, container: Container, *, movable: bool) -> ResidentJob:
    """A job of the model (`flowcon2_placement.ModelJob`) as its agent reports it; a forecast
    with a figure out of range is reported as none."""
    f = job.forecast
    known = f is not None and all(
        math.isfinite(v) and v >= 0 for v in (f.steps_done, f.remaining_steps, f.serial_seconds,
                                              f.parallel_seconds, f.cap_cores))
    return ResidentJob(
        container=job.id, limit_fraction=job.weight, usable_cores=job.cap,
        converged=job.converged, movable=movable and known, forecast=known,
        steps_done=f.steps_done if f is not None and known else 0.0,
        remaining_steps=f.remaining_steps if f is not None and known else 0.0,
        serial_seconds=f.serial_seconds if f is not None and known else 0.0,
        parallel_seconds=f.parallel_seconds if f is not None and known else 0.0,
        cap_cores=f.cap_cores if f is not None and known else 0.0,
        allocation_fraction=container.cpu_allocation, started_at_seconds=container.started_at)


def worker_model(residents: Sequence[ResidentJob], forecasts: Mapping[str, Forecast | None],
                 *, speed: float, hard: bool) -> list[ModelJob]:
    """A worker's reported jobs as the model holds them, their forecasts rebuilt (`_forecast`,
    by id in `forecasts`), measured at the worker's `speed`."""
    return [ModelJob(id=r.container, weight=r.limit_fraction, cap=r.usable_cores,
                     converged=r.converged, forecast=forecasts[r.container], speed=speed,
                     hard=hard) for r in residents]


def side_speed(stated: float | None) -> float:
    """The speed an agent reports its jobs' sides of a move at (`with_sides`): its node's
    stated speed, else an average core's."""
    return stated if stated else AVERAGE_SPEED


def with_sides(residents: Sequence[ResidentJob], capacity: float, *, stated: float | None,
               hard: bool) -> tuple[ResidentJob, ...]:
    """A worker's reported jobs (`residents`, on `capacity` cores), by id as the manager's
    source lists them (a drain's sums follow the jobs' order), each movable one with its side
    of a move (`flowcon2_placement.source_side`) worked out on the model the manager makes
    of these very figures (`worker_model`) at `side_speed(stated)`: the manager drains the
    worker again only when a move changes it, or when it prices the worker at another speed
    (a speed not stated where others are: their average) or with other jobs (a job without a
    forecast taken to be the typical job, under `admission: forecast`)."""
    residents = sorted(residents, key=lambda r: r.container)  # as the source lists them
    flagged = [i for i, r in enumerate(residents) if r.movable]
    if not flagged:
        return tuple(residents)
    speed = side_speed(stated)
    jobs = worker_model(residents, {r.container: _forecast(r) for r in residents},
                        speed=speed, hard=hard)
    ends, total = drained(jobs, capacity, speed)
    out = list(residents)
    for i in flagged:
        finish, freed = source_side(i, jobs, capacity, speed, ends=ends, total=total)
        if math.isfinite(finish) and math.isfinite(freed):
            out[i] = replace(residents[i], finish_seconds=finish, freed_seconds=freed)
    return tuple(out)


def reported_sides(reports: Sequence[NodeReport], speeds: NodeSpeeds, *,
                   assumed: bool) -> dict[str, tuple[float, float]]:
    """The sides of a move the agents reported (`with_sides`) that hold on the manager's
    model: of workers it prices at the speed they were worked out at, and, when jobs without
    a forecast are taken to be the typical job (`assumed`), holding none."""
    return {j.container: (j.finish_seconds, j.freed_seconds)
            for r in reports
            if speeds.of(r.node) == side_speed(r.stated_speed)
            and not (assumed and not all(j.forecast for j in r.residents))
            for j in r.residents
            if j.movable and j.finish_seconds is not None and j.freed_seconds is not None}


def _forecast(r: ResidentJob) -> Forecast | None:
    """The forecast a resident job's figures hold (what the model reads of it), or None."""
    if not r.forecast:
        return None
    one_core = r.serial_seconds + r.parallel_seconds
    return Forecast(
        steps_done=r.steps_done, total_steps=None, remaining_steps=r.remaining_steps,
        remaining_seconds=math.nan, finish_at=math.nan, low_seconds=math.nan,
        high_seconds=math.nan, target_loss=None, target_eta_seconds=None, basis=BASIS,
        steps_per_second=math.nan,
        parallel_fraction=r.parallel_seconds / one_core if one_core > 0 else math.nan,
        serial_seconds=r.serial_seconds, parallel_seconds=r.parallel_seconds,
        cap_cores=r.cap_cores)


def _ranked(r: ResidentJob, node: str, forecast: Forecast, capacity: float) -> Job:
    """A resident job as Predictive's plan of a worker ranks it (`order: remaining`: the limit
    a job moved there gets): its current limit and start, its key at the most cores it can
    use on its worker (`predictive_node.jobs_of`)."""
    best = min(max(forecast.cap_cores, 1.0), capacity)
    container = Container(id=r.container, name=r.container, node=node,
                          started_at=r.started_at_seconds, evaluation=Series.empty(),
                          cpu_usage=Series.empty(), cpu_allocation=r.allocation_fraction)
    return Job(container=container, forecast=forecast, reported=None, note="",
               key=forecast.remaining_seconds_at(best), best_cores=best)


class _Ranked(Mapping[str, Job]):
    """The resident jobs as Predictive's plan ranks them (`_ranked`), by id, each made when
    first asked for: only the jobs on the workers a move is priced on are."""

    def __init__(self, residents: Mapping[str, tuple[str, ResidentJob]],
                 forecasts: Mapping[str, Forecast | None],
                 capacity: Mapping[str, float]) -> None:
        self._residents, self._forecasts, self._capacity = residents, forecasts, capacity
        self._made: dict[str, Job] = {}

    def __getitem__(self, container: str) -> Job:
        if container not in self._made:
            node, r = self._residents[container]
            f = self._forecasts[container]
            if f is None:  # only forecast jobs are priced (`move_gain`)
                raise KeyError(container)
            self._made[container] = _ranked(r, node, f, self._capacity[node])
        return self._made[container]

    def __iter__(self) -> Iterator[str]:
        return (c for c in self._residents if self._forecasts[c] is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def plan_from_reports(policy: FlowCon2Policy, snapshot: Snapshot, *,
                      ranked: PredictiveSpec) -> Decision:
    """The moves and admissions of `policy`, decided on the manager from its node agents'
    reports in `snapshot` and the held jobs of its source (module docstring); `ranked`: the
    settings of Predictive's per-worker plan (`flowcon2.as_predictive`), for `order:
    remaining`."""
    spec, now = policy.spec, snapshot.time
    reports = sorted((r for r in snapshot.node_reports if r.policy == policy.name),
                     key=lambda r: r.node)
    capacity = {r.node: r.cpu_capacity_cores for r in reports}
    speeds = unjudged({r.node: r.stated_speed or None for r in reports}, UNJUDGED)
    hard = spec.mode == "quota"
    forecasts = {j.container: _forecast(j) for r in reports for j in r.residents}
    model = {r.node: worker_model(r.residents, forecasts, speed=speeds.of(r.node), hard=hard)
             for r in reports}
    if spec.order == "remaining":
        arrive = remaining_arrival(_Ranked({j.container: (r.node, j) for r in reports
                                            for j in r.residents}, forecasts, capacity),
                                   capacity, ranked, now)
    else:
        arrive = growth_arrival(spec.beta)
    movable = [(r.node, j.container) for r in reports for j in r.residents if j.movable]
    place = placed(policy, model, snapshot.pending, movable={c for _, c in movable},
                   capacity=capacity, speeds=speeds, arrive=arrive,
                   sides=reported_sides(reports, speeds, assumed=spec.admission == "forecast"))
    moving = place.moving
    assessments = []
    for node, container in movable:
        note = (f"moves: {move_reason(moving[container], spec, speeds)}" if container in moving
                else f"movable on {node}: no move gains more than "
                     f"{spec.move_threshold_seconds:g} s this cycle (or the migration budget "
                     "is spent)")
        assessments.append(Assessment(container=container, node=node, category=None,
                                      note=note))
    notes = [f"from {len(reports)} node reports",
             f"{sum(len(r.residents) for r in reports)} jobs reported, {len(movable)} movable; "
             f"{len(place.moves)} moved"]
    if snapshot.pending:
        notes.append(f"admission: {len(place.admits)} admitted, {len(place.queue)} waiting")
    notes += speeds.notes.values()
    return Decision(policy=policy.name, kind="FlowCon2", time=now, actions=tuple(place.actions),
                    assessments=tuple(sorted(assessments, key=lambda a: (a.node, a.container))),
                    next_interval=spec.interval_seconds, dry_run=spec.dry_run,
                    notes=tuple(notes), queue=tuple(place.queue))

