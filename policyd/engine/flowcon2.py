"""FlowCon2: FlowCon's per-worker CPU limits, plus where jobs start and move (our reading of
FlowCon 2.0, Mao et al., IEEE TCC 2023; only its abstract is public, so the design is ours:
docs/design.md, "FlowCon2").

Theory of operation. Every interval, over the whole cluster:

1. Limits, by `order`. `growth` (the default): FlowCon's Algorithm 1 on every worker
   (`policyd.engine.flowcon.plan`, run as a FlowCon policy of the same name and settings):
   NL/WL/CL from each job's growth efficiency, CL jobs down to their share of growth with the
   floor 1 / (beta n), NL jobs at 1. `remaining`: Predictive's per-worker plan
   (`policyd.engine.predictive_node`, run as a Predictive policy of the same name and settings,
   its own at their defaults, `predictive.decision_of` turning it into limits): shortest
   predicted remaining time first, the floor 1 / (beta n); the jobs it serves last, at the
   floor (FLOOR), are what `growth` calls converged (CL) below: the model counts them
   converged (a full limit once only such jobs are left, as the served ones end) and they are
   the ones that move.
2. A model of each worker's next interval: the cores each job would get there, its CPU split
   by the limits as weights, none above what the job can use (its forecast's cap; the worker's
   cores without one): `policyd.engine.waterfill`. A worker's cores count at its speed
   (`policyd.engine.node_speed`: stated, else judged from the step times of jobs of one
   workload on several workers, else average; the notes say which). That is shares mode's
   reading of a limit; under `mode: quota` a limit is a hard cap (limit x the worker's cores)
   and every job weighs the same, as CFS then shares the cores.
3. Admission: held jobs (`policyd.model.pending`), oldest first, each start on the worker
   where it would grow fastest: the most effective cores (cores x speed) it would get there at
   an equal share beside the jobs already there, so a young job gets fast cores where they are
   not taken. Converged jobs count in full: their floor is soft (shares mode; a quota's floor
   is hard, but FlowCon resizes it as the worker fills), they take their cores back as the
   worker empties and get a full limit once only converged jobs are left, so the cores the
   floor lends now are not free. `admission.place` admits it there, or
   holds it while no worker offers `admission_min_cores` (1 by default: a job waits for a
   whole effective core rather than take a slice of a crowded worker, which would slow every
   job there). With `admission: forecast` it starts instead where it adds least to the
   predicted completion times (its own and the others' delay, the worker drained as in 4), a
   new job taken to be the median running one (`typical`). Each admission joins the model
   before the next.
4. Moves: a converged job (CL) moves to another worker when the forecast's predicted gain
   (under `remaining`: a FLOOR job, at the limit Predictive's plan of the target gives it
   there) exceeds the move's cost (`migration_cost_seconds`: pause, checkpoint, restore) times
   (1 + `migration_margin`). The gain is the predicted completion seconds saved, summed over
   the jobs it touches: the jobs left on its worker, which get its cores; the job itself, on
   the other worker's cores at that worker's speed; minus what the jobs already there lose.
   Each worker is drained (`policyd.engine.drain`): its jobs share it by their limits until
   the first ends, then the rest share it, and once only converged jobs are left they compete
   freely (FlowCon's limit 1), so a converged job at the floor beside growing ones is not
   priced at the floor for its whole run. A worker with a job whose forecast is unknown is not
   a target (its loss cannot be judged). There the job runs at the limit FlowCon gives a
   converged job: the floor 1 / (beta n) beside growing jobs, 1 among converged ones. A job
   is moved once (`markers.migrated`): a converged job moved again would chase the emptiest
   worker, and every move costs it a pause. Best gain first, one at a time, each joining the
   model; every safety limit holds (opt-out, minimum age, cooldown, failed-move back-off,
   migrations per cycle and per node: `policyd.engine.guards`). The reason names the gain and
   the cost.

The interval does not back off (a held job would wait as long). Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from pydantic import Field

from policyd.engine import flowcon, predictive
from policyd.engine.admission import FIT_TOLERANCE_CORES, Candidate, place
from policyd.engine.drain import DrainingJob, finish_seconds
from policyd.engine.forecast_output import Forecast
from policyd.engine.forecasting import forecast_containers, job_forecast, settings_of
from policyd.engine.guards import MigrationBudget, action_blocked
from policyd.engine.kind import Intervals, Kind
from policyd.engine.node_speed import NodeSpeeds, node_speeds
from policyd.engine.predictive_node import FLOOR, Job, node_plans, plans_of
from policyd.engine.spec import MoveGain, PolicyDocument, of_kind
from policyd.engine.waterfill import fill
from policyd.model import (
    Action,
    Admit,
    Container,
    Decision,
    Migrate,
    PendingJob,
    QueuedJob,
    SetCpu,
    Snapshot,
)

MOVABLE = "CL"
"""FlowCon's category of a converged job: the only ones FlowCon2 moves (`order: growth`)."""

