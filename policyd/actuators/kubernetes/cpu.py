"""SetCpu as an in-place resize of the pod (`pods/resize`), and reading its progress. Pure.

* shares (soft, work-conserving): the container's CPU *request* = fraction x the node's
  allocatable cores (the kubelet turns requests into cgroup weights: what FlowCon's soft limit
  means). A request above the container's limit is lowered to the limit.
* quota (hard cap, CFS): the CPU *limit* = fraction x allocatable cores; fraction 1.0 gives the
  whole node (a limit cannot be removed in place). A request above the new limit comes down
  with it; a Guaranteed pod has request and limit moved together so it stays Guaranteed.
* the QoS class cannot change through a resize (the API server answers 422): a BestEffort pod
  cannot be given a request, a Guaranteed pod cannot have its request alone changed (both raise
  ActuationError with the fix), and a Burstable pod must not become Guaranteed: when the new
  CPU request would reach the CPU limit while every other request already equals its limit
  (`qos`), the request stops 1m below the limit. Values are whole millicores, at least 1m.

The patch carries the pod's `resourceVersion`, so a pod changed since it was read gives 409
Conflict (the caller re-reads and retries once) rather than a resize computed from stale data.
`unchanged` says when the spec already asks for what the resize would: then nothing is sent.

Progress (the PATCH is answered at once, with the pod's new `metadata.generation` and its old
status): only what the kubelet wrote for that generation counts. `status.observedGeneration`
below it means the kubelet has not looked yet; a condition whose own `observedGeneration` is
older is a leftover of an earlier resize and is ignored (a server without pod generations,
before 1.34, reports none: then every condition counts). The conditions are
`PodResizePending` (reason `Deferred`: the node lacks room now, the kubelet retries and may
still apply it; `Infeasible`: it never will) and `PodResizeInProgress` (reason `Error` when
the kubelet failed); done = neither condition and `containerStatuses[].resources` equal to
what was asked (`status.resize` is deprecated and not read).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from policyd.actuators.errors import ActuationError
from policyd.actuators.kubernetes.qos import qos_class
from policyd.clients import kubernetes_quantity

Desired = dict[str, int]
"""{"requests": millicores, "limits": millicores}, only the ones the resize changes."""


def millicores(quantity: Any) -> int | None:
    """A Kubernetes CPU quantity ("250m", "2", "1.5", 2) as whole millicores, rounded up; None
    when absent."""
    if quantity is None or quantity == "":
        return None
    try:
        return kubernetes_quantity.millicores(quantity)
    except ValueError as exc:
        raise ActuationError(f"CPU quantity {quantity!r} cannot be read") from exc


def container_of(pod: Mapping[str, Any], name: str | None, *, status: bool = False
                 ) -> Mapping[str, Any]:
    """The named container (None: the first) of the spec, or of the status."""
    items = ((pod.get("status") or {}).get("containerStatuses") if status
             else (pod.get("spec") or {}).get("containers")) or []
    for c in items:
        if name is None or c.get("name") == name:
            return dict(c)
    meta = pod.get("metadata") or {}
    raise ActuationError(f"pod {meta.get('namespace')}/{meta.get('name')} has no "
                         f"{'status of ' if status else ''}container {name or '(first)'}")


def cpu_of(container: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(request, limit) millicores of a spec container or a status container's `resources`."""
    res = container.get("resources") or {}
    return (millicores((res.get("requests") or {}).get("cpu")),
            millicores((res.get("limits") or {}).get("cpu")))


