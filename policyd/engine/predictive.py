"""Predictive: each worker's CPU goes where it shortens predicted completion most.

Theory of operation. FlowCon and SpeCon act on where a job's loss *is*; this kind acts on where
each job is *going* (`policyd.engine.forecasting`: remaining steps from the job's declared total
or its fitted curve, seconds per step from an Amdahl model of its own speed). Per worker, every
interval:

1. Forecast every selected job. Its key is the time it would still need with the most cores it
   can use on this worker (`Forecast.remaining_seconds_at`): the remaining *work*, in the job's
   own speed, so jobs of different models compare fairly.
2. Order the jobs by key, shortest first, as the oracle of `policyd simulate` orders them by
   their true remaining work. A job that has just started and has no forecast yet ranks after
   the forecast jobs (its whole run is still ahead of it) until its forecast, which comes
   within two intervals; a job that cannot be forecast for another reason goes last. (Ranking
   the new job first, as FlowCon serves its NL jobs, was measured worse: benchmarks/README.md,
   predictive.py.) Hysteresis: a job already served (its limit above the floor) keeps its
   place unless another job's key is shorter by more than `hysteresis` (a fraction), so two
   jobs of nearly equal remaining time do not trade places every interval.
3. Give cores in that order as the oracle does, because a job's first core is worth more than
   its second (Amdahl): one core each (or less, when a job cannot use a whole one), then the
   cores left over, again in order, up to what each job can use (its speed model's cap).
4. Turn the cores into limits. `mode: shares` (soft, work-conserving weights): a job's weight is
   its cores over the largest grant on the worker, so the served jobs run at full weight and
   share the CPU as granted; `mode: quota` (hard caps): cores over the worker's capacity.
   Every job keeps at least the floor 1 / (beta * n) (n jobs on the worker), so none starves:
   a forecast that is wrong costs a job time, never its progress. With quotas the floor is a
   cap of that part of the worker; with shares it is a weight of 1 / (beta * n) beside the
   served jobs' (the largest 1), so while they are busy a job at the floor gets less than
   that part (docs/design.md, "Predictive": setting the floor's cores aside first was
   measured and costs the average JCT). A limit that would move by
   no more than `min_change` stays.
5. When no job on the worker has a forecast (none reports its steps, say), every limit goes
   back to 1: free competition, and the note says why.

Steps 1-5 are one worker's plan (`predictive_node`). With `migrate`, jobs the plans leave short
of a whole first core may move to workers with cores to spare (`predictive_moves`; their time
there at the target's speed relative to their own worker's, `policyd.engine.node_speed`), and
the policy runs cluster-wide; with node reports the agents make the plans and the manager the moves
(`predictive_reports`).

Reasons name the forecasts behind every action (the rank, the remaining time at the job's best
and at its current allocation, and what the remaining steps come from). Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import Field, model_validator

from policyd.engine.guards import MigrationBudget, action_blocked
from policyd.engine.kind import ActionClass, CpuMode, Intervals, Kind, Scope
from policyd.engine.node_speed import node_speeds
from policyd.engine.predictive_moves import plan_moves
from policyd.engine.predictive_node import (
    NEW_KEY,
    Plan,
    forecasts_of,
    plans_of,
    selected,
    spare_cores,
    waiting_jobs,
)
from policyd.engine.predictive_reports import node_part, node_reports, plan_from_reports
from policyd.engine.spec import CommonSpec, MoveGain, PolicyDocument, check_relative_alpha, of_kind
from policyd.model import Assessment, Decision, Migrate, SetCpu, Snapshot


class PredictiveSpec(MoveGain, CommonSpec):
    """Predictive's arguments."""

    interval_seconds: float = Field(
        default=20.0, ge=1, le=86400, description="Evaluation interval, seconds.")
    alpha: float = Field(
        default=0.05, gt=0,
        description=(
            "For jobs that do not report their total steps: the forecast counts a job done when "
            "its fitted loss curve would improve by less than this per interval per core "
            "(FlowCon's growth efficiency; relative normalization: a fraction)."),
    )
    beta: float = Field(
        default=2.0, ge=1, le=100,
        description=(
            "Floor: every job keeps a limit of at least 1 / (beta * n) (n jobs on the worker): "
            "with quota that part of the worker; with shares a weight of it beside the served "
            "jobs' weight 1, less of the worker while they are busy."),
    )
    mode: Literal["shares", "quota"] = Field(
        default="shares", description="shares: soft, work-conserving limits; quota: hard caps.")
    hysteresis: float = Field(
        default=0.1, ge=0, lt=1,
        description=(
            "A job already served keeps its place unless another's predicted remaining time is "
            "shorter by more than this fraction."),
    )
    min_change: float = Field(
        default=0.05, ge=0, lt=1,
        description="A limit that would move by no more than this fraction of the node stays.",
    )
    max_slowdown: float = Field(
        default=0.2, ge=0, le=100,
        description=(
            "Fairness: a job whose predicted completion time, served in turn, would exceed "
            "what an equal share of its worker would give it by more than this fraction is "
            "served at once (its age counts in both)."),
    )
    migrate: bool = Field(
        default=False,
        description=(
            "Also move a job that waits at the floor to a worker with cores to spare, when its "
            "forecast says it finishes sooner there by more than the move costs (the policy "
            "then runs cluster-wide, in the manager)."),
    )

    @model_validator(mode="after")
    def _check(self) -> PredictiveSpec:
        check_relative_alpha(self.alpha, self.evaluation, "0.05 = 5%")
        return self


class PredictivePolicy(PolicyDocument):
    kind: Literal["Predictive"]
    spec: PredictiveSpec


