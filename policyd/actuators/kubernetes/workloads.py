"""The API calls a migration is made of, on pods and Jobs: read, create, remove, wait, patch.

Each one does one thing through `calls.Caller` and turns the API's refusals into
`ActuationError`s that say what happened; waits poll every `poll_seconds` on the injected
clock. `migration` (a live move) and `mover` (the recovery table's steps) are built on them.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException  # type: ignore[import-untyped]

from policyd.actuators.errors import ActuationError
from policyd.actuators.kubernetes import pods
from policyd.actuators.kubernetes.calls import CONFLICT, NOT_FOUND, TOO_MANY, Caller, status_of
from policyd.actuators.kubernetes.pods import PodRef
from policyd.actuators.kubernetes.settings import KubernetesSettings
from policyd.model import labels as names

EVICTION_REFUSALS = frozenset({NOT_FOUND, CONFLICT, TOO_MANY, 500})
LIVE = ("Pending", "Running")


@dataclass
class Workloads:
    """Pods (`core`, a CoreV1Api) and Jobs (`batch`, a BatchV1Api) as a migration uses them."""

    core: Any
    batch: Any
    caller: Caller
    settings: KubernetesSettings
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep

    # -- pods --------------------------------------------------------------------------------

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            pod: dict[str, Any] = self.caller.call(f"read pod {namespace}/{name}",
                                                   self.core.read_namespaced_pod, name, namespace)
        except ApiException as exc:
            if status_of(exc) == NOT_FOUND:
                return None
            raise ActuationError(f"read pod {namespace}/{name}: HTTP {exc.status}") from exc
        return pod

    def read_node(self, name: str) -> dict[str, Any]:
        try:
            node: dict[str, Any] = self.caller.call(f"read node {name}", self.core.read_node,
                                                    name)
        except ApiException as exc:
            raise ActuationError(f"node {name}: HTTP {exc.status}") from exc
        return node

    def remove(self, ref: PodRef, uid: str, grace_seconds: float, *, evict: bool) -> None:
        """Evict (PodDisruptionBudgets honoured) or delete the pod, with the grace period and
        a uid precondition (so a pod recreated meanwhile is never hit)."""
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
            if status == CONFLICT:
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
                                     "removal was asked (a finalizer?)")
            self.sleep(self.settings.poll_seconds)

    def create(self, ref: PodRef, manifest: Mapping[str, Any]) -> None:
        """Create the pod; one of that name created by the same move (annotation
        `policyd.io/move`) already there counts as created."""
        try:
            self.caller.call(f"create pod {ref}", self.core.create_namespaced_pod,
                             ref.namespace, dict(manifest), write=True)
        except ApiException as exc:
            found = self.get_pod(ref.namespace, ref.name)
            mine = ((manifest.get("metadata") or {}).get("annotations") or {}).get(names.MOVE)
            theirs = (((found or {}).get("metadata") or {}).get("annotations") or {}).get(
                names.MOVE)
            if found is None or mine is None or mine != theirs:
                raise ActuationError(f"create pod {ref}: HTTP {exc.status}; another pod of "
                                     "that name exists") from exc

    def wait_running(self, ref: PodRef, node: str) -> tuple[dict[str, Any] | None, str | None]:
        """(the pod, None) once it runs on `node` and still does `confirm_seconds` later;
        (the pod as last seen, why not) otherwise."""
        deadline = self.clock() + self.settings.start_timeout_seconds
        confirmed_at: float | None = None
        while True:
            pod = self.get_pod(ref.namespace, ref.name)
            if pod is None:
                return None, "disappeared"
            problem = pods.failure(pod)
            if problem is not None:
                return pod, problem
            if pods.is_running(pod, node):
                if confirmed_at is None:
                    confirmed_at = self.clock() + self.settings.confirm_seconds
                if self.clock() >= confirmed_at:
                    return pod, None
            else:
                confirmed_at = None
            if confirmed_at is None and self.clock() >= deadline:
                return pod, (f"was not running within {self.settings.start_timeout_seconds:g} "
                             f"s ({pods.phase(pod)})")
            self.sleep(self.settings.poll_seconds)

    # -- Jobs --------------------------------------------------------------------------------

    def read_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            job: dict[str, Any] = self.caller.call(f"read job {namespace}/{name}",
                                                   self.batch.read_namespaced_job, name,
                                                   namespace)
        except ApiException as exc:
            if status_of(exc) == NOT_FOUND:
                return None
            raise ActuationError(f"job {namespace}/{name}: HTTP {exc.status}") from exc
        return job

    def patch_job(self, namespace: str, name: str, body: Mapping[str, Any], what: str) -> None:
        try:
            self.caller.call(f"{what} job {namespace}/{name}", self.batch.patch_namespaced_job,
                             name, namespace, dict(body), write=True,
                             passthrough=frozenset({NOT_FOUND, CONFLICT, 422}))
        except ApiException as exc:
            if status_of(exc) == 422 and what.startswith("pin"):
                raise ActuationError(
                    f"job {namespace}/{name}: the API refused to change the node affinity "
                    "of the suspended Job (HTTP 422; needs Kubernetes 1.36 for a Job that "
                    "already ran, MutableSchedulingDirectivesForSuspendedJobs)") from exc
            raise ActuationError(f"{what} job {namespace}/{name}: HTTP {exc.status}") from exc

    def suspend(self, namespace: str, name: str, to_node: str) -> None:
        """Suspend the Job, labelled `policyd.io/migrating=true` and annotated with the target
        while it moves (for `kubectl get jobs -l policyd.io/migrating=true`)."""
        self.patch_job(namespace, name, {
            "metadata": {"labels": {names.MIGRATING: "true"},
                         "annotations": {names.MIGRATING_TO: to_node}},
            "spec": {"suspend": True}}, "suspend")

    def pin(self, job: Mapping[str, Any], node: str, marks: Mapping[str, str], what: str
            ) -> None:
        meta = job.get("metadata") or {}
        template = (job.get("spec") or {}).get("template") or {}
        affinity = pods.pin_affinity((template.get("spec") or {}).get("affinity"), node)
        body: dict[str, Any] = {"spec": {"affinity": affinity}}
        if marks:
            body["metadata"] = {"annotations": dict(marks)}
        self.patch_job(meta["namespace"], meta["name"], {"spec": {"template": body}}, what)

    def resume(self, namespace: str, name: str) -> None:
        self.patch_job(namespace, name, {
            "metadata": {"labels": {names.MIGRATING: None},
                         "annotations": {names.MIGRATING_TO: None}},
            "spec": {"suspend": False}}, "resume")

    def job_pods(self, job: Mapping[str, Any]) -> list[dict[str, Any]]:
        meta = job.get("metadata") or {}
        match = ((job.get("spec") or {}).get("selector") or {}).get("matchLabels") or {
            "batch.kubernetes.io/controller-uid": meta.get("uid")}
        selector = ",".join(f"{k}={v}" for k, v in sorted(match.items()))
        listed = self.caller.call(f"list pods of job {meta.get('name')}",
                                  self.core.list_namespaced_pod, meta.get("namespace"),
                                  label_selector=selector, passthrough=frozenset())
        return list(listed.get("items") or [])

    def stop_pods(self, job: Mapping[str, Any], grace_seconds: float) -> None:
        """Stop the suspended Job's pods with the move's grace period (the controller deletes
        them with their own `terminationGracePeriodSeconds`; a second delete can only shorten
        it) and wait until none is Pending or Running."""
        meta = job.get("metadata") or {}
        where = f"job {meta.get('namespace')}/{meta.get('name')}"
        deadline = self.clock() + grace_seconds + self.settings.delete_timeout_seconds
        stopping: set[str] = set()
        while True:
            live = [p for p in self.job_pods(job) if pods.phase(p) in LIVE]
            if not live:
                return
            for pod in live:
                pmeta = pod.get("metadata") or {}
                uid = str(pmeta.get("uid") or "")
                if uid in stopping:
                    continue
                stopping.add(uid)
                with contextlib.suppress(ActuationError):  # gone or replaced: listed again
                    self.remove(PodRef(str(pmeta.get("namespace")), str(pmeta.get("name")), None),
                                uid, grace_seconds, evict=False)
            if self.clock() >= deadline:
                raise ActuationError(f"{where}: its pod did not stop within "
                                     f"{grace_seconds + self.settings.delete_timeout_seconds:g} "
                                     "s of the suspension")
            self.sleep(self.settings.poll_seconds)

    def wait_job_running(self, job: Mapping[str, Any], node: str) -> str | None:
        """None once a pod of the Job runs on `node`; why not otherwise."""
        deadline = self.clock() + self.settings.start_timeout_seconds
        while True:
            listed = self.job_pods(job)
            if any(pods.is_running(p, node) for p in listed):
                return None
            problems = [f for p in listed if pods.phase(p) in LIVE
                        and (f := pods.failure(p)) is not None]
            if problems:
                return problems[0]
            if self.clock() >= deadline:
                return (f"no pod of it ran on node {node} within "
                        f"{self.settings.start_timeout_seconds:g} s")
            self.sleep(self.settings.poll_seconds)