def desired_cpu(pod: Mapping[str, Any], container: str | None, fraction: float,
                mode: Literal["shares", "quota"], allocatable_millicores: int) -> Desired:
    """What the container's CPU request / limit must become (module docstring)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    spec = container_of(pod, container)
    request, limit = cpu_of(spec)
    qos = (pod.get("status") or {}).get("qosClass") or qos_class(pod.get("spec") or {})
    target = max(1, round(fraction * allocatable_millicores))
    where = f"pod {(pod.get('metadata') or {}).get('name')}"
    if qos == "BestEffort" or (request is None and limit is None):
        raise ActuationError(f"{where} is BestEffort (no CPU request or limit); a resize cannot "
                             "change its QoS class: give the container a CPU request")
    if mode == "shares":
        if qos == "Guaranteed":
            raise ActuationError(f"{where} is Guaranteed; changing its CPU request alone would "
                                 "change its QoS class: use mode quota for it")
        out: Desired = {"requests": min(target, limit) if limit is not None else target}
    else:
        out = {"limits": target}
        if qos == "Guaranteed" or (request is not None and request > target):
            out["requests"] = target
    return _keep_qos(pod, container, out, qos, where)


def _keep_qos(pod: Mapping[str, Any], container: str | None, out: Desired, qos: str,
              where: str) -> Desired:
    """`out`, with the request 1m below the limit when it would make a Burstable pod
    Guaranteed (the API refuses any change of QoS class)."""
    after = {"spec": with_cpu(pod, container, out)}
    if qos_class(after["spec"]) == qos:
        return out
    _, limit = cpu_of(container_of(after, container))
    if limit is None or limit < 2:
        raise ActuationError(f"{where}: CPU {_shown(out)} would change its QoS class from "
                             f"{qos}; not resized")
    return {**out, "requests": limit - 1}


def with_cpu(pod: Mapping[str, Any], container: str | None, desired: Desired
             ) -> dict[str, Any]:
    """The pod spec as it would be after the resize (a copy)."""
    spec = copy.deepcopy(dict(pod.get("spec") or {}))
    name = container_of(pod, container).get("name")
    for c in spec.get("containers") or []:
        if c.get("name") == name:
            res = c.setdefault("resources", {})
            for kind, value in desired.items():
                res.setdefault(kind, {})["cpu"] = f"{value}m"
    return spec


def unchanged(pod: Mapping[str, Any], container: str | None, desired: Desired) -> bool:
    """Whether the pod's spec already asks for `desired` (nothing to send)."""
    request, limit = cpu_of(container_of(pod, container))
    have = {"requests": request, "limits": limit}
    return all(have[kind] == value for kind, value in desired.items())


def _shown(desired: Desired) -> str:
    return ", ".join(f"{k} {v}m" for k, v in desired.items())


def resize_body(pod: Mapping[str, Any], container: str | None, desired: Desired
                ) -> dict[str, Any]:
    """The strategic-merge patch of `pods/resize` (containers merge by name)."""
    name = container_of(pod, container).get("name")
    resources = {kind: {"cpu": f"{value}m"} for kind, value in desired.items()}
    return {"metadata": {"resourceVersion": (pod.get("metadata") or {}).get("resourceVersion")},
            "spec": {"containers": [{"name": name, "resources": resources}]}}


@dataclass(frozen=True, kw_only=True)
class Progress:
    """Where a resize stands: done, waiting (in progress / not yet reported), or failed."""

    state: Literal["done", "waiting", "deferred", "infeasible", "error"]
    detail: str = ""


def progress(pod: Mapping[str, Any], container: str | None, desired: Desired,
             generation: int | None = None) -> Progress:
    """Read the resize's progress for the pod's spec `generation` (None: the pod's own) from
    its conditions and container status (module docstring)."""
    status = pod.get("status") or {}
    if generation is None:
        generation = _int((pod.get("metadata") or {}).get("generation"))
    observed = _int(status.get("observedGeneration"))
    if generation is not None and observed is not None and observed < generation:
        return Progress(state="waiting", detail=f"the kubelet has not seen generation "
                                                f"{generation} yet (observed {observed})")

    def current(cond: Mapping[str, Any]) -> bool:
        seen = _int(cond.get("observedGeneration"))
        if seen is None:  # a server that tracks no generations, or a condition without one
            return generation is None or observed is None
        return generation is None or seen >= generation

    conditions = {c.get("type"): c for c in status.get("conditions") or [] if current(c)}
    pending = conditions.get("PodResizePending")
    if pending is not None and str(pending.get("status", "True")) == "True":
        reason = str(pending.get("reason") or "")
        detail = f"{reason}: {pending.get('message') or 'no message'}"
        if reason == "Infeasible":
            return Progress(state="infeasible", detail=detail)
        return Progress(state="deferred", detail=detail)
    running = conditions.get("PodResizeInProgress")
    if running is not None and str(running.get("status", "True")) == "True":
        if running.get("reason") == "Error":
            return Progress(state="error", detail=str(running.get("message") or "Error"))
        return Progress(state="waiting", detail="PodResizeInProgress")
    try:
        applied = container_of(pod, container, status=True)
    except ActuationError:
        return Progress(state="waiting", detail="no container status yet")
    request, limit = cpu_of(applied)
    have = {"requests": request, "limits": limit}
    if all(have[kind] == value for kind, value in desired.items()):
        return Progress(state="done")
    shown = ", ".join(f"{k} {have[k]}m" for k in desired)
    return Progress(state="waiting", detail=f"container status still shows {shown}")


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | str) and str(value).isdigit() else None
