"""Predictive with `migrate` split across node agents and the manager: each agent sets its own
worker's CPU limits and reports what a move could serve; the manager moves jobs from the
reports alone (`policyd.model.node_report`).

Theory of operation. A worker's plan (`predictive_node`: its jobs ranked by their forecasts, its
cores granted in that order) needs only that worker's jobs, so a node agent makes it and applies
its limits (`node_part`: the policy with `migrate` off, decided on its node). A move needs
every worker, but only two figures of each: the cores its plan leaves unused, and the jobs it
leaves short of a whole first core with how long each would take where it is and its speed
model. `node_reports` is that, per worker: the spare cores, its stated speed, and the waiting
jobs that the guards let move and that could gain more than a move costs on some worker (a gain
is largest on the most cores the job can use of the fastest worker, so a job that would not
gain enough there would gain enough nowhere), at most as many as a cycle may move off one
worker, the largest possible gains first. `plan_from_reports` runs the one-snapshot planner's
move rule (`predictive_moves.plan_moves`) on them, at the reported speeds (a node not stated:
the average of the stated ones, 1.0 if none).

Differences from deciding from one snapshot, all from the split itself: a worker whose report is
missing is not in the manager's picture (the source says so); an agent judges the guards and
its forecasts at its own snapshot's time; a job the manager moves may have had its limit set by
its agent in the same cycle (the one-snapshot planner leaves a moving job's limit as it is);
of more waiting jobs than a cycle may move off one worker, the agent keeps those with the
largest gain on the most cores they can use of the fastest worker, where the one-snapshot
planner prices each on the cores and at the speed a target offers; and speeds are the stated
ones only (`node_speed.unjudged`): the one-snapshot planner judges a node not stated from its
jobs' step times, which no report carries, and an agent whose snapshot holds its node alone
knows no faster worker, so it reports only the jobs that would gain enough at its own speed
(with stated speeds and agents that see every node, as in the simulator, the split makes the
one-snapshot moves). tests/engine/test_predictive_reports.py plays whole scenarios both ways.

The manager's decision has one assessment per reported waiting job (moved, or why not); the
jobs' limits, ranks and forecasts are in their agents' decisions and metrics. Pure: no I/O, no
clock.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from policyd.engine.guards import MigrationBudget
from policyd.engine.node_speed import UNJUDGED, unjudged
from policyd.engine.predictive_moves import plan_moves
from policyd.engine.predictive_node import plans_of, spare_cores, waiting_jobs
from policyd.model import Assessment, Decision, NodeReport, Snapshot, WaitingJob
from policyd.model.node_report import WAITING_FIGURES

if TYPE_CHECKING:  # the kind's module imports this one
    from policyd.engine.predictive import PredictivePolicy


def node_part(policy: PredictivePolicy) -> PredictivePolicy:
    """What a node agent decides and applies on its worker: the policy without moves."""
    return policy.model_copy(update={"spec": policy.spec.model_copy(update={"migrate": False})})


def _best_gain(job: WaitingJob, faster: float) -> float:
    """The most a move could gain the job: on the most cores it can use, of a worker `faster`
    times as fast as its own."""
    return job.ahead_seconds - job.remaining_seconds_at(job.best_cores) / faster


def node_reports(policy: PredictivePolicy, snapshot: Snapshot) -> tuple[NodeReport, ...]:
    """Every worker's report of `snapshot` under `policy` (module docstring), one per node."""
    spec, now = policy.spec, snapshot.time
    plans = plans_of(policy, snapshot)
    threshold = spec.move_threshold_seconds
    per_node = min(spec.safety.max_migrations_per_node, spec.safety.max_migrations_per_cycle)
    speeds = unjudged({n.name: n.speed for n in snapshot.nodes}, UNJUDGED)
    fastest = max(speeds.by_node.values(), default=1.0)
    reports = []
    for node in snapshot.nodes:
        mine = plans.get(node.name, [])
        faster = fastest / speeds.of(node.name)
        movable = [w for _, w in waiting_jobs(mine, spec, now)
                   if all(math.isfinite(getattr(w, f)) for f in WAITING_FIGURES)
                   and _best_gain(w, faster) > threshold]
        kept = {w.container for w in sorted(movable, key=lambda w: (-_best_gain(w, faster),
                                                                    w.container))[:per_node]}
        reports.append(NodeReport(
            policy=policy.name, node=node.name, time=now,
            cpu_capacity_cores=node.cpu_capacity, cpu_used_cores=node.cpu_usage,
            selected=len(mine), spare_cores=spare_cores(mine, node.cpu_capacity),
            waiting=tuple(w for w in movable if w.container in kept),
            stated_speed=node.speed if node.speed is not None else 0.0))
    return tuple(reports)


def plan_from_reports(policy: PredictivePolicy, snapshot: Snapshot) -> Decision:
    """The moves of `policy`, decided on the manager from its node agents' reports in
    `snapshot` (module docstring)."""
    spec, now = policy.spec, snapshot.time
    reports = sorted((r for r in snapshot.node_reports if r.policy == policy.name),
                     key=lambda r: r.node)
    waiting = [(r.node, w) for r in reports for w in r.waiting]
    moves = plan_moves(policy.name, spec, waiting, {r.node: r.spare_cores for r in reports},
                       MigrationBudget.of(spec),
                       speeds=unjudged({r.node: r.stated_speed or None for r in reports}, UNJUDGED))
    threshold = spec.move_threshold_seconds
    assessments = []
    for node, w in waiting:
        if w.container in moves:
            move, why = moves[w.container]
            note = f"moves to {move.to_node}: {why}"
        else:
            note = (f"waits on {node}: predicted to finish in {w.ahead_seconds:.0f} s there; "
                    f"no worker's spare cores gain it more than {threshold:g} s this cycle "
                    "(or the migration budget is spent)")
        assessments.append(Assessment(container=w.container, node=node, category=None,
                                      note=note))
    spare = sum(r.spare_cores for r in reports)
    notes = (f"from {len(reports)} node reports",
             f"{len(waiting)} waiting jobs reported, {spare:.2f} cores to spare; "
             f"{len(moves)} moved")
    return Decision(policy=policy.name, kind="Predictive", time=now,
                    actions=tuple(m for m, _ in moves.values()),
                    assessments=tuple(sorted(assessments, key=lambda a: (a.node, a.container))),
                    next_interval=spec.interval_seconds, dry_run=spec.dry_run, notes=notes)
