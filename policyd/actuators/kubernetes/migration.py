"""Migrate: move a training pod to another node, by the checkpoint protocol.

Bare pods (no controller), in this order so that a failure leaves one job running or
restartable (its checkpoint is on a shared volume that the pod spec mounts, which stays):

1. the pod must be managed, Running, on `from_node`; the replacement is computed from it
   (`pods.replacement`: same name and spec, pinned to `to_node` by required node affinity,
   markers `migrated`, `converged_at`, `rebalanced`, `migrated-from`, `last_action_at`);
2. it is evicted (`use_eviction`, PodDisruptionBudgets honoured: 429 = a budget forbids it
   now, 500 = several budgets select it) or deleted, with the policy's grace period (SIGTERM:
   the job writes its checkpoint) and a uid precondition;
3. policyd waits until it is gone (within grace + `delete_timeout_seconds`); an exit code
   other than 0 seen meanwhile means "no checkpoint": it is created again on `from_node`;
4. the replacement is created and must be Running on `to_node` within
   `start_timeout_seconds` and still `confirm_seconds` later; otherwise it is deleted and the
   pod created again on `from_node` (rolled back, it resumes from its checkpoint).

Job-owned pods are never deleted and recreated by policyd (the Job controller makes its own):

1. the Job must have `podReplacementPolicy: Failed` (so the replacement starts only once the
   old pod has fully terminated: never two trainers at once);
2. the Job is labelled `policyd.io/migrating=true`, annotated `migrating-to` (the intent that
   `recovery` finishes after a crash) and suspended: the controller deletes its pod (with the
   pod's own terminationGracePeriodSeconds; the checkpoint is written then);
3. once no pod of the Job is Pending or Running, the template's required node affinity is
   pinned to `to_node` and the markers written on the template's annotations (so the
   replacement carries them). Kubernetes refuses this for a Job that already ran before 1.36
   (MutableSchedulingDirectivesForSuspendedJobs, on by default in 1.36): the 422 is reported
   and the Job resumed where it was;
4. the Job is resumed (label and annotation cleared) and a pod of it must run on `to_node`.

Suspending resets the Job's `startTime` (and so its activeDeadlineSeconds clock) and does not
consult PodDisruptionBudgets: documented in the policy docs, not worked around here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException  # type: ignore[import-untyped]

from policyd.actuators.errors import ActuationError
from policyd.actuators.kubernetes import pods
from policyd.actuators.kubernetes.calls import NOT_FOUND, TOO_MANY, Caller, status_of
from policyd.actuators.kubernetes.pods import PodRef
from policyd.actuators.kubernetes.settings import KubernetesSettings
from policyd.model import Migrate
from policyd.model import labels as names

EVICTION_REFUSALS = frozenset({NOT_FOUND, 409, TOO_MANY, 500})


@dataclass
class Migration:
    """Migrate actions against the API (see the module docstring)."""

    core: Any
    batch: Any
    caller: Caller
    settings: KubernetesSettings
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep

    # -- reads -------------------------------------------------------------------------------

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            pod: dict[str, Any] = self.caller.call(f"read pod {namespace}/{name}",
                                                   self.core.read_namespaced_pod, name, namespace)
        except ApiException as exc:
            if status_of(exc) == NOT_FOUND:
                return None
            raise ActuationError(f"read pod {namespace}/{name}: HTTP {exc.status}") from exc
        return pod

    def job_pods(self, job: Mapping[str, Any]) -> list[dict[str, Any]]:
        meta = job.get("metadata") or {}
        match = ((job.get("spec") or {}).get("selector") or {}).get("matchLabels") or {
            "batch.kubernetes.io/controller-uid": meta.get("uid")}
        selector = ",".join(f"{k}={v}" for k, v in sorted(match.items()))
        listed = self.caller.call(f"list pods of job {meta.get('name')}",
                                  self.core.list_namespaced_pod, meta.get("namespace"),
                                  label_selector=selector)
        return list(listed.get("items") or [])

    # -- entry -------------------------------------------------------------------------------

    def run(self, action: Migrate, *, grace_seconds: float) -> dict[str, Any]:
        """Carry out `action`; returns the object the Event regards (pod or Job)."""
        ref = PodRef.parse(action.container, self.settings.container_name)
        pod = self.get_pod(ref.namespace, ref.name)
        if pod is None:
            raise ActuationError(f"pod {ref} is gone; nothing to migrate")
        pods.check_managed(pod, self.settings.label_selector)
        node = (pod.get("spec") or {}).get("nodeName")
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        if node == action.to_node and annotations.get(names.MIGRATED_FROM) == action.from_node:
            return pod  # an earlier attempt finished this very migration
        owner = pods.controller_of(pod)
        if owner is not None and owner[0] == "Job":
            return self.run_job(action, owner[1], ref)
        if owner is not None:
            raise ActuationError(f"pod {ref} is owned by {owner[0]} {owner[1]}, whose "
                                 "controller would recreate it anywhere; not migrated")
        if node != action.from_node:
            raise ActuationError(f"pod {ref} runs on node {node}, not {action.from_node}")
        if not pods.is_running(pod):
            raise ActuationError(f"pod {ref} is {pods.phase(pod)}, not running; not migrated")
        self.run_bare(action, pod, ref, grace_seconds)
        return pod

    # -- bare pods ---------------------------------------------------------------------------

    def run_bare(self, action: Migrate, pod: Mapping[str, Any], ref: PodRef,
                 grace_seconds: float) -> None:
        marks = pods.marker_annotations(now=self.clock(), migrated=True,
                                        rebalanced=action.rebalance,
                                        converged_at=action.converged_at,
                                        from_node=action.from_node)
        new = pods.replacement(pod, to_node=action.to_node, markers=marks)
        back = pods.replacement(pod, to_node=action.from_node, markers={})
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        self.remove(ref, uid, grace_seconds, evict=self.settings.use_eviction)
        code = self.wait_gone(ref, grace_seconds + self.settings.delete_timeout_seconds)
        if code not in (None, 0):
            self.create(ref, back)
            raise ActuationError(f"pod {ref} exited with code {code} instead of 0 after "
                                 "SIGTERM (no checkpoint); rolled back: created again on node "
                                 f"{action.from_node}")
        self.create(ref, new)
        problem = self.wait_running(ref, action.to_node)
        if problem is not None:
            self.remove(ref, "", grace_seconds, evict=False)
            self.wait_gone(ref, grace_seconds + self.settings.delete_timeout_seconds)
            self.create(ref, back)
            raise ActuationError(f"replacement {ref} on node {action.to_node} {problem}; "
                                 f"rolled back: created again on node {action.from_node}")

    def remove(self, ref: PodRef, uid: str, grace_seconds: float, *, evict: bool) -> None:
        options: dict[str, Any] = {"gracePeriodSeconds": round(grace_seconds)}
        if uid:
            options["preconditions"] = {"uid": uid}
        try:
            if evict:
                body = {"apiVersion": "policy/v1", "kind": "Eviction",
                        "metadata": {"name": ref.name, "namespace": ref.namespace},
                        "deleteOptions": options}
                self.caller.call(f"evict pod {ref}", self.core.create_namespaced_pod_eviction,
                                 ref.name, ref.namespace, body, write=True,
                                 passthrough=EVICTION_REFUSALS)
            else:
                self.caller.call(f"delete pod {ref}", self.core.delete_namespaced_pod,
                                 ref.name, ref.namespace, write=True,
                                 body={"apiVersion": "v1", "kind": "DeleteOptions", **options})
        except ApiException as exc:
            status = status_of(exc)
            if status == TOO_MANY:
                raise ActuationError(f"pod {ref}: a PodDisruptionBudget forbids evicting it "
                                     "now (HTTP 429); PDB forbids now, retried next cycle"
                                     ) from exc
            if status == 500 and evict:
                raise ActuationError(f"pod {ref}: the Eviction API refuses (HTTP 500): more "
                                     "than one PodDisruptionBudget selects it; fix the "
                                     "budgets") from exc
            if status == 409:
                raise ActuationError(f"pod {ref} was replaced meanwhile (uid precondition "
                                     "failed); not migrated") from exc
            raise ActuationError(f"pod {ref} vanished before it was removed") from exc

    def wait_gone(self, ref: PodRef, timeout_seconds: float) -> int | None:
        """Poll until the pod is gone; the training container's exit code if seen."""
        deadline = self.clock() + timeout_seconds
        code: int | None = None
        while True:
            pod = self.get_pod(ref.namespace, ref.name)
            if pod is None:
                return code
            for s in (pod.get("status") or {}).get("containerStatuses") or []:
                ended = (s.get("state") or {}).get("terminated")
                if ended and (ref.container is None or s.get("name") == ref.container):
                    code = int(ended.get("exitCode", -1))
            if self.clock() >= deadline:
                raise ActuationError(f"pod {ref} still exists {timeout_seconds:g} s after its "
                                     "removal was asked (a finalizer?); the replacement was "
                                     "not created")
            self.sleep(self.settings.poll_seconds)

    def create(self, ref: PodRef, manifest: Mapping[str, Any]) -> None:
        try:
            self.caller.call(f"create pod {ref}", self.core.create_namespaced_pod,
                             ref.namespace, dict(manifest), write=True)
        except ApiException as exc:  # 409 AlreadyExists: ours if it carries the same origin
            found = self.get_pod(ref.namespace, ref.name)
            mine = (manifest.get("metadata") or {}).get("annotations", {}).get(
                names.MIGRATED_FROM)
            theirs = ((found or {}).get("metadata") or {}).get("annotations", {}).get(
                names.MIGRATED_FROM)
            if found is None or mine is None or mine != theirs:
                raise ActuationError(f"create pod {ref}: HTTP {exc.status}; another pod of "
                                     "that name exists") from exc

    def wait_running(self, ref: PodRef, node: str) -> str | None:
        """None once the pod runs on `node` and still does `confirm_seconds` later."""
        deadline = self.clock() + self.settings.start_timeout_seconds
        confirmed_at: float | None = None
        while True:
            pod = self.get_pod(ref.namespace, ref.name)
            if pod is None:
                return "disappeared"
            problem = pods.failure(pod)
            if problem is not None:
                return problem
            if pods.is_running(pod, node):
                if confirmed_at is None:
                    confirmed_at = self.clock() + self.settings.confirm_seconds
                if self.clock() >= confirmed_at:
                    return None
            else:
                confirmed_at = None
            if confirmed_at is None and self.clock() >= deadline:
                return (f"was not running within {self.settings.start_timeout_seconds:g} s "
                        f"({pods.phase(pod)})")
            self.sleep(self.settings.poll_seconds)

    # -- Job-owned pods ----------------------------------------------------------------------

    def read_job(self, namespace: str, name: str) -> dict[str, Any]:
        try:
            job: dict[str, Any] = self.caller.call(f"read job {namespace}/{name}",
                                                   self.batch.read_namespaced_job, name,
                                                   namespace)
        except ApiException as exc:
            raise ActuationError(f"job {namespace}/{name}: HTTP {exc.status}") from exc
        return job

    def patch_job(self, namespace: str, name: str, body: Mapping[str, Any], what: str) -> None:
        try:
            self.caller.call(f"{what} job {namespace}/{name}", self.batch.patch_namespaced_job,
                             name, namespace, dict(body), write=True,
                             passthrough=frozenset({NOT_FOUND, 409, 422}))
        except ApiException as exc:
            if status_of(exc) == 422 and what == "pin":
                raise ActuationError(
                    f"job {namespace}/{name}: the API refused to change the node affinity "
                    "of the suspended Job (HTTP 422; needs Kubernetes 1.36 for a Job that "
                    "already ran, MutableSchedulingDirectivesForSuspendedJobs)") from exc
            raise ActuationError(f"{what} job {namespace}/{name}: HTTP {exc.status}") from exc

    def run_job(self, action: Migrate, job_name: str, ref: PodRef) -> dict[str, Any]:
        job = self.read_job(ref.namespace, job_name)
        spec = job.get("spec") or {}
        if self.settings.require_replacement_policy_failed and \
                spec.get("podReplacementPolicy") != "Failed":
            raise ActuationError(f"job {ref.namespace}/{job_name} lacks podReplacementPolicy: "
                                 "Failed (two trainers could run at once); not migrated")
        self.patch_job(ref.namespace, job_name, {
            "metadata": {"labels": {names.MIGRATING: "true"},
                         "annotations": {names.MIGRATING_TO: action.to_node}},
            "spec": {"suspend": True}}, "suspend")
        self.wait_job_idle(job, grace_seconds=self.settings.grace_seconds)
        marks = pods.marker_annotations(now=self.clock(), migrated=True,
                                        rebalanced=action.rebalance,
                                        converged_at=action.converged_at,
                                        from_node=action.from_node)
        try:
            self.pin(job, action.to_node, marks)
        except ActuationError:
            self.resume(ref.namespace, job_name)
            raise
        self.resume(ref.namespace, job_name)
        self.wait_job_running(job, action.to_node)
        return job

    def pin(self, job: Mapping[str, Any], node: str, marks: Mapping[str, str]) -> None:
        meta = job.get("metadata") or {}
        template = (job.get("spec") or {}).get("template") or {}
        affinity = pods.pin_affinity((template.get("spec") or {}).get("affinity"), node)
        self.patch_job(meta["namespace"], meta["name"], {"spec": {"template": {
            "metadata": {"annotations": dict(marks)},
            "spec": {"affinity": affinity}}}}, "pin")

    def resume(self, namespace: str, name: str) -> None:
        self.patch_job(namespace, name, {
            "metadata": {"labels": {names.MIGRATING: None},
                         "annotations": {names.MIGRATING_TO: None}},
            "spec": {"suspend": False}}, "resume")

    def wait_job_idle(self, job: Mapping[str, Any], *, grace_seconds: float) -> None:
        deadline = self.clock() + grace_seconds + self.settings.delete_timeout_seconds
        meta = job.get("metadata") or {}
        while True:
            live = [p for p in self.job_pods(job) if pods.phase(p) in ("Pending", "Running")]
            if not live:
                return
            if self.clock() >= deadline:
                self.resume(meta["namespace"], meta["name"])
                raise ActuationError(f"job {meta['namespace']}/{meta['name']}: its pod did not "
                                     "stop after suspension; resumed unchanged")
            self.sleep(self.settings.poll_seconds)

    def wait_job_running(self, job: Mapping[str, Any], node: str) -> None:
        deadline = self.clock() + self.settings.start_timeout_seconds
        meta = job.get("metadata") or {}
        while True:
            listed = self.job_pods(job)
            if any(pods.is_running(p, node) for p in listed):
                return
            problems = [f for f in map(pods.failure, listed) if f]
            if self.clock() >= deadline or any("unschedulable" in p for p in problems):
                why = problems[0] if problems else "no pod running"
                raise ActuationError(f"job {meta['namespace']}/{meta['name']} resumed, but no "
                                     f"pod of it runs on node {node} ({why}); the Job "
                                     "controller keeps trying")
            self.sleep(self.settings.poll_seconds)
