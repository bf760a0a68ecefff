"""Admit on Kubernetes: a held Job (created with `suspend: true` and policyd's label) pinned
to the node a policy chose, then unsuspended, as Kueue admits Jobs. The Job controller then
creates its pod and the scheduler binds it there (required node affinity: the scheduler still
checks room, unlike `nodeName`).

Steps, each one idempotent so that a retry after any failure finishes the admission:

1. read the Job named by the action (`namespace/name`); it must match the label selector and
   not be opted out, and must not be in the middle of a move (`policyd.io/migrating`);
2. a Job that is no longer suspended was admitted already: nothing to do (and no Event) when
   its template is pinned to `node`, an error otherwise (it runs where its own spec put it);
3. one patch of the pod template (allowed on a suspended Job that never ran: the mutable
   scheduling directives of Kubernetes 1.27+): the required node affinity, and annotations
   `policyd.io/submitted-at` (the Job's creation: a deadline given as a duration counts from
   it), `policyd.io/last_action_at`, and the Job's own deadline declarations (deadline, min-cpu,
   max-cpu) where the template lacks them, so that its pod carries them;
4. one patch: `spec.suspend: false`.

The action's CPU limit is not applied here: a pod's resources come from its Job's template,
which the API does not let anyone change on a Job; the policy resizes the running pod in place
on its next cycle. Raises `ActuationError` with a one-line reason for every failure.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubernetes.client.exceptions import ApiException  # type: ignore[import-untyped]

from policyd.actuators.errors import ActuationError
from policyd.actuators.kubernetes import pods
from policyd.actuators.kubernetes.calls import NOT_FOUND, Caller, status_of
from policyd.actuators.opt_out import OptOutKeys
from policyd.model import Admit
from policyd.model import labels as names

DECLARATIONS = (names.DEADLINE, names.MIN_CPU, names.MAX_CPU)
"""What a Job declares on itself that its pod must carry for the Deadline kind to read."""


def creation_seconds(meta: Mapping[str, Any]) -> float | None:
    """`metadata.creationTimestamp` (RFC 3339, seconds) in epoch seconds; None when absent."""
    text = str(meta.get("creationTimestamp") or "")
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def pinned_to(job: Mapping[str, Any]) -> str | None:
    """The node the Job's template is pinned to by `pods.pin_affinity`, if it is."""
    spec = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    for term in required.get("nodeSelectorTerms") or []:
        for field in term.get("matchFields") or []:
            values = field.get("values") or []
            if field.get("key") == "metadata.name" and field.get("operator") == "In" \
                    and len(values) == 1:
                return str(values[0])
    return None


def template_patch(job: Mapping[str, Any], node: str, now: float) -> dict[str, Any]:
    """The patch of step 3 (pure)."""
    meta = job.get("metadata") or {}
    template = (job.get("spec") or {}).get("template") or {}
    has = (template.get("metadata") or {}).get("annotations") or {}
    own = meta.get("annotations") or {}
    marks = pods.marker_annotations(now=now)
    submitted = creation_seconds(meta)
    if submitted is not None and names.SUBMITTED_AT not in has:
        marks[names.SUBMITTED_AT] = own.get(names.SUBMITTED_AT) or pods.epoch(submitted)
    for key in DECLARATIONS:
        value = own.get(key, (meta.get("labels") or {}).get(key))
        if value is not None and key not in has:
            marks[key] = str(value)
    affinity = pods.pin_affinity((template.get("spec") or {}).get("affinity"), node)
    return {"spec": {"template": {"metadata": {"annotations": marks},
                                  "spec": {"affinity": affinity}}}}


@dataclass
class JobAdmission:
    """Admit actions on Jobs through `batch` (a BatchV1Api) and `caller`."""

    batch: Any
    caller: Caller
    label_selector: str
    clock: Callable[[], float] = time.time
    opt_out: OptOutKeys = dataclasses.field(default_factory=OptOutKeys)

    def run(self, action: Admit) -> dict[str, Any] | None:
        """Admit the Job; the Job as read before the patches, None when an earlier attempt
        admitted it already (nothing changed)."""
        namespace, _, name = action.container.partition("/")
        if not namespace or not name or "/" in name:
            raise ActuationError(f"cannot admit {action.container!r}: a held Kubernetes job "
                                 "is named namespace/name")
        where = f"job {namespace}/{name}"
        job = self.read(namespace, name, where)
        meta = job.get("metadata") or {}
        job_labels = meta.get("labels") or {}
        if not pods.selector_matches(job_labels, self.label_selector):
            raise ActuationError(f"{where} does not match {self.label_selector!r}; not "
                                 "policyd's to admit")
        key = self.opt_out.which(job_labels, meta.get("annotations"))
        if key is not None:
            raise ActuationError(f"{where} is opted out ({key}=true); left alone")
        if job_labels.get(names.MIGRATING):
            raise ActuationError(f"{where} is suspended by a move in progress, not held")
        if not (job.get("spec") or {}).get("suspend"):
            if pinned_to(job) == action.node:
                return None  # admitted by an earlier attempt
            raise ActuationError(f"{where} is not suspended: it runs already, not held")
        self.patch(namespace, name, template_patch(job, action.node, self.clock()),
                   f"pin {where} to node {action.node}")
        self.patch(namespace, name, {"spec": {"suspend": False}}, f"unsuspend {where}")
        return job

    def read(self, namespace: str, name: str, where: str) -> dict[str, Any]:
        try:
            job: dict[str, Any] = self.caller.call(f"read {where}",
                                                   self.batch.read_namespaced_job, name,
                                                   namespace)
        except ApiException as exc:
            gone = " (gone)" if status_of(exc) == NOT_FOUND else ""
            raise ActuationError(f"read {where}: HTTP {exc.status}{gone}") from exc
        return job

    def patch(self, namespace: str, name: str, body: Mapping[str, Any], what: str) -> None:
        try:
            self.caller.call(what, self.batch.patch_namespaced_job, name, namespace, dict(body),
                             write=True, passthrough=frozenset({NOT_FOUND, 409, 422}))
        except ApiException as exc:
            detail = (" (the API refuses to change a Job's pod template unless the Job is "
                      "suspended and never ran)" if status_of(exc) == 422 else "")
            raise ActuationError(f"{what}: HTTP {exc.status}{detail}") from exc
