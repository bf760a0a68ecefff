"""What each action does to a simulated job: the simulator's side of the Actuator protocol.

* `SetCpu`: the job's fraction and limit mode; the world then shares the node again
  (`policyd.sim.cpu`: shares are weights, quota is a hard cap).
* `Migrate`: checkpoint and restore (thesis Fig. 3.2): the job stops at once, uses no CPU for
  `migration_seconds`, then the world restarts it from its checkpoint (progress kept) on the
  target node in a new container, with a new start time and default CPU limits (fraction 1,
  shares). Markers: migrated; rebalanced for Algorithm 5's moves; converged_at from the action
  (None leaves it as it was).
* `MarkMigrated`: markers only (Algorithm 4, lines 8-10): migrated, and converged_at.
* `Stop`: the job checkpoints and ends for good (delivered): it uses no more CPU, its loss
  is final, and it is never restarted (the world reads `stopped` as done).

Every action stamps `markers.last_action_at` (epoch seconds), which the guards' cooldown reads.
Job lookup, dry-run, counting migrations and `Admit` (a held job, not a running one) are the
world's business.
"""

from __future__ import annotations

from collections.abc import Container as Collection
from dataclasses import replace
from typing import assert_never

from policyd.model import Action, Admit, MarkMigrated, Migrate, SetCpu, Stop
from policyd.sim.job import SimJob
from policyd.sim.source import EPOCH_SECONDS


def carry_out(job: SimJob, action: Action, *, now: float, migration_seconds: float,
              nodes: Collection[str]) -> None:
    """Apply `action` to the running `job` at virtual time `now`; raises when impossible."""
    if action.node != job.node:
        raise ValueError(f"container {job.id!r} runs on {job.node}, not on {action.node}")
    stamp = EPOCH_SECONDS + now
    match action:
        case SetCpu():
            job.fraction, job.mode = action.fraction, action.mode
            job.limits.append((now, action.fraction))
            job.markers = replace(job.markers, last_action_at=stamp)
        case Migrate():
            if action.to_node not in nodes:
                raise LookupError(f"no node {action.to_node!r} to migrate {job.id!r} to")
            job.stop()
            job.phase, job.node = "migrating", action.to_node
            job.resume_at = now + migration_seconds
            job.fraction, job.mode = 1.0, "shares"  # the new container has default limits
            converged = job.markers.converged_at
            job.markers = replace(
                job.markers, migrated=True, last_action_at=stamp,
                rebalanced=job.markers.rebalanced or action.rebalance,
                converged_at=converged if action.converged_at is None else action.converged_at)
        case MarkMigrated():
            job.markers = replace(job.markers, migrated=True, converged_at=action.converged_at,
                                  last_action_at=stamp)
        case Admit():
            raise ValueError(f"{job.id!r} runs already: an admission starts a held job, which "
                             "the world does itself (World.apply)")
        case Stop():
            job.stop()
            job.stopped, job.finish_at, job.phase = action.event, now, "done"
            if job.quality_at is None:
                job.quality_at = now  # it never got there: its time-to-quality is its JCT
            job.markers = replace(job.markers, last_action_at=stamp)
        case _:
            assert_never(action)
