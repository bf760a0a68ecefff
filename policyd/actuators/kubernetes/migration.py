"""Migrate: move a training pod to another node by the checkpoint protocol, crash-safely.

Every move is written down on the cluster (`moves.Move`, a ConfigMap in policyd's namespace)
*before* its first irreversible step, and from then on it is settled by the recovery table
(`recovery`, run by `mover.Mover`): the same rows finish a live move and one a crash
interrupted, so a policyd that dies at any point leaves a move the next one settles (at
start-up, and whenever a move is pending), with one trainer running at the end, from its
checkpoint, on the target or back home. A move that succeeds returns what runs now (the
replacement pod, or the Job) for its Event.

Bare pods (no controller):

1. the pod must be managed, Running, on `from_node`; the replacement is computed from it
   (`pods.replacement`: same name and spec, pinned to `to_node` by required node affinity,
   markers `migrated`, `converged_at`, `rebalanced`, `migrated-from`, `last_action_at`), and
   so is the pod to create again at home if the target fails; both go into the record;
2. it is evicted (`use_eviction`: PodDisruptionBudgets honoured, 429 = a budget forbids it
   now, 500 = several budgets select it) or deleted, with the action's grace period (SIGTERM:
   the job writes its checkpoint) and a uid precondition; a refusal forgets the record;
3. the table: wait until it is gone (an exit code other than 0 = no checkpoint: roll back),
   create the replacement, confirm it runs on `to_node` for `confirm_seconds` (else roll back:
   remove it, create the pod again at home, where it resumes from its checkpoint).

Job-owned pods are never deleted and recreated by policyd (the Job controller makes its own):

1. the Job must have `podReplacementPolicy: Failed` (its replacement starts only once the old
   pod has fully terminated: never two trainers at once), the target node must carry the
   labels of the template's `nodeSelector` (a pin does not replace it: the pod would stay
   Pending), and no PodDisruptionBudget selecting its pods may forbid a disruption now
   (`disruption`: suspending bypasses the Eviction API);
2. the Job is suspended (labelled `policyd.io/migrating=true`, annotated with the target);
3. the table: its pods are stopped with the action's grace period and awaited, the template's
   required node affinity is pinned to `to_node` with the markers on the template, the Job is
   resumed and a pod of it must run on `to_node` (else roll back: suspend, pin home, resume).
   Kubernetes before 1.36 refuses the pin (422): reported, and the Job resumed where it was.

Suspending resets the Job's `startTime` (and so its activeDeadlineSeconds clock): documented
in the policy docs, not worked around here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from policyd.actuators.errors import ActuationError
from policyd.actuators.kubernetes import disruption, pods
from policyd.actuators.kubernetes.calls import Caller
from policyd.actuators.kubernetes.mover import Mover, Settled
from policyd.actuators.kubernetes.moves import Move, MoveStore, record_name
from policyd.actuators.kubernetes.pods import PodRef
from policyd.actuators.kubernetes.settings import KubernetesSettings
from policyd.actuators.kubernetes.workloads import Workloads
from policyd.actuators.opt_out import OptOutKeys
from policyd.model import Migrate
from policyd.model import labels as names


@dataclass
class Migration:
    """Migrate actions against the API (see the module docstring); `policy_api` is a
    PolicyV1Api (PodDisruptionBudgets)."""

    core: Any
    batch: Any
    policy_api: Any
    caller: Caller
    settings: KubernetesSettings
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    opt_out: OptOutKeys = field(default_factory=OptOutKeys)
    work: Workloads = field(init=False)
    store: MoveStore = field(init=False)
    mover: Mover = field(init=False)

    def __post_init__(self) -> None:
        self.work = Workloads(self.core, self.batch, self.caller, self.settings,
                              clock=self.clock, sleep=self.sleep)
        self.store = MoveStore(self.core, self.caller, self.settings.record_namespace)
        self.mover = Mover(self.work, self.store)

    def run(self, action: Migrate, *, grace_seconds: float) -> dict[str, Any]:
        """Carry out `action`; returns the object the Event regards (pod or Job)."""
        ref = PodRef.parse(action.container, self.settings.container_name)
        pod = self.work.get_pod(ref.namespace, ref.name)
        if pod is None:
            raise ActuationError(f"pod {ref} is gone; nothing to migrate")
        pods.check_managed(pod, self.settings.label_selector, self.opt_out)
        node = (pod.get("spec") or {}).get("nodeName")
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        if node == action.to_node and annotations.get(names.MIGRATED_FROM) == action.from_node:
            return pod  # an earlier attempt finished this very migration
        owner = pods.controller_of(pod)
        if owner is not None and owner[0] == "Job":
            return self.run_job(action, owner[1], ref, grace_seconds)
        if owner is not None:
            raise ActuationError(f"pod {ref} is owned by {owner[0]} {owner[1]}, whose "
                                 "controller would recreate it anywhere; not migrated")
        if node != action.from_node:
            raise ActuationError(f"pod {ref} runs on node {node}, not {action.from_node}")
        if not pods.is_running(pod):
            raise ActuationError(f"pod {ref} is {pods.phase(pod)}, not running; not migrated")
        return self.run_bare(action, pod, ref, grace_seconds)

    # -- bare pods ---------------------------------------------------------------------------

    def run_bare(self, action: Migrate, pod: Mapping[str, Any], ref: PodRef,
                 grace_seconds: float) -> dict[str, Any]:
        move = self.record(bare_move(action, pod, grace_seconds, now=self.clock()))
        uid = move.uid
        try:
            self.work.remove(ref, uid, grace_seconds, evict=self.settings.use_eviction)
        except ActuationError:
            self.store.forget(move)
            raise
        return self.finished(self.mover.settle(move))

    # -- Job-owned pods ----------------------------------------------------------------------

    def run_job(self, action: Migrate, job_name: str, ref: PodRef, grace_seconds: float
                ) -> dict[str, Any]:
        where = f"job {ref.namespace}/{job_name}"
        job = self.work.read_job(ref.namespace, job_name)
        if job is None:
            raise ActuationError(f"{where} is gone; not migrated")
        spec = job.get("spec") or {}
        template = spec.get("template") or {}
        if self.settings.require_replacement_policy_failed and \
                spec.get("podReplacementPolicy") != "Failed":
            raise ActuationError(f"{where} lacks podReplacementPolicy: Failed (two trainers "
                                 "could run at once); not migrated")
        selector = (template.get("spec") or {}).get("nodeSelector") or {}
        if not pods.selector_fits(selector, self.work.read_node(action.to_node)):
            shown = ", ".join(f"{k}={v}" for k, v in sorted(selector.items()))
            raise ActuationError(f"{where}: its template's nodeSelector ({shown}) excludes node "
                                 f"{action.to_node}; its pod could not run there; not migrated")
        disruption.check(self.policy_api, self.caller, ref.namespace,
                         (template.get("metadata") or {}).get("labels") or {}, where)
        move = self.record(job_move(action, job, grace_seconds, now=self.clock()))
        try:
            self.work.suspend(ref.namespace, job_name, action.to_node)
        except ActuationError:
            self.store.forget(move)
            raise
        return self.finished(self.mover.settle(move))

    # -- shared ------------------------------------------------------------------------------

    def record(self, move: Move) -> Move:
        """Write the move down; a move of the same workload still pending is settled first
        (and this one left to the next cycle)."""
        try:
            return self.store.create(move)
        except ActuationError as exc:
            earlier = self.store.get(move)
            if earlier is None:
                raise
            settled = self.mover.settle(earlier)
            raise ActuationError(f"{exc}: settled ({settled.outcome}); not migrated this "
                                 "cycle") from exc

    @staticmethod
    def finished(settled: Settled) -> dict[str, Any]:
        """What a live move returns: the workload where it now runs; a rollback is an error."""
        move = settled.move
        if move.phase == "rolling-back":
            raise ActuationError(f"{move}: {move.why}; rolled back: running again on node "
                                 f"{move.from_node}")
        return settled.obj


def bare_move(action: Migrate, pod: Mapping[str, Any], grace_seconds: float, *, now: float
              ) -> Move:
    """The record of a bare pod's move (pure): the replacement on the target, and the pod to
    create again at home, both annotated with the record's name."""
    meta = pod.get("metadata") or {}
    namespace, name = str(meta.get("namespace")), str(meta.get("name"))
    move_id = record_name("pod", namespace, name)
    marks = pods.marker_annotations(now=now, migrated=True, rebalanced=action.rebalance,
                                    converged_at=action.converged_at,
                                    from_node=action.from_node)
    return Move(workload="pod", namespace=namespace, name=name, uid=str(meta.get("uid") or ""),
                from_node=action.from_node, to_node=action.to_node,
                grace_seconds=grace_seconds, policy=action.policy, reason=action.reason,
                target=pods.replacement(pod, to_node=action.to_node,
                                        markers={**marks, names.MOVE: move_id}),
                home=pods.replacement(pod, to_node=action.from_node,
                                      markers={names.MOVE: move_id}))


def job_move(action: Migrate, job: Mapping[str, Any], grace_seconds: float, *, now: float
             ) -> Move:
    """The record of a Job's move (pure): the markers its template gets with the pin."""
    meta = job.get("metadata") or {}
    marks = pods.marker_annotations(now=now, migrated=True, rebalanced=action.rebalance,
                                    converged_at=action.converged_at,
                                    from_node=action.from_node)
    return Move(workload="job", namespace=str(meta.get("namespace")),
                name=str(meta.get("name")), uid=str(meta.get("uid") or ""),
                from_node=action.from_node, to_node=action.to_node,
                grace_seconds=grace_seconds, policy=action.policy, reason=action.reason,
                marks=marks)
