"""Deadline's moves: a job its worker cannot give the cores to meet its deadline goes to the
worker with the most cores to spare, when there it meets the deadline with the margin, the
move's cost counted. One rule whether the manager decides from one snapshot (`deadline.plan`)
or from its node agents' reports (`deadline_reports`): both hand it the at-risk jobs
(`policyd.model.AtRiskJob`, the guards already applied) and every worker's spare cores.

Jobs are served earliest deadline first (ties: as given, by worker and id). A job's target is
the worker with the most spare cores (ties: by name) among those, other than its own, where
the cores it needs fit both the spare cores and the most it can use there (its cap, the
worker's cores), and the migration budget allows a move from its worker to that one. Each move
takes the cores from the target's spare and gives the job's reserved cores back to its worker.

The workers are kept sorted by spare cores (`policyd.engine.roomiest`), so a job looks at the
roomiest first and stops at the first that takes it, or as soon as one has less to spare than
it needs: at 10,000 workers a job costs the few it skips, not a pass over all of them. Pure:
no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING

from policyd.engine.deadline_cores import EPSILON_CORES, span
from policyd.engine.guards import MigrationBudget
from policyd.engine.roomiest import Roomiest
from policyd.model import AtRiskJob, Migrate

if TYPE_CHECKING:  # the kind's module imports this one
    from policyd.engine.deadline import DeadlineSpec


def at_risk_moves(policy: str, spec: DeadlineSpec, jobs: Sequence[tuple[str, AtRiskJob]], *,
                  spare: MutableMapping[str, float], capacity: Mapping[str, float],
                  now: float) -> dict[str, Migrate]:
    """The moves of `jobs` ((worker, job) pairs), by container id (module docstring). `spare`
    is updated in place with the moves' cores, for the admissions that follow."""
    budget = MigrationBudget.of(spec)
    workers = Roomiest(spare)
    moves: dict[str, Migrate] = {}
    for node, job in sorted(jobs, key=lambda x: x[1].deadline_seconds):
        if budget.exhausted:
            break
        if budget.node_full(node):
            continue
        need = job.need_elsewhere_cores
        target = None
        for name in workers:
            if workers.cores[name] + EPSILON_CORES < need:
                break  # the rest have less to spare
            if name == node or need > min(job.cap_cores, capacity[name]) + EPSILON_CORES:
                continue
            if budget.refusal(node, name) is None:
                target = name
                break
        if target is None:
            continue
        moves[job.container] = Migrate(
            policy=policy, container=job.container, from_node=node, to_node=target,
            grace_seconds=spec.migration_grace_seconds,
            reason=(f"at risk on {node}: needs {job.need_here_cores:.2f} cores to meet its "
                    f"deadline in {span(job.deadline_seconds - now)}, the node gives "
                    f"{job.granted_cores:.2f}; on {target} {need:.2f} of "
                    f"{workers.cores[target]:.2f} spare cores meet it with the margin, the "
                    f"move's {spec.migration_cost_seconds:g} s counted"))
        budget.spend(node, target)
        workers.change(target, -need)
        workers.change(node, job.reserved_cores)
    spare.update(workers.cores)
    return moves
