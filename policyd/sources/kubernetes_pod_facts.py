"""The managed pods and the nodes as the Kubernetes API lists them, read into plain values.

Which pods: `PodScope`, a structural Protocol that the actuator's `KubernetesSettings`
satisfies (sources never import actuators): the namespaces (none: all), the label selector,
the training container's name, and on a node agent its node. The list calls are
`list_pod_for_all_namespaces`, or one `list_namespaced_pod` per configured namespace, with the
label selector and, on a node agent, the field selector of its node (`selectors`), so that a
DaemonSet of N agents costs N small lists per cycle rather than N lists of the whole cluster;
the nodes are one `list_node` (only the agent's own node on an agent), read into `NodeFacts`
(`node_facts`: allocatable CPU and labels).

A pod is read into `PodFacts` (`pod_facts`): its training container (`container_name`, else
the pod's first container), node, start time, labels, annotations (the markers
`policyd.io/migrated` etc., written by the actuator), and the CPU request / limit: the CPU the
kubelet has *applied* (`status.containerStatuses[].resources`), not the spec, which holds what
was asked and may be pending, deferred or infeasible; the spec only for a container with no
status yet or a server that reports none (before 1.33). Its id is `namespace/pod/container`
(the `kubernetes` profile's identity). Quantities are read by
`policyd.clients.kubernetes_quantity`; one that cannot be read counts as absent.

Must not: read Prometheus, build the snapshot (`kubernetes_snapshot`), or turn an API failure
into the cycle's error (the source does: `kubernetes_pods`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from policyd.clients import kubernetes_quantity
from policyd.clients.kubernetes_follow import Listing


class PodScope(Protocol):
    """Which pods (the actuator's KubernetesSettings has these fields)."""

    @property
    def namespaces(self) -> tuple[str, ...]: ...
    @property
    def label_selector(self) -> str: ...
    @property
    def container_name(self) -> str | None: ...
    @property
    def node_name(self) -> str | None: ...


def parse_time(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC).timestamp()


def cores(quantity: Any) -> float | None:
    """A CPU quantity ("250m", "2", "1.5", "1e3") in cores; None when absent or unreadable."""
    if quantity in (None, ""):
        return None
    try:
        return kubernetes_quantity.cores(quantity)
    except ValueError:
        return None


@dataclass(frozen=True, kw_only=True)
class PodFacts:
    """One pod's training container as the API describes it."""

    namespace: str
    pod: str
    container: str
    node: str
    uid: str
    running: bool
    started_at: float | None
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    cpu_request: float | None
    cpu_limit: float | None

    @property
    def id(self) -> str:
        return f"{self.namespace}/{self.pod}/{self.container}"


def pod_facts(pod: Mapping[str, Any], container_name: str | None) -> PodFacts | None:
    """A pod (JSON) -> PodFacts; None when it is not scheduled or lacks the container."""
    meta, spec, status = (pod.get("metadata") or {}, pod.get("spec") or {},
                          pod.get("status") or {})
    chosen = next((c for c in spec.get("containers") or []
                   if container_name is None or c.get("name") == container_name), None)
    if chosen is None or not spec.get("nodeName"):
        return None
    name = str(chosen.get("name"))
    seen: Mapping[str, Any] = next((s for s in status.get("containerStatuses") or []
                                    if s.get("name") == name), {})
    state = seen.get("state") or {}
    started = parse_time((state.get("running") or {}).get("startedAt")) or parse_time(
        status.get("startTime"))
    res = seen.get("resources") or chosen.get("resources") or {}  # applied, else asked
    return PodFacts(
        namespace=str(meta.get("namespace", "")), pod=str(meta.get("name", "")),
        container=name, node=str(spec["nodeName"]), uid=str(meta.get("uid", "")),
        running=status.get("phase") == "Running" and "running" in state
        and not meta.get("deletionTimestamp"),
        started_at=started, labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        cpu_request=cores((res.get("requests") or {}).get("cpu")),
        cpu_limit=cores((res.get("limits") or {}).get("cpu")))


def running_facts(pod: Mapping[str, Any], container_name: str | None) -> PodFacts | None:
    """A pod's facts when its training container runs (what a snapshot holds, listed or
    watched); None otherwise."""
    f = pod_facts(pod, container_name)
    return f if f is not None and f.running else None


def selectors(scope: PodScope) -> dict[str, str]:
    """The list/watch selectors of `scope`: its labels, and on a node agent (`node_name`) the
    field selector spec.nodeName, so the API server sends only that node's pods (a DaemonSet
    of N agents then costs N small lists per cycle, not N lists of the whole cluster)."""
    out = {"label_selector": scope.label_selector}
    if scope.node_name:
        out["field_selector"] = f"spec.nodeName={scope.node_name}"
    return out


def pod_listing(core: Any, scope: PodScope) -> Listing:
    """The managed pods' list calls: all namespaces, or one per configured namespace."""
    return Listing.scoped(every=core.list_pod_for_all_namespaces,
                          namespaced=core.list_namespaced_pod, namespaces=scope.namespaces,
                          selectors=selectors(scope))


def list_pods(core: Any, scope: PodScope) -> tuple[list[dict[str, Any]], str]:
    """The managed pods: one call (or one per namespace); and the resourceVersion to watch
    from (the last namespace's, when several)."""
    return pod_listing(core, scope).list()


@dataclass(frozen=True, kw_only=True)
class NodeFacts:
    """One node as the API describes it: its allocatable CPU (None when absent, unreadable or
    not positive) and its labels (`policyd.io/speed`)."""

    name: str
    uid: str
    allocatable_cores: float | None
    labels: Mapping[str, str]


def node_facts(node: Mapping[str, Any]) -> NodeFacts:
    """A node (JSON) -> NodeFacts."""
    meta = node.get("metadata") or {}
    value = cores(((node.get("status") or {}).get("allocatable") or {}).get("cpu"))
    return NodeFacts(name=str(meta.get("name", "")), uid=str(meta.get("uid", "")),
                     allocatable_cores=value if value and value > 0 else None,
                     labels={str(k): str(v) for k, v in (meta.get("labels") or {}).items()})


def node_listing(core: Any, node_name: str | None = None) -> Listing:
    """The nodes' list call: every node, or only `node_name` (a node agent's own)."""
    narrow = {"field_selector": f"metadata.name={node_name}"} if node_name else {}
    return Listing(calls=((core.list_node, ()),), selectors=narrow)


NodeTables = tuple[dict[str, float], dict[str, dict[str, str]]]
"""Node name -> allocatable CPU cores (the nodes that have it), and node name -> labels."""


def node_tables(nodes: Iterable[NodeFacts]) -> NodeTables:
    """Node name -> allocatable CPU cores (the nodes that have it), and node name -> its
    labels."""
    listed = list(nodes)
    return ({n.name: n.allocatable_cores for n in listed if n.allocatable_cores is not None},
            {n.name: dict(n.labels) for n in listed})


def list_nodes(core: Any, node_name: str | None = None) -> NodeTables:
    """Node name -> allocatable CPU cores, and node name -> its labels (one call; only
    `node_name` when given)."""
    items, _ = node_listing(core, node_name).list()
    return node_tables(node_facts(n) for n in items)