Order = Literal["growth", "remaining"]


def movable(order: Order) -> str:
    """The category of the jobs FlowCon2 moves and its model counts converged: FlowCon's CL
    (`growth`), Predictive's FLOOR, the jobs served last (`remaining`)."""
    return MOVABLE if order == "growth" else FLOOR


class FlowCon2Spec(MoveGain, flowcon.FlowConSpec):
    """FlowCon's arguments (the per-worker limits), and placement's."""

    admission_min_cores: float = Field(
        default=1.0, ge=0, le=1024,
        description=(
            "A held job starts only on a worker that would give it at least this many "
            "effective cores (cores x speed), and waits for them otherwise: one core started "
            "whole beats a slice of a crowded worker; 0: every held job starts at the next "
            "cycle."),
    )
    admission: Literal["fastest", "forecast"] = Field(
        default="fastest",
        description=(
            "Where a held job starts. fastest: the worker that gives it the most effective "
            "cores beside the jobs growing there; forecast: the worker where it adds least to "
            "the predicted completion times (its own and the delay to the jobs there, as the "
            "worker drains), a new job taken to be a typical one (the median running job)."),
    )
    migrate: bool = Field(
        default=True, description="Move converged jobs to make room for growing ones.")
    order: Order = Field(
        default="growth",
        description=(
            "Each worker's limits. growth: FlowCon's (growing jobs get full limits, converged "
            "ones the floor 1 / (beta n)), and converged jobs move; remaining: Predictive's "
            "plan (shortest predicted remaining time first, the floor 1 / (beta n), "
            "Predictive's hysteresis, min_change and max_slowdown at their defaults), and the "
            "jobs it serves last, at the floor, move."),
    )


class FlowCon2Policy(PolicyDocument):
    kind: Literal["FlowCon2"]
    spec: FlowCon2Spec


def _flowcon2(policy: PolicyDocument) -> FlowCon2Policy:
    return of_kind(policy, FlowCon2Policy, "FlowCon2")


def as_flowcon(policy: FlowCon2Policy) -> flowcon.FlowConPolicy:
    """The FlowCon policy whose limits FlowCon2 sets (same name, selector and settings)."""
    fields = set(flowcon.FlowConSpec.model_fields)
    return flowcon.FlowConPolicy.model_validate({
        "apiVersion": policy.api_version, "kind": "FlowCon",
        "metadata": policy.metadata.model_dump(),
        "spec": policy.spec.model_dump(include=fields, by_alias=True)})