def _predictive(policy: PolicyDocument) -> PredictivePolicy:
    return of_kind(policy, PredictivePolicy, "Predictive")


def plan(policy: PolicyDocument, snapshot: Snapshot) -> Decision:
    """Predictive's decision for `snapshot`: a CPU limit per job from its forecast, and (with
    `migrate`) moves of waiting jobs to workers with cores to spare."""
    policy = _predictive(policy)
    if snapshot.node_reports:
        return plan_from_reports(policy, snapshot)
    spec, now = policy.spec, snapshot.time
    capacity = {n.name: n.cpu_capacity for n in snapshot.nodes}
    chosen = selected(policy, snapshot)
    found = forecasts_of(policy, snapshot, chosen)
    plans = plans_of(policy, snapshot, found, chosen)
    moves = plan_moves(
        policy.name, spec,
        [w for node_plans in plans.values() for w in waiting_jobs(node_plans, spec, now)],
        {node: spare_cores(plans.get(node, ()), cap) for node, cap in capacity.items()},
        MigrationBudget.of(spec),
        # stated, else judged from the jobs' step times as FlowCon2 judges them
        speeds=node_speeds(snapshot, found.by_id)) if spec.migrate else {}
    return decision_of(policy, snapshot, plans, moves)


def decision_of(policy: PredictivePolicy, snapshot: Snapshot,
                plans: Mapping[str, Sequence[Plan]],
                moves: Mapping[str, tuple[Migrate, str]]) -> Decision:
    """The decision for every worker's plan (`plans_of`): a limit per job (unless within
    `min_change` or blocked by a guard), the moves, an assessment per job and a note per worker.
    Also FlowCon2's limits under `order: remaining` (`policyd.engine.flowcon2`), with no moves."""
    spec, now = policy.spec, snapshot.time
    actions: list[SetCpu | Migrate] = []
    assessments: list[Assessment] = []
    notes: list[str] = []
    for node in sorted(plans):
        known = sum(p.job.forecast is not None for p in plans[node])
        notes.append(f"{node}: {len(plans[node])} jobs, {known} with a forecast" + (
            "; free competition" if not known else
            f"; order {', '.join(p.job.container.id for p in plans[node])}"))
        for p in plans[node]:
            c = p.job.container
            target, note = p.fraction, p.reason
            if c.id in moves:
                move, why = moves[c.id]
                actions.append(move)
                target, note = c.cpu_allocation, f"moves to {move.to_node}: {why}"
            elif abs(p.fraction - c.cpu_allocation) <= spec.min_change:
                target = c.cpu_allocation
                if abs(p.fraction - c.cpu_allocation) > 1e-9:
                    note = (f"{p.reason}; within min_change {spec.min_change:g} of "
                            f"{c.cpu_allocation:.3g}: unchanged")
            elif (blocked := action_blocked(c, spec, now, disrupts=False)) is not None:
                note = f"no action ({blocked}): {p.reason}"
                target = c.cpu_allocation
            else:
                actions.append(SetCpu(policy=policy.name, container=c.id, node=c.node,
                                      fraction=p.fraction, mode=spec.mode, reason=p.reason))
            j = p.job
            assessments.append(Assessment(
                container=c.id, node=c.node, category=p.category,
                gain=j.key if math.isfinite(j.key) and j.key != NEW_KEY else None,
                cpu_fraction_now=c.cpu_allocation, cpu_fraction_next=target, note=note,
                forecast=j.reported,
                forecast_note="" if j.forecast is not None else (j.note or "not forecast")))
    return Decision(policy=policy.name, kind="Predictive", time=now, actions=tuple(actions),
                    assessments=tuple(assessments),
                    next_interval=spec.interval_seconds, dry_run=spec.dry_run,
                    notes=tuple(notes))


def _intervals(policy: PolicyDocument) -> Intervals:
    return Intervals.fixed(_predictive(policy).spec.interval_seconds)


def _summary(policy: PolicyDocument) -> str:
    spec = _predictive(policy).spec
    return (f"interval {spec.interval_seconds:g} s, beta {spec.beta:g}, {spec.mode}, "
            f"hysteresis {spec.hysteresis:g}")


def _cpu_mode(policy: PolicyDocument) -> CpuMode:
    return _predictive(policy).spec.mode


def _scope(policy: PolicyDocument) -> Scope:
    return "cluster" if _predictive(policy).spec.migrate else "node"


def _acts_on(policy: PolicyDocument) -> frozenset[ActionClass]:
    return frozenset({"cpu", "placement"} if _predictive(policy).spec.migrate else {"cpu"})


KIND = Kind(
    name="Predictive", document=PredictivePolicy, plan=plan,
    scope="node",  # each worker's CPU, from its own jobs' forecasts ...
    policy_scope=_scope,  # ... and the whole cluster when it may move jobs (`migrate`)
    intervals=_intervals,
    wakes_on=frozenset({"started", "stopped"}),  # a new job is ranked at once
    inputs=frozenset({"evaluation", "cpu", "steps"}),
    acts_on=frozenset({"cpu"}), policy_acts_on=_acts_on,
    cpu_mode=_cpu_mode, summary=_summary, gain_label="REMAINING s (best)",
    convergence_alpha=lambda p: _predictive(p).spec.alpha,
    floor=lambda p, n: 1.0 / (_predictive(p).spec.beta * max(n, 1)),
    node_reports=lambda p, snapshot: node_reports(_predictive(p), snapshot),  # with `migrate`
    node_part=lambda p: node_part(_predictive(p)),
)
"""Predictive's registration entry (`policyd.engine.registry`)."""
