"""Settling a recorded move: look, take the recovery table's row, repeat until it is done.

`Mover.settle(move)` reads the workload, classifies it (`recovery.seen_pod` / `seen_job`),
and runs the steps of that row (`recovery.POD_RULES` / `JOB_RULES`) with `workloads`. A step
that finds the target will not do (the replacement does not run there; the old pod exited
without a checkpoint) turns the move into `rolling-back`, written on the record before
anything else, and the table is read again. The record is forgotten (deleted) only by the
row's last step; a step that fails otherwise (the API down, a pod that will not go) raises
`ActuationError` and leaves the record, so the move stays pending and is settled again later
(`KubernetesActuator` retries pending moves before its actions).

Outcomes that policyd cannot improve on are reported and forgotten: the Job's template
cannot be re-pinned (Kubernetes before 1.36: resumed where it was), or the workload does not
run at home either after a rollback (it is left to the scheduler: the pod exists, one trainer).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

from policyd.actuators.errors import ActuationError
from policyd.actuators.kubernetes.moves import Move, MoveStore
from policyd.actuators.kubernetes.pods import PodRef
from policyd.actuators.kubernetes.recovery import (
    JobSeen,
    PodSeen,
    Step,
    seen_job,
    seen_pod,
    steps_for,
)
from policyd.actuators.kubernetes.workloads import Workloads

LOG = logging.getLogger(__name__)

MAX_ROUNDS = 3
"""Rows read per settle: moving, rolling back, and one more look (each row ends in forget)."""


class RollBack(Exception):
    """The target will not do: roll the move back (the message says why)."""


@dataclass(frozen=True, kw_only=True)
class Settled:
    """How a move ended: where the workload runs, the rows taken, what the event regards."""

    move: Move
    outcome: Literal["moved", "home", "untouched"]
    steps: tuple[Step, ...]
    obj: dict[str, Any]


@dataclass
class Mover:
    """Runs the recovery table's steps (see the module docstring)."""

    work: Workloads
    store: MoveStore

    def settle(self, move: Move) -> Settled:
        taken: list[Step] = []
        for _ in range(MAX_ROUNDS):
            current, seen = self._look(move)
            steps = steps_for(move, seen)
            LOG.info("kubernetes: move of %s [%s], found %s: %s", move, move.phase,
                     seen if isinstance(seen, str) else
                     f"{'suspended' if seen[0] else 'running'}, pinned {seen[1]}",
                     ", ".join(steps))
            try:
                obj = self._run(move, steps, current)
            except RollBack as why:
                taken.extend(steps)
                move = self.store.update(move.rolling_back(str(why)))
                LOG.warning("kubernetes: rolling back the move of %s: %s", move, why)
                continue
            taken.extend(steps)
            outcome: Literal["moved", "home", "untouched"] = (
                "moved" if "confirm-target" in steps else
                "home" if "confirm-home" in steps else "untouched")
            return Settled(move=move, outcome=outcome, steps=tuple(taken), obj=obj)
        raise ActuationError(f"move of {move}: not settled after {MAX_ROUNDS} rounds")

    def _look(self, move: Move) -> tuple[dict[str, Any] | None, PodSeen | JobSeen]:
        if move.workload == "pod":
            pod = self.work.get_pod(move.namespace, move.name)
            return pod, seen_pod(move, pod)
        job = self.work.read_job(move.namespace, move.name)
        return job, seen_job(move, job)

    def _run(self, move: Move, steps: tuple[Step, ...], current: dict[str, Any] | None
             ) -> dict[str, Any]:
        """Run the row; the object the workload is at the end (for its Event)."""
        ref = PodRef(move.namespace, move.name, None)
        obj: dict[str, Any] = dict(current or {})
        for step in steps:
            match step:
                case "forget":
                    self.store.forget(move)
                case "wait-gone":
                    code = self.work.wait_gone(ref, move.grace_seconds
                                               + self.work.settings.delete_timeout_seconds)
                    if code not in (None, 0) and move.phase == "moving":
                        raise RollBack(f"pod {ref} exited with code {code} instead of 0 after "
                                       "SIGTERM (no checkpoint)")
                case "create-target":
                    self.work.create(ref, move.target)
                case "create-home":
                    self.work.create(ref, move.home)
                case "remove":
                    uid = str(((current or {}).get("metadata") or {}).get("uid") or "")
                    self.work.remove(ref, uid, move.grace_seconds, evict=False)
                case "confirm-target" | "confirm-home":
                    obj = self._confirm(move, ref, step)
                case _:
                    obj = self._job_step(move, step) or obj
        return obj

    def _confirm(self, move: Move, ref: PodRef, step: Step) -> dict[str, Any]:
        home = step == "confirm-home"
        node = move.from_node if home else move.to_node
        if move.workload == "pod":
            pod, problem = self.work.wait_running(ref, node)
            found: dict[str, Any] = pod or {}
        else:
            job = self.work.read_job(move.namespace, move.name) or {}
            problem = self.work.wait_job_running(job, node) if job else "the Job is gone"
            found = job
        if problem is None:
            return found
        if not home:
            raise RollBack(f"the {move.workload} on node {node} {problem}")
        self.store.forget(move)
        raise ActuationError(f"{move}: rolled back ({move.why}), but on node {node} it "
                             f"{problem}; left to the scheduler")

    def _job_step(self, move: Move, step: Step) -> dict[str, Any] | None:
        ns, name = move.namespace, move.name
        job = self.work.read_job(ns, name)
        if job is None:
            return None
        match step:
            case "suspend":
                self.work.suspend(ns, name, move.from_node)
            case "stop-pods":
                self.work.stop_pods(job, move.grace_seconds)
            case "pin-target":
                try:
                    self.work.pin(job, move.to_node, move.marks, "pin")
                except ActuationError:
                    self.work.resume(ns, name)
                    self.store.forget(move)
                    raise
            case "pin-home":
                self.work.pin(job, move.from_node, {}, "pin back")
            case "resume":
                self.work.resume(ns, name)
        return job