def as_predictive(policy: FlowCon2Policy) -> predictive.PredictivePolicy:
    """The Predictive policy whose per-worker plans set FlowCon2's limits under `order:
    remaining` (same name, selector and the settings both kinds have; Predictive's own at
    their defaults; its moves off: FlowCon2 moves)."""
    fields = set(predictive.PredictiveSpec.model_fields) & set(FlowCon2Spec.model_fields)
    spec = policy.spec.model_dump(include=fields - {"migrate"}, by_alias=True)
    return predictive.PredictivePolicy.model_validate({
        "apiVersion": policy.api_version, "kind": "Predictive",
        "metadata": policy.metadata.model_dump(), "spec": {**spec, "migrate": False}})


# --- the model of the next interval ---------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _Job:
    """A job in the model: its weight (next limit), the most cores it can use, whether FlowCon
    counts it converged, its forecast; `hard`: its limit is a CPU quota (`mode: quota`)."""

    id: str
    weight: float
    cap: float
    converged: bool
    forecast: Forecast | None
    speed: float  # the speed of the worker its forecast was measured on
    assumed: Forecast | None = None  # without a forecast: the typical job's (`typical`)
    hard: bool = False

    def draining(self, capacity: float) -> DrainingJob:
        """The job on a worker of `capacity` cores: a weight under shares, a hard cap (and
        the same weight as every job) under quotas."""
        return DrainingJob(weight=1.0 if self.hard else self.weight, cap_cores=self.cap,
                           converged=self.converged, forecast=self.forecast or self.assumed,
                           measured_speed=self.speed if self.forecast is not None else 1.0,
                           limit_cores=self.weight * capacity if self.hard else math.inf)


def cores_of(jobs: Sequence[_Job], capacity: float) -> list[float]:
    """The cores each job gets on a worker of `capacity` cores: split by weight, none above
    its cap (water-filling)."""
    cores = [0.0] * len(jobs)
    fill(cores, [j.cap for j in jobs], range(len(jobs)), capacity, [j.weight for j in jobs])
    return cores


