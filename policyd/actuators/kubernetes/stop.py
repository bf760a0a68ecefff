"""Stop: a training pod that reached its target or converged, delivered on Kubernetes.

The checkpoint protocol (SIGTERM, the trainer checkpoints and exits within the grace period),
then nothing runs the job again. In this order:

1. the pod must be managed and running; it is annotated `policyd.io/stop=<event>` (the stop
   request a trainer may read through a downward-API volume) and `policyd.io/delivered`,
   `delivered-reason`; a Job-owned pod's Job gets the same delivered annotations (the record
   that survives the pod, and the mark that keeps policyd from moving or resuming it);
2. after `notice_seconds` (time for the kubelet to project the annotation into the pod's
   downward-API file) the pod is deleted with the grace period and a uid precondition;
3. policyd waits until it has terminated and reads the training container's exit code:
   * a bare pod: nothing recreates it; exit 0 is a confirmed checkpoint;
   * a Job-owned pod that exited 0: the Job counts it succeeded and, with one completion, is
     Complete (policyd waits for that condition): it ends as succeeded and is never restarted;
   * a Job-owned pod that exited otherwise: in a Job the trainer exits 143 after a migration's
     checkpoint so that the Job's podFailurePolicy replaces the pod (exporters/README.md); a
     trainer that did not read the stop request exits 143 here too, and the Job would start a
     replacement. So the Job is suspended (no pod runs again; its checkpoint stays on its
     volume) and the failure is raised: the job is delivered, but its Job cannot be marked
     succeeded until the trainer reads `policyd.io/stop` (mount the pod's annotations with
     the downward API; the example trainer's `--annotations-file`).

Where the checkpoint is: the volumes the training container mounts (the checkpoint volume the
Job's pods share), reported in the Event and the error.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException  # type: ignore[import-untyped]

from policyd.actuators.errors import ActuationError
from policyd.actuators.kubernetes import pods
from policyd.actuators.kubernetes.calls import NOT_FOUND, Caller, status_of
from policyd.actuators.kubernetes.pods import PodRef
from policyd.actuators.kubernetes.settings import KubernetesSettings
from policyd.model import Stop
from policyd.model import labels as names

NOTICE_SECONDS = 5.0
"""Between the stop annotation and the SIGTERM: the kubelet refreshes a downward-API volume
when the pod's annotations change (seconds on a healthy node)."""
REASON_BYTES = 900
"""An annotation value is not limited like an Event note (1024 bytes); kept short anyway."""


def checkpoint_volumes(pod: Mapping[str, Any], container: str | None) -> str:
    """The training container's mounts, with what each volume is (a claim, a host path)."""
    spec = pod.get("spec") or {}
    volumes = {str(v.get("name")): v for v in spec.get("volumes") or []}
    containers = spec.get("containers") or []
    chosen = next((c for c in containers if container is None or c.get("name") == container),
                  containers[0] if containers else {})
    shown = []
    for mount in chosen.get("volumeMounts") or []:
        name = str(mount.get("name", ""))
        if name.startswith(pods.TOKEN_VOLUME_PREFIX):
            continue
        volume = volumes.get(name, {})
        source = (f"claim {volume['persistentVolumeClaim'].get('claimName')}"
                  if volume.get("persistentVolumeClaim") else
                  f"host path {volume['hostPath'].get('path')}" if volume.get("hostPath") else
                  "nfs" if volume.get("nfs") else "a volume")
        shown.append(f"{mount.get('mountPath')} ({source} {name})")
    return ", ".join(shown) or "no volume mounted (the checkpoint may be lost)"


