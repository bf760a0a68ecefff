"""A pod's QoS class, as Kubernetes computes it from the pod spec. Pure.

The API server refuses a resize that would change the class (422 "Pod QOS Class may not
change as a result of resizing"), so `cpu` computes the class a resize would leave and keeps
it. The rule (Kubernetes' `GetPodQOS`, over every container and init container):

* BestEffort: no container has any CPU or memory request or limit;
* Guaranteed: every container has CPU and memory limits, and requests equal to them (a request
  left out is defaulted to its limit by the API server, so a spec read back has both);
* Burstable: anything else.

So a Burstable pod whose memory request already equals its memory limit becomes Guaranteed
the moment its CPU request reaches its CPU limit: the case FlowCon's shares mode meets when it
gives a job the whole node. Pod-level `spec.resources` (alpha in 1.32) is not read.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any, Literal

from policyd.clients import kubernetes_quantity

QosClass = Literal["BestEffort", "Burstable", "Guaranteed"]
RESOURCES = ("cpu", "memory")


def _amount(resource: str, quantity: Any) -> Decimal:
    if resource == "cpu":  # the API compares CPU in whole millicores
        return Decimal(kubernetes_quantity.millicores(quantity))
    return kubernetes_quantity.parse_quantity(quantity)


def qos_class(spec: Mapping[str, Any]) -> QosClass:
    """The QoS class of a pod spec (see the module docstring)."""
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    anything = False
    guaranteed = True
    for container in containers:
        res = container.get("resources") or {}
        requests, limits = res.get("requests") or {}, res.get("limits") or {}
        anything = anything or any(r in requests or r in limits for r in RESOURCES)
        for resource in RESOURCES:
            if resource not in limits:
                guaranteed = False
                continue
            asked = requests.get(resource, limits[resource])
            if _amount(resource, asked) != _amount(resource, limits[resource]):
                guaranteed = False
    if not anything:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