def typical(model: Mapping[str, Sequence[_Job]]) -> Forecast | None:
    """The forecast a job without one is assumed to have: the median forecast job's (by its
    whole run's seconds on one core), from its first step, on an average core (speed 1);
    None when no job has a forecast."""
    runs = []
    for jobs in model.values():
        for j in jobs:
            f = j.forecast
            if f is None:
                continue
            fresh = replace(f, steps_done=0.0, remaining_steps=f.steps_done + f.remaining_steps,
                            serial_seconds=f.serial_seconds * j.speed,
                            parallel_seconds=f.parallel_seconds * j.speed)
            runs.append((fresh.remaining_seconds_at(1.0), j.id, fresh))
    if not runs:
        return None
    return sorted(runs, key=lambda r: (r[0], r[1]))[len(runs) // 2][2]


def _total(jobs: Sequence[_Job], capacity: float, speed: float) -> float:
    """Predicted seconds until each forecast job ends, summed, as the worker drains
    (`policyd.engine.drain`)."""
    return sum(s for s in finish_seconds([j.draining(capacity) for j in jobs], capacity, speed)
               if math.isfinite(s))


@dataclass(frozen=True, kw_only=True)
class _Move:
    job: _Job
    source: str
    target: str
    gain: float
    freed: float  # seconds the jobs left on the source save
    own: float  # seconds the job itself saves (negative: it runs slower there)
    harm: float  # seconds the jobs on the target lose
    why: str = ""  # what makes it movable, and where (the reason's first clause; chosen moves)


def _own_finish(jobs: Sequence[_Job], job: _Job, capacity: float, speed: float) -> float:
    """When `job` (one of `jobs`) ends as the worker drains."""
    ends = finish_seconds([j.draining(capacity) for j in jobs], capacity, speed)
    return ends[[j.id for j in jobs].index(job.id)]


def _gain(job: _Job, source: str, target: str, *, model: Mapping[str, list[_Job]],
          capacity: Mapping[str, float], speeds: NodeSpeeds, arrive: Arrival,
          totals: Mapping[str, float]) -> _Move | None:
    """The predicted gain of moving `job` from `source` to `target` (module docstring, 4),
    where it runs at the limit `arrive` gives it; None when the target's jobs cannot be judged
    or the job has no forecast. `totals` holds each worker's `_total` as it is."""
    there, here = model[target], model[source]
    if job.forecast is None or any(j.forecast is None for j in there):
        return None
    s_speed, t_speed = speeds.of(source), speeds.of(target)
    rest = [j for j in here if j.id != job.id]
    own_before = _own_finish(here, job, capacity[source], s_speed)
    freed = totals[source] - own_before - _total(rest, capacity[source], s_speed)
    weight, converged = arrive(job, target, model)
    arriving = replace(job, weight=weight, converged=converged,
                       cap=min(max(job.forecast.cap_cores, 1.0), capacity[target]))
    joined = [*there, arriving]
    own_after = _own_finish(joined, arriving, capacity[target], t_speed)
    if not (math.isfinite(own_before) and math.isfinite(own_after)):
        return None  # it would never end on one of them: nothing to compare
    own = own_before - own_after
    harm = _total(joined, capacity[target], t_speed) - own_after - totals[target]
    return _Move(job=arriving, source=source, target=target, gain=freed + own - harm,
                 freed=freed, own=own, harm=harm)


Arrival = Callable[[_Job, str, Mapping[str, Sequence[_Job]]], tuple[float, bool]]
"""A moved job's limit on its target beside the jobs the model has there, and whether the model
counts it converged there (`_Job.converged`: it gets a full limit once only such jobs are left)."""


def _weight_there(there: Sequence[_Job], categories: Mapping[str, str], beta: float) -> float:
    """The limit FlowCon gives a converged job on a worker: 1 where every job is converged
    (free competition), else the floor 1 / (beta n)."""
    if all(categories.get(j.id) == MOVABLE for j in there):
        return 1.0
    return 1.0 / (beta * (len(there) + 1))


def growth_arrival(categories: Mapping[str, str], beta: float) -> Arrival:
    """`order: growth`: the moved job stays converged, at FlowCon's limit there."""
    def arrive(job: _Job, target: str, model: Mapping[str, Sequence[_Job]]
               ) -> tuple[float, bool]:
        return _weight_there(model[target], categories, beta), True
    return arrive


def remaining_arrival(jobs: Mapping[str, Job], capacity: Mapping[str, float],
                      spec: predictive.PredictiveSpec, now: float) -> Arrival:
    """`order: remaining`: the limit Predictive's plan of the target gives the moved job
    beside the jobs there (`predictive_node.node_plans`; its key: its forecast's remaining
    time at the most cores it can use there), converged when that is the floor (served last).
    The jobs already there keep their limits in the model, as under `growth`."""
    def arrive(job: _Job, target: str, model: Mapping[str, Sequence[_Job]]
               ) -> tuple[float, bool]:
        mine = jobs[job.id]
        assert mine.forecast is not None  # only forecast jobs are priced (`_gain`)
        best = min(max(mine.forecast.cap_cores, 1.0), capacity[target])
        moved = replace(mine, container=replace(mine.container, node=target), best_cores=best,
                        key=mine.forecast.remaining_seconds_at(best))
        plans = node_plans([*(jobs[j.id] for j in model[target]), moved], capacity[target],
                           spec, now=now)
        there = next(p for p in plans if p.job.container.id == job.id)
        return there.fraction, there.category == FLOOR
    return arrive


def _moves(policy: FlowCon2Policy, model: dict[str, list[_Job]], *,
           containers: Mapping[str, Container], categories: Mapping[str, str],
           capacity: Mapping[str, float], speeds: NodeSpeeds, arrive: Arrival,
           now: float) -> list[_Move]:
    """Movable jobs (`movable`) moved while the best move's gain beats its cost (module
    docstring)."""
    spec = policy.spec
    threshold = spec.move_threshold_seconds
    budget = MigrationBudget.of(spec)
    moved: list[_Move] = []
    while True:
        best: tuple[_Move, _Job] | None = None  # the move, and the job as it is now
        totals = {node: _total(jobs, capacity[node], speeds.of(node))
                  for node, jobs in model.items()}
        for source in sorted(model):
            for job in model[source]:
                c = containers[job.id]
                if (categories.get(job.id) != movable(spec.order) or job.forecast is None
                        or c.markers.migrated or any(m.job.id == job.id for m in moved)
                        or action_blocked(c, spec, now, disrupts=True) is not None):
                    continue
                for target in sorted(model):
                    if target == source or budget.refusal(source, target) is not None:
                        continue
                    move = _gain(job, source, target, model=model, capacity=capacity,
                                 speeds=speeds, arrive=arrive, totals=totals)
                    if move is not None and move.gain > threshold and (
                            best is None or move.gain > best[0].gain):
                        best = (move, job)
        if best is None:
            return moved
        chosen = replace(best[0], why=_movable_why(best[1], best[0], spec, speeds))
        moved.append(chosen)
        budget.spend(chosen.source, chosen.target)
        model[chosen.source] = [j for j in model[chosen.source] if j.id != chosen.job.id]
        model[chosen.target] = [*model[chosen.target], chosen.job]


def _movable_why(job: _Job, m: _Move, spec: FlowCon2Spec, speeds: NodeSpeeds) -> str:
    """What makes `job` movable, named by its forecast under `order: remaining`."""
    if spec.order == "growth":
        return f"converged (CL) on {m.source} (speed {speeds.shown(m.source)})"
    assert job.forecast is not None  # only forecast jobs are priced (`_gain`)
    return (f"served last, at the floor (FLOOR), on {m.source} (speed "
            f"{speeds.shown(m.source)}): {job.forecast.remaining_seconds_at(job.cap):.0f} s "
            f"of predicted remaining time at its best ({job.cap:.2g} cores), "
            f"{job.forecast.remaining_steps:.0f} steps left ({job.forecast.basis}); limit "
            f"{m.job.weight:.3g} on {m.target}")


def _move_reason(m: _Move, spec: FlowCon2Spec, speeds: NodeSpeeds) -> str:
    return (f"{m.why}; predicted gain "
            f"{m.gain:.0f} s on {m.target} (speed {speeds.shown(m.target)}): jobs left on "
            f"{m.source} sooner by {m.freed:.0f} s, itself {m.own:+.0f} s, jobs on "
            f"{m.target} later by {m.harm:.0f} s; > migration cost "
            f"{spec.migration_cost_seconds:g} s x (1 + {spec.migration_margin:g})")


# --- admission ----------------------------------------------------------------------------


def _admit(policy: FlowCon2Policy, pending: Sequence[PendingJob],
           model: dict[str, list[_Job]], capacity: Mapping[str, float],
           speeds: NodeSpeeds) -> tuple[list[Admit], list[QueuedJob]]:
    """Held jobs, oldest first, each on the worker where it grows fastest (module
    docstring, 3)."""
    spec = policy.spec
    hard = spec.mode == "quota"
    admits: list[Admit] = []
    waiting: list[QueuedJob] = []
    prior = typical(model)
    totals = ({node: _total(jobs, capacity[node], speeds.of(node)) for node, jobs in model.items()}
              if spec.admission == "forecast" else {})
    for p in sorted((p for p in pending if spec.selector.selects(p)),
                    key=lambda p: (p.submitted_at, p.id)):
        if spec.selector.opted_out(p):
            blocked = f"opted out ({spec.selector.opt_out_key}=true)"
        else:
            blocked = ""
        offer, added = {}, {}
        for node in sorted(model):
            newcomer = _Job(id=p.id, weight=1.0, cap=capacity[node], converged=False,
                            forecast=None, speed=speeds.of(node), assumed=prior, hard=hard)
            # At equal shares: a converged job's floor is soft (shares), it takes its cores
            # back as the worker empties and gets a full limit once only converged jobs are
            # left, so admission does not count on the cores the floor lends.
            cores = cores_of([replace(j, weight=1.0) for j in [*model[node], newcomer]],
                             capacity[node])[-1]
            offer[node] = speeds.effective_cores(node, cores)
            if prior is not None and spec.admission == "forecast":
                added[node] = (_total([*model[node], newcomer], capacity[node],
                                      speeds.of(node)) - totals[node])
        best = min(offer, key=lambda n: (-offer[n], n != p.node, n))
        if added:
            best = min((n for n in offer if offer[n] + FIT_TOLERANCE_CORES
                        >= spec.admission_min_cores), default=best,
                       key=lambda n: (added[n], n != p.node, n))
        about = (f"grows fastest on {best}: {offer[best]:.2f} effective cores (cores x speed "
                 f"{speeds.shown(best)}) at an equal share beside {len(model[best])} job(s) "
                 f"there"
                 if not added else
                 f"adds least to the predicted completion times on {best}: "
                 f"{added[best]:.0f} s (its own and the delay to the {len(model[best])} "
                 f"job(s) there, taken to be a typical job), {offer[best]:.2f} effective cores "
                 f"(cores x speed {speeds.shown(best)})")
        about += f"; {speeds.notes[best]}" if best in speeds.notes else ""
        placed = place([Candidate(job=p, key=(p.submitted_at,), cores=spec.admission_min_cores,
                                  about=about, blocked=blocked)],
                       {best: offer[best]} if added else offer, policy=policy.name)
        for admit in placed.admits:
            admits.append(admit)
            model[admit.node] = [*model[admit.node],
                                 _Job(id=p.id, weight=1.0, cap=capacity[admit.node],
                                      converged=False, forecast=None,
                                      speed=speeds.of(admit.node), assumed=prior, hard=hard)]
            if added:
                totals[admit.node] += added[admit.node]
        waiting += [replace(q, position=len(waiting) + 1) for q in placed.queue]
    return admits, waiting


# --- plan ---------------------------------------------------------------------------------


def _model(snapshot: Snapshot, chosen: Sequence[Container], *, limits: Mapping[str, float],
           categories: Mapping[str, str], converged: str,
           forecasts: Mapping[str, Forecast | None], speeds: NodeSpeeds,
           hard: bool) -> dict[str, list[_Job]]:
    capacity = {n.name: n.cpu_capacity for n in snapshot.nodes}
    model: dict[str, list[_Job]] = {n: [] for n in capacity}
    for c in chosen:
        f = forecasts.get(c.id)
        cap = min(max(f.cap_cores, 1.0), capacity[c.node]) if f is not None \
            else capacity[c.node]
        model[c.node].append(_Job(id=c.id, weight=limits.get(c.id, c.cpu_allocation), cap=cap,
                                  converged=categories.get(c.id) == converged, forecast=f,
                                  speed=speeds.of(c.node), hard=hard))
    return model


def plan(policy: PolicyDocument, snapshot: Snapshot) -> Decision:
    """FlowCon2's decision: FlowCon's limits, admissions of held jobs and moves of converged
    ones (module docstring)."""
    policy = _flowcon2(policy)
    spec, now = policy.spec, snapshot.time
    capacity = {n.name: n.cpu_capacity for n in snapshot.nodes}
    chosen = sorted((c for c in snapshot.containers if spec.selector.selects(c)),
                    key=lambda c: (c.node, c.id))
    settings = settings_of(policy, snapshot, alpha=spec.alpha,
                           interval_seconds=spec.interval_seconds)
    found = forecast_containers(settings, snapshot, chosen)
    if spec.order == "remaining":
        ranked = as_predictive(policy)  # same selector, alpha, interval, evaluation: same forecasts
        plans = plans_of(ranked, snapshot, found)
        limits_decision = predictive.decision_of(ranked, snapshot, plans, {})
        arrive = remaining_arrival({p.job.container.id: p.job for node in plans.values()
                                    for p in node}, capacity, ranked.spec, now)
    else:
        limits_decision = flowcon.plan(as_flowcon(policy), snapshot)
        arrive = growth_arrival(limits_decision.categories, spec.beta)
    limits = {a.container: a.fraction for a in limits_decision.actions
              if isinstance(a, SetCpu)}
    categories = limits_decision.categories
    speeds = node_speeds(snapshot, found.by_id)
    model = _model(snapshot, chosen, limits=limits, categories=categories,
                   converged=movable(spec.order), forecasts=found.by_id, speeds=speeds,
                   hard=spec.mode == "quota")
    if spec.admission == "forecast":
        prior = typical(model)
        model = {node: [replace(j, assumed=prior) for j in jobs] for node, jobs in model.items()}
    moves = _moves(policy, model, containers={c.id: c for c in chosen},
                   categories=categories, capacity=capacity, speeds=speeds,
                   arrive=arrive, now=now) if spec.migrate else []
    admits, queue = _admit(policy, snapshot.pending, model, capacity, speeds)
    moving = {m.job.id: m for m in moves}
    actions: list[Action] = [a for a in limits_decision.actions
                             if not (isinstance(a, SetCpu) and a.container in moving)]
    for m in moves:
        actions.append(Migrate(policy=policy.name, container=m.job.id, from_node=m.source,
                               to_node=m.target, reason=_move_reason(m, spec, speeds),
                               grace_seconds=spec.migration_grace_seconds))
    actions += admits
    assessments = []
    for a in limits_decision.assessments:
        f = found.by_id.get(a.container)
        note = a.note
        if a.container in moving:
            note = f"moves: {_move_reason(moving[a.container], spec, speeds)}"
        assessments.append(replace(
            a, note=note, forecast=job_forecast(f) if f is not None else None,
            # The kind's gain column is FlowCon's G; Predictive's key is in its note.
            gain=a.gain if spec.order == "growth" else None,
            forecast_note="" if f is not None else found.notes.get(a.container, "")))
    notes = [*limits_decision.notes, *speeds.notes.values()]
    return Decision(policy=policy.name, kind="FlowCon2", time=now, actions=tuple(actions),
                    assessments=tuple(assessments), next_interval=spec.interval_seconds,
                    dry_run=spec.dry_run, notes=tuple(notes), queue=tuple(queue))


def _intervals(policy: PolicyDocument) -> Intervals:
    return Intervals.fixed(_flowcon2(policy).spec.interval_seconds)


def _summary(policy: PolicyDocument) -> str:
    spec = _flowcon2(policy).spec
    return (f"order {spec.order}, alpha {spec.alpha:g}, interval {spec.interval_seconds:g} s, "
            f"beta {spec.beta:g}, {spec.mode}, moves {'on' if spec.migrate else 'off'} (cost "
            f"{spec.migration_cost_seconds:g} s, margin {spec.migration_margin:g})")


KIND = Kind(
    name="FlowCon2", document=FlowCon2Policy, plan=plan,
    scope="cluster",  # where jobs start and move: the whole cluster, in the manager
    intervals=_intervals,
    # A job that ends frees cores to admit into; a job submitted held is looked at at once.
    wakes_on=frozenset({"started", "stopped", "submitted"}),
    inputs=frozenset({"evaluation", "cpu", "steps"}),
    acts_on=frozenset({"cpu", "placement", "admission"}),
    cpu_mode=lambda p: _flowcon2(p).spec.mode, summary=_summary, gain_label="G (per core)",
    convergence_alpha=lambda p: _flowcon2(p).spec.alpha,
    floor=lambda p, n: 1.0 / (_flowcon2(p).spec.beta * max(n, 1)),
)
"""FlowCon2's registration entry (`policyd.engine.registry`)."""
