"""Deadline split across node agents and the manager: each agent sizes its own worker's jobs and
reports what a move or an admission needs; the manager moves and admits from the reports alone
(`policyd.model.node_report`).

Theory of operation. Sizing a job (its forecast, its need, the split of its worker's cores) needs
only its worker's jobs, so a node agent does it and applies the limits (`node_part`: the policy
without moves and admissions, decided on its node). Moves and admissions need every worker, but
only a few figures of each (`deadline.node_reports`): its spare cores (capacity less what its
jobs must keep), the most cores one of its jobs is granted (the scale of a weight in shares
mode), and its at-risk jobs a move could save (`AtRiskJob`: the cores each needs elsewhere with
the margin once the move's cost is paid, and the most it can use), earliest deadline first, at
most as many as a cycle may move off one worker. `plan_from_reports` runs the one-snapshot
rules on them: the moves (`deadline_moves.at_risk_moves`), then the held jobs
(`deadline_admission.candidates`, `admission.place`) on the spare cores the moves leave; the
held jobs come from the manager's own source, as in one snapshot.

Differences from deciding from one snapshot, all from the split itself: a worker whose report
is missing is not in the manager's picture (the source says so); an agent judges forecasts and
guards at its own snapshot's time; of more at-risk jobs than a cycle may move off one worker,
the agent keeps the earliest deadlines; and an admitted job starts with the cores it was
admitted for (a job admitted only because nothing else waits: its floor), while its worker's
running jobs make room at their agent's next cycle, not in the same one (one snapshot splits
the worker again with the job counted). tests/engine/test_deadline_reports.py plays whole
scenarios both ways.

The manager's decision has one assessment per reported at-risk job (moved, or why not), the
admissions and the queue; the jobs' limits and deadlines are in their agents' decisions and
metrics. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import TYPE_CHECKING, Literal

from policyd.engine.admission import place
from policyd.engine.deadline_admission import candidates
from policyd.engine.deadline_cores import limit_fraction
from policyd.engine.deadline_moves import at_risk_moves
from policyd.model import Admit, Assessment, Decision, Snapshot

if TYPE_CHECKING:  # the kind's module imports this one
    from policyd.engine.deadline import DeadlinePolicy


def node_part(policy: DeadlinePolicy) -> DeadlinePolicy:
    """What a node agent decides and applies on its worker: the policy without moves and
    admissions (each worker sized on its own)."""
    return policy.model_copy(update={"spec": policy.spec.model_copy(
        update={"migrate": False, "admit": False})})


def plan_from_reports(policy: DeadlinePolicy, snapshot: Snapshot) -> Decision:
    """The moves and admissions of `policy`, decided on the manager from its node agents'
    reports in `snapshot` and the held jobs of its source (module docstring)."""
    spec, now = policy.spec, snapshot.time
    reports = sorted((r for r in snapshot.node_reports if r.policy == policy.name),
                     key=lambda r: r.node)
    spare = {r.node: r.spare_cores for r in reports}
    at_risk = [(r.node, j) for r in reports for j in r.at_risk]
    moves = at_risk_moves(policy.name, spec, at_risk, spare=spare,
                          capacity={r.node: r.cpu_capacity_cores for r in reports},
                          now=now) if spec.migrate else {}
    ranked = candidates(snapshot.pending, spec, now) if spec.admit else []
    placed = place(ranked, spare, policy=policy.name)
    admits = _with_limits(placed.admits, {c.job.id: (c.cores, c.last) for c in ranked},
                          {r.node: (r.cpu_capacity_cores, r.top_cores) for r in reports},
                          floor_cores=spec.floor_cores, mode=spec.mode)
    assessments = []
    for node, job in at_risk:
        if job.container in moves:
            note = f"moves to {moves[job.container].to_node}: {moves[job.container].reason}"
        else:
            note = (f"at risk on {node}: needs {job.need_here_cores:.2f} cores for its deadline, "
                    f"the node gives {job.granted_cores:.2f}; no other worker has "
                    f"{job.need_elsewhere_cores:.2f} cores to spare for it (or the migration "
                    "budget is spent)")
        assessments.append(Assessment(container=job.container, node=node, category="AT_RISK",
                                      note=note))
    notes = [f"from {len(reports)} node reports",
             f"{len(at_risk)} at-risk jobs reported, "
             f"{sum(max(r.spare_cores, 0.0) for r in reports):.2f} cores to spare; "
             f"{len(moves)} moved"]
    if snapshot.pending and spec.admit:
        notes.append(f"admission: {len(placed.admits)} admitted, {len(placed.queue)} waiting")
    return Decision(policy=policy.name, kind="Deadline", time=now,
                    actions=(*moves.values(), *admits),
                    assessments=tuple(sorted(assessments, key=lambda a: (a.node, a.container))),
                    next_interval=spec.interval_seconds, dry_run=spec.dry_run,
                    notes=tuple(notes), queue=placed.queue)


def _with_limits(admits: tuple[Admit, ...], asked: dict[str, tuple[float, bool]],
                 nodes: dict[str, tuple[float, float]], *, floor_cores: float,
                 mode: Literal["quota", "shares"]) -> list[Admit]:
    """Admissions with the limit each starts with: the cores it was admitted for (one admitted
    only because nothing else waits: its floor), as a cap of its worker's cores in quota mode,
    as a weight beside the worker's largest grant in shares mode."""
    starts = {}
    for a in admits:
        cores, last = asked[a.container]
        starts[a.container] = min(floor_cores, cores) if last else cores
    top: defaultdict[str, float] = defaultdict(float)
    for a in admits:
        top[a.node] = max(top[a.node], nodes[a.node][1], starts[a.container])
    return [replace(a, mode=mode, fraction=limit_fraction(
        starts[a.container], top[a.node], nodes[a.node][0], mode)) for a in admits]