@dataclass
class Stopper:
    """Stop actions against the API (see the module docstring)."""

    core: Any
    batch: Any
    caller: Caller
    settings: KubernetesSettings
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    notice_seconds: float = NOTICE_SECONDS

    def run(self, action: Stop, pod: Mapping[str, Any], *,
            grace_seconds: float) -> dict[str, Any]:
        """Deliver the job of `pod` (already read and checked managed); returns the object the
        Event regards (the Job, or the pod)."""
        ref = PodRef.parse(action.container, self.settings.container_name)
        if not pods.is_running(pod):
            raise ActuationError(f"pod {ref} is {pods.phase(pod)}, not running; not stopped")
        marks = {names.STOP_REQUESTED: action.event,
                 names.DELIVERED: pods.epoch(self.clock()),
                 names.DELIVERED_REASON: action.reason.encode()[:REASON_BYTES].decode(
                     errors="ignore")}
        where = checkpoint_volumes(pod, ref.container)
        owner = pods.controller_of(pod)
        job = None
        if owner is not None and owner[0] == "Job":
            job = self._patch_job(ref.namespace, owner[1], {"metadata": {"annotations": {
                **marks, names.CHECKPOINT: where}}})
        elif owner is not None:
            raise ActuationError(f"pod {ref} is owned by {owner[0]} {owner[1]}, whose "
                                 "controller would start it again; not stopped")
        self._call(f"annotate pod {ref}", self.core.patch_namespaced_pod, ref.name,
                   ref.namespace, {"metadata": {"annotations": marks}})
        self.sleep(self.notice_seconds)
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        self._call(f"delete pod {ref}", self.core.delete_namespaced_pod, ref.name, ref.namespace,
                   body={"apiVersion": "v1", "kind": "DeleteOptions",
                         "gracePeriodSeconds": round(grace_seconds),
                         **({"preconditions": {"uid": uid}} if uid else {})})
        code = self._exit_code(ref, grace_seconds + self.settings.delete_timeout_seconds)
        if job is None:
            if code not in (None, 0):
                raise ActuationError(f"pod {ref} exited with code {code} instead of 0 after "
                                     f"SIGTERM: no checkpoint confirmed; checkpoint volumes: "
                                     f"{where}")
            return dict(pod)
        name = owner[1] if owner is not None else ""
        if code == 0 and self._complete(ref.namespace, name):
            return job
        self._patch_job(ref.namespace, name, {"spec": {"suspend": True}})
        raise ActuationError(
            f"pod {ref} of Job {name} exited with code {code} after SIGTERM, not 0: the Job "
            f"would replace it, so it is suspended (delivered, never run again; checkpoint "
            f"volumes: {where}); for the Job to end as succeeded the trainer must exit 0 when "
            f"its pod is annotated {names.STOP_REQUESTED} (downward API)")

    def _call(self, what: str, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return self.caller.call(what, method, *args, write=True, **kwargs)
        except ApiException as exc:
            gone = " (gone)" if status_of(exc) == NOT_FOUND else ""
            raise ActuationError(f"{what}: HTTP {exc.status}{gone}") from exc

    def _patch_job(self, namespace: str, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        found: dict[str, Any] = self._call(f"patch job {namespace}/{name}",
                                           self.batch.patch_namespaced_job, name, namespace,
                                           dict(body))
        return found

    def _exit_code(self, ref: PodRef, timeout_seconds: float) -> int | None:
        """Poll until the pod has terminated or is gone; the training container's exit code
        when it was seen."""
        deadline = self.clock() + timeout_seconds
        code: int | None = None
        while True:
            try:
                pod = self.caller.call(f"read pod {ref}", self.core.read_namespaced_pod,
                                       ref.name, ref.namespace)
            except ApiException as exc:
                if status_of(exc) == NOT_FOUND:
                    return code
                raise ActuationError(f"read pod {ref}: HTTP {exc.status}") from exc
            for s in (pod.get("status") or {}).get("containerStatuses") or []:
                ended = (s.get("state") or {}).get("terminated")
                if ended and (ref.container is None or s.get("name") == ref.container):
                    code = int(ended.get("exitCode", -1))
            if code is not None and pods.phase(pod) in ("Succeeded", "Failed"):
                return code
            if self.clock() >= deadline:
                raise ActuationError(f"pod {ref} has not terminated {timeout_seconds:g} s "
                                     "after its deletion was asked")
            self.sleep(self.settings.poll_seconds)

    def _complete(self, namespace: str, name: str) -> bool:
        """Whether the Job reaches the Complete condition within the delete timeout."""
        deadline = self.clock() + self.settings.delete_timeout_seconds
        while True:
            try:
                job = self.caller.call(f"read job {namespace}/{name}",
                                       self.batch.read_namespaced_job, name, namespace)
            except ApiException as exc:
                raise ActuationError(f"read job {namespace}/{name}: HTTP {exc.status}") from exc
            conditions = (job.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Complete" and c.get("status") == "True"
                   for c in conditions):
                return True
            if self.clock() >= deadline:
                return False
            self.sleep(self.settings.poll_seconds)
