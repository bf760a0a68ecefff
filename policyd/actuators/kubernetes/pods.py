"""Pods as plain JSON: naming, ownership, markers, and the replacement of a migrated pod. Pure.

A snapshot names a pod's training container `namespace/pod/container` (the identity of the
`kubernetes` source profile and of `policyd.sources.kubernetes_pod_facts`); `PodRef.parse` reads it
back. Markers are annotations, values as the sources read them: "true", epoch seconds.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policyd.actuators.errors import ActuationError
from policyd.actuators.opt_out import OptOutKeys
from policyd.model import labels as names

SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
                 "deletionGracePeriodSeconds", "managedFields", "generation", "selfLink")
TOKEN_VOLUME_PREFIX = "kube-api-access-"
"""The projected service-account token volume the admission plugin adds (added again)."""


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str
    container: str | None

    @classmethod
    def parse(cls, container_id: str, default_container: str | None) -> PodRef:
        parts = container_id.split("/")
        if len(parts) == 3 and all(parts):
            return cls(parts[0], parts[1], parts[2])
        if len(parts) == 2 and all(parts):
            return cls(parts[0], parts[1], default_container)
        raise ActuationError(f"container id {container_id!r} is not namespace/pod[/container]")

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def epoch(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")


def marker_annotations(*, now: float, migrated: bool = False, rebalanced: bool = False,
                       converged_at: float | None = None, from_node: str | None = None
                       ) -> dict[str, str]:
    """The annotations recording an action's markers (absent ones are left unchanged)."""
    out = {names.LAST_ACTION_AT: epoch(now)}
    if migrated:
        out[names.MIGRATED] = "true"
    if rebalanced:
        out[names.REBALANCED] = "true"
    if converged_at is not None:
        out[names.CONVERGED_AT] = epoch(converged_at)
    if from_node is not None:
        out[names.MIGRATED_FROM] = from_node
    return out


def selector_matches(labels: Mapping[str, str], selector: str) -> bool:
    """Equality-based label selectors (`a=b,c!=d,e`), as policyd's settings use them."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.split("==", 1) if "==" in term else term.split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


def check_managed(pod: Mapping[str, Any], selector: str, opt_out: OptOutKeys) -> None:
    """The pod matches policyd's label selector and is not opted out (a label or annotation
    of one of `opt_out`'s keys is "true")."""
    meta = pod.get("metadata") or {}
    where = f"pod {meta.get('namespace')}/{meta.get('name')}"
    if not selector_matches(meta.get("labels") or {}, selector):
        raise ActuationError(f"{where} does not match {selector!r}; not policyd's to touch")
    key = opt_out.which(meta.get("labels"), meta.get("annotations"))
    if key is not None:
        raise ActuationError(f"{where} is opted out ({key}=true); left alone")


def controller_of(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """(kind, name) of the controlling owner, None for a bare pod."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("kind")), str(ref.get("name"))
    return None


def pin_affinity(affinity: Mapping[str, Any] | None, node: str) -> dict[str, Any]:
    """`affinity` with its required node affinity replaced by "the node named `node`"
    (`matchFields metadata.name`, as DaemonSets pin pods; the scheduler still checks room,
    unlike `nodeName`). Preferred terms and pod (anti-)affinity are kept."""
    out = copy.deepcopy(dict(affinity or {}))
    node_affinity = dict(out.get("nodeAffinity") or {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    out["nodeAffinity"] = node_affinity
    return out


def pinned_node(affinity: Mapping[str, Any] | None) -> str | None:
    """The node `pin_affinity` pinned to, when the required node affinity is exactly that
    (one term, `metadata.name In [node]`); None otherwise."""
    required = (((affinity or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    if len(terms) != 1 or terms[0].get("matchExpressions"):
        return None
    fields = terms[0].get("matchFields") or []
    if len(fields) != 1:
        return None
    only = fields[0]
    values = only.get("values") or []
    if only.get("key") != "metadata.name" or only.get("operator") != "In" or len(values) != 1:
        return None
    return str(values[0])


def selector_fits(node_selector: Mapping[str, str] | None, node: Mapping[str, Any]) -> bool:
    """Whether `node` carries every label of a pod's `nodeSelector` (which a node-affinity pin
    does not replace: the scheduler applies both)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    return all(labels.get(key) == value for key, value in (node_selector or {}).items())


def replacement(pod: Mapping[str, Any], *, to_node: str, markers: Mapping[str, str]
                ) -> dict[str, Any]:
    """The pod to create on `to_node` in place of `pod`: same name, labels, spec (the
    checkpoint volume included), annotations plus `markers`; no status, no server fields, no
    `nodeName`, the injected token volume removed (the admission plugin adds it again)."""
    meta = copy.deepcopy(dict(pod.get("metadata") or {}))
    for key in SERVER_FIELDS:
        meta.pop(key, None)
    meta["annotations"] = {**(meta.get("annotations") or {}), **markers}
    spec = copy.deepcopy(dict(pod.get("spec") or {}))
    spec.pop("nodeName", None)
    volumes = [v for v in spec.get("volumes") or []
               if not str(v.get("name", "")).startswith(TOKEN_VOLUME_PREFIX)]
    spec["volumes"] = volumes
    for group in ("containers", "initContainers"):
        for c in spec.get(group) or []:
            c["volumeMounts"] = [m for m in c.get("volumeMounts") or []
                                 if not str(m.get("name", "")).startswith(TOKEN_VOLUME_PREFIX)]
    spec["affinity"] = pin_affinity(spec.get("affinity"), to_node)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Unknown")


def is_running(pod: Mapping[str, Any], node: str | None = None) -> bool:
    """Running, not being deleted, every container running, and on `node` when given."""
    status = pod.get("status") or {}
    if phase(pod) != "Running" or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    if node is not None and (pod.get("spec") or {}).get("nodeName") != node:
        return False
    statuses = status.get("containerStatuses") or []
    return bool(statuses) and all("running" in (s.get("state") or {}) for s in statuses)


def delivered(pod: Mapping[str, Any]) -> bool:
    """Whether policyd has stopped the pod's job for good (its delivery mark, `stop`)."""
    return names.DELIVERED in ((pod.get("metadata") or {}).get("annotations") or {})


def failure(pod: Mapping[str, Any]) -> str | None:
    """Why a new pod will not run (failed, unschedulable, a container crash-looping)."""
    status = pod.get("status") or {}
    if phase(pod) == "Failed":
        return f"failed ({status.get('reason') or 'no reason'})"
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "Unschedulable":
            return f"unschedulable: {cond.get('message') or ''}".rstrip(": ")
    for s in status.get("containerStatuses") or []:
        waiting = (s.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") in ("CrashLoopBackOff", "ErrImagePull", "ImagePullBackOff",
                                     "CreateContainerConfigError"):
            return f"container {s.get('name')} {waiting['reason']}"
    return None
