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
   the other worker's cores at that worker's speed; minus what the jobs already there lose
   (never less than nothing: the drain can let an arrival end their free competition, below,
   and the limits then speed one of them up, which is not the move's gain).
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

Steps 2-4 are `policyd.engine.flowcon2_placement`'s. With `node_reports` the work splits
(`policyd.engine.flowcon2_reports`): each node agent decides and applies step 1 on its worker
(`node_part`) and reports its jobs as the model of step 2 sees them (`node_reports`); the
manager runs steps 3 and 4 on the model rebuilt from the reports, node speeds the stated ones.

The interval does not back off (a held job would wait as long). Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from pydantic import Field

from policyd.engine import flowcon, predictive
from policyd.engine.flowcon2_placement import (
    ModelJob,
    drained,
    growth_arrival,
    may_move,
    move_bound,
    move_reason,
    placed,
    remaining_arrival,
)
from policyd.engine.flowcon2_reports import plan_from_reports, resident, with_sides
from policyd.engine.forecast_output import Forecast
from policyd.engine.forecasting import (
    Forecasted,
    forecast_containers,
    job_forecast,
    settings_of,
)
from policyd.engine.kind import Intervals, Kind
from policyd.engine.node_speed import UNJUDGED, NodeSpeeds, node_speeds, unjudged
from policyd.engine.predictive_node import FLOOR, Plan, plans_of
from policyd.engine.spec import MoveGain, PolicyDocument, of_kind
from policyd.model import Action, Container, Decision, NodeReport, SetCpu, Snapshot

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


# --- plan ---------------------------------------------------------------------------------


def _model(snapshot: Snapshot, chosen: Sequence[Container], *, limits: Mapping[str, float],
           categories: Mapping[str, str], converged: str,
           forecasts: Mapping[str, Forecast | None], speeds: NodeSpeeds,
           hard: bool) -> dict[str, list[ModelJob]]:
    capacity = {n.name: n.cpu_capacity for n in snapshot.nodes}
    model: dict[str, list[ModelJob]] = {n: [] for n in capacity}
    for c in chosen:
        f = forecasts.get(c.id)
        cap = min(max(f.cap_cores, 1.0), capacity[c.node]) if f is not None \
            else capacity[c.node]
        model[c.node].append(ModelJob(id=c.id, weight=limits.get(c.id, c.cpu_allocation),
                                      cap=cap, converged=categories.get(c.id) == converged,
                                      forecast=f, speed=speeds.of(c.node), hard=hard))
    return model


@dataclass(frozen=True, kw_only=True)
class _Workers:
    """What FlowCon2 works out worker by worker (module docstring, 1-2): the jobs it selects
    (by worker and id), their forecasts, the limits (FlowCon's or Predictive's decision, with
    no moves), the worker plans under `order: remaining` (else empty), every worker's speed and
    the model of the next interval."""

    chosen: list[Container]
    found: Forecasted
    limits: Decision
    plans: Mapping[str, Sequence[Plan]]
    speeds: NodeSpeeds
    model: dict[str, list[ModelJob]]


def _workers(policy: FlowCon2Policy, snapshot: Snapshot,
             speeds_of: Callable[[Mapping[str, Forecast | None]], NodeSpeeds]) -> _Workers:
    """Every worker's limits and model (`_Workers`), the speeds from `speeds_of` the
    forecasts."""
    spec = policy.spec
    chosen = sorted((c for c in snapshot.containers if spec.selector.selects(c)),
                    key=lambda c: (c.node, c.id))
    settings = settings_of(policy, snapshot, alpha=spec.alpha,
                           interval_seconds=spec.interval_seconds)
    found = forecast_containers(settings, snapshot, {c.id for c in chosen})
    plans: dict[str, list[Plan]] = {}
    if spec.order == "remaining":
        ranked = as_predictive(policy)  # same selector, alpha, interval, evaluation: same forecasts
        plans = plans_of(ranked, snapshot, found, chosen)
        limits_decision = predictive.decision_of(ranked, snapshot, plans, {})
    else:
        limits_decision = flowcon.plan(as_flowcon(policy), snapshot)
    limits = {a.container: a.fraction for a in limits_decision.actions
              if isinstance(a, SetCpu)}
    speeds = speeds_of(found.by_id)
    model = _model(snapshot, chosen, limits=limits, categories=limits_decision.categories,
                   converged=movable(spec.order), forecasts=found.by_id, speeds=speeds,
                   hard=spec.mode == "quota")
    return _Workers(chosen=chosen, found=found, limits=limits_decision, plans=plans,
                    speeds=speeds, model=model)


def plan(policy: PolicyDocument, snapshot: Snapshot) -> Decision:
    """FlowCon2's decision: FlowCon's limits, admissions of held jobs and moves of converged
    ones (module docstring); from node reports, the moves and admissions alone
    (`policyd.engine.flowcon2_reports`)."""
    policy = _flowcon2(policy)
    if snapshot.node_reports:
        return plan_from_reports(policy, snapshot, ranked=as_predictive(policy).spec)
    spec, now = policy.spec, snapshot.time
    capacity = {n.name: n.cpu_capacity for n in snapshot.nodes}
    worked = _workers(policy, snapshot, lambda found: node_speeds(snapshot, found))
    found, limits_decision, speeds, model = (worked.found, worked.limits, worked.speeds,
                                             worked.model)
    if spec.order == "remaining":
        arrive = remaining_arrival({p.job.container.id: p.job for node in worked.plans.values()
                                    for p in node}, capacity, as_predictive(policy).spec, now)
    else:
        arrive = growth_arrival(spec.beta)
    movable = may_move(policy, model, {c.id: c for c in worked.chosen}, now=now) \
        if spec.migrate else frozenset()
    place = placed(policy, model, snapshot.pending, movable=movable, capacity=capacity,
                   speeds=speeds, arrive=arrive)
    moving = place.moving
    actions: list[Action] = [a for a in limits_decision.actions
                             if not (isinstance(a, SetCpu) and a.container in moving)]
    actions += place.actions
    assessments = []
    for a in limits_decision.assessments:
        f = found.by_id.get(a.container)
        note = a.note
        if a.container in moving:
            note = f"moves: {move_reason(moving[a.container], spec, speeds)}"
        assessments.append(replace(
            a, note=note, forecast=job_forecast(f) if f is not None else None,
            # The kind's gain column is FlowCon's G; Predictive's key is in its note.
            gain=a.gain if spec.order == "growth" else None,
            forecast_note="" if f is not None else found.notes.get(a.container, "")))
    notes = [*limits_decision.notes, *speeds.notes.values()]
    return Decision(policy=policy.name, kind="FlowCon2", time=now, actions=tuple(actions),
                    assessments=tuple(assessments), next_interval=spec.interval_seconds,
                    dry_run=spec.dry_run, notes=tuple(notes), queue=tuple(place.queue))


def node_part(policy: FlowCon2Policy) -> PolicyDocument:
    """What a node agent decides and applies on its worker (`policyd.engine.flowcon2_reports`):
    FlowCon2's limits without its moves and admissions, under the policy's name: the FlowCon
    policy (`order: growth`; its interval not backing off, as FlowCon2's does not) or the
    Predictive one without moves (`order: remaining`) that sets them in one snapshot."""
    if policy.spec.order == "remaining":
        return as_predictive(policy)
    part = as_flowcon(policy)
    return part.model_copy(update={"spec": part.spec.model_copy(
        update={"max_interval_seconds": part.spec.interval_seconds})})


def node_reports(policy: PolicyDocument, snapshot: Snapshot) -> tuple[NodeReport, ...]:
    """Every worker's report of `snapshot` under `policy` (`policyd.engine.flowcon2_reports`):
    its stated speed and its jobs as the model of the next interval sees them, those the guards
    let move flagged unless the bound on their gain cannot beat the move's cost."""
    policy = _flowcon2(policy)
    spec, now = policy.spec, snapshot.time
    stated = {n.name: n.speed for n in snapshot.nodes}
    worked = _workers(policy, snapshot, lambda _: unjudged(stated, UNJUDGED))
    containers = {c.id: c for c in worked.chosen}
    movable_ids = may_move(policy, worked.model, containers, now=now) if spec.migrate \
        else frozenset()
    reports = []
    for node in snapshot.nodes:
        jobs = worked.model[node.name]
        speed = worked.speeds.of(node.name)
        flagged = [i for i, j in enumerate(jobs) if j.id in movable_ids]
        ends, total = drained(jobs, node.cpu_capacity, speed) if flagged else ([], 0.0)
        kept = {jobs[i].id for i in flagged
                if move_bound(i, jobs, node.cpu_capacity, speed, ends=ends, total=total)
                > spec.move_threshold_seconds}
        residents = [resident(j, containers[j.id], movable=j.id in kept) for j in jobs]
        reports.append(NodeReport(
            policy=policy.name, node=node.name, time=now, cpu_capacity_cores=node.cpu_capacity,
            cpu_used_cores=node.cpu_usage, selected=len(jobs),
            stated_speed=node.speed if node.speed is not None else 0.0,
            residents=with_sides(residents, node.cpu_capacity, stated=node.speed,
                                 hard=spec.mode == "quota")))
    return tuple(reports)


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
    node_reports=node_reports,  # with `node_reports`: the agents set limits, the manager places
    node_part=lambda p: node_part(_flowcon2(p)),
)
"""FlowCon2's registration entry (`policyd.engine.registry`)."""
