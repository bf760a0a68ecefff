"""How policies appear on the Kubernetes API: one custom resource kind per policy kind.

A policy file is already a Kubernetes object (`apiVersion: policyd.io/v1alpha1`, `kind`,
`metadata.name`, `spec`), so each registered kind (`policyd.engine.registry.KINDS`) is a
cluster-scoped custom resource of group `policyd.io`, version `v1alpha1`, plural its name in
lower case plus "s" (`flowcons`, `specons`): `kubectl apply -f policies/flowcon.yaml` creates
one, `kubectl get flowcons` lists them. Cluster-scoped because a policy selects pods in any
namespace (`spec.selector.namespaces`) and names are unique across all policies, as they are
across policy files.

The names are here, below both the CRD generator (`policyd.policy.crd`), the RBAC table
(`policyd.actuators.kubernetes.rbac`) and the daemon's watch (`policyd.daemon.policy_resources`)
so that the three cannot disagree. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from policyd.engine.registry import KINDS
from policyd.engine.spec import API_VERSION

GROUP, VERSION = API_VERSION.split("/")
CATEGORY = "policyd"
"""`kubectl get policyd` lists every policy, of every kind."""


@dataclass(frozen=True, kw_only=True)
class Resource:
    """The custom resource of one policy kind."""

    kind: str

    @property
    def plural(self) -> str:
        return f"{self.kind.lower()}s"

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{GROUP}"


def resources() -> tuple[Resource, ...]:
    """Every registered kind's resource, in registration order."""
    return tuple(Resource(kind=name) for name in KINDS)


def resource(kind: str) -> Resource:
    """The resource of the registered kind `kind` (KeyError for an unknown kind)."""
    if kind not in KINDS:
        raise KeyError(kind)
    return Resource(kind=kind)
