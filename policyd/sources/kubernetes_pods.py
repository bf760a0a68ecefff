"""Kubernetes pods as a source: facts and markers from the API, loss and CPU from Prometheus.

Per cycle, a constant number of calls whatever the number of pods: one pod list
(`list_pod_for_all_namespaces`, or one `list_namespaced_pod` per configured namespace, with
the label selector, and on a node agent the field selector of its node), one node list
(allocatable CPU = capacity), and the two Prometheus range queries of `promql.build_queries`
(evaluation, CPU), the progress pair when a policy needs steps and one per QoE metric; with a
Jobs API (the manager), one Job list for the held Jobs (`kubernetes_jobs`). The Prometheus
queries go on the source's `query_pool` (`prometheus.max_concurrent_queries`: one after the
other by default, else that many at once), and the API lists are made alongside them in the
cycle's own thread (one worker: after the queries they follow, as always); the answers are
taken in the order evaluation, CPU, progress, pods and nodes, metrics, Jobs, so the first
failure in that order is the cycle's error, and progress and metrics failures are warnings.
The pod list gives what kube-state-metrics
would need an allowlist for: node, start time, labels, annotations (the markers
`policyd.io/migrated` etc., written by the actuator), and the CPU request / limit (the current
allocation: the CPU the kubelet has *applied*, `status.containerStatuses[].resources`, not the
spec, which holds what was asked and may be pending, deferred or infeasible; the spec only for
a container with no status yet or a server that reports none, before 1.33). `facts_vector`
turns it into the facts' instant vectors that `parse.parse_cycle` already reads (fact ->
samples), so matching, warnings and markers are the Prometheus source's own code; only
Prometheus's fact queries are not sent.

A container is `namespace/pod/container` (the `kubernetes` profile's identity); the training
container is `container_name`, else the pod's first container. `PodWatch` is the
`policyd.tick.EventSource` of pods starting and stopping: list, then watch from the list's
resourceVersion; a 410 Gone (the version expired) relists and reports the difference (the loop
is `kubernetes_list_watch.ListWatch`, shared with the held Jobs' `kubernetes_jobs.JobWatch`).
Settings come through `PodScope`, a structural Protocol that the actuator's
`KubernetesSettings` satisfies (sources never import actuators).
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar, Unpack, cast

import urllib3
from kubernetes.client.exceptions import ApiException  # type: ignore[import-untyped]

from policyd.clients import kubernetes_quantity
from policyd.clients.http_access import HttpAccess
from policyd.clients.kubernetes_follow import Listing
from policyd.clients.kubernetes_json import body
from policyd.engine.spec import PolicyDocument
from policyd.model import Snapshot
from policyd.model import labels as keys
from policyd.sources import promql
from policyd.sources.errors import SourceError
from policyd.sources.kubernetes_jobs import held_jobs, list_jobs
from policyd.sources.kubernetes_list_watch import ListWatch, Tracked, WatchOptions
from policyd.sources.matrix import ResponseShapeError
from policyd.sources.parse import Parsed, parse_cycle
from policyd.sources.progress import ProgressTable
from policyd.sources.prometheus_connect import (
    MAX_CONCURRENT_QUERIES,
    PrometheusClient,
    prometheus_pool,
)
from policyd.sources.prometheus_cycle import metrics_from, progress_from, send_cycle
from policyd.sources.settings import SourceSettings, kubernetes
from policyd.sources.speed_label import node_speeds

LOG = logging.getLogger(__name__)


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


def list_nodes(core: Any, node_name: str | None = None
               ) -> tuple[dict[str, float], dict[str, dict[str, str]]]:
    """Node name -> allocatable CPU cores, and node name -> its labels (one call; only
    `node_name` when given)."""
    narrow = {"field_selector": f"metadata.name={node_name}"} if node_name else {}
    got = body(core.list_node(**narrow, _preload_content=False))
    allocatable: dict[str, float] = {}
    node_labels: dict[str, dict[str, str]] = {}
    for node in got.get("items") or []:
        name = str(node["metadata"]["name"])
        node_labels[name] = {str(k): str(v) for k, v in
                             (node["metadata"].get("labels") or {}).items()}
        value = cores(((node.get("status") or {}).get("allocatable") or {}).get("cpu"))
        if value and value > 0:
            allocatable[name] = value
    return allocatable, node_labels


def facts_vector(found: Iterable[PodFacts], allocatable: Mapping[str, float], now: float
                 ) -> dict[str, list[dict[str, Any]]]:
    """The facts' instant vectors `parse_cycle` reads (fact -> samples), built from the API
    (pure): capacity per node, start time, CPU request as shares (x1024, read back as cores by
    the `kubernetes` profile), limit in cores, and the markers as `annotation_policyd_io_*`
    labels."""
    out: dict[str, list[dict[str, Any]]] = {}

    def sample(fact: str, labels: Mapping[str, str], value: float) -> None:
        out.setdefault(fact, []).append({"metric": dict(labels), "value": [now, repr(value)]})

    for n, c in sorted(allocatable.items()):
        sample(promql.FACT_CAPACITY, {"node": n}, c)
    for f in found:
        ident = {"namespace": f.namespace, "pod": f.pod, "container": f.container,
                 "node": f.node}
        if f.started_at is not None:
            sample(promql.FACT_STARTED, ident, f.started_at)
        if f.cpu_request is not None:
            sample(promql.FACT_SHARES, ident, f.cpu_request * 1024)
        if f.cpu_limit is not None:
            sample(promql.FACT_LIMIT, ident, f.cpu_limit)
        marks = {keys.prometheus_label(k, "annotation_"): v
                 for k, v in f.annotations.items() if k in keys.MARKERS}
        sample(promql.FACT_ANNOTATIONS, {"namespace": f.namespace, "pod": f.pod, **marks}, 1.0)
    return out


def api_settings(evaluation_node_label: str | None = None) -> SourceSettings:
    """The `kubernetes` profile; its facts (and the `kube_pod_annotations`-shaped markers)
    are built from the API by `facts_vector` rather than queried."""
    return kubernetes(evaluation_node_label=evaluation_node_label)


def merge(*, evaluation: Any, cpu: Any, found: Sequence[PodFacts],
          allocatable: Mapping[str, float], queries: promql.CycleQueries,
          settings: SourceSettings, intervals: Mapping[str, float] | None = None,
          progress: ProgressTable | None = None) -> Parsed:
    """Prometheus's two range results + the pod list -> the cycle's snapshot (pure).
    Only evaluation series of listed pods are kept; pod labels and annotations are added to
    each container's (the series' labels win on a clash)."""
    by_key = {(f.namespace, f.pod, f.container): f for f in found}
    kept = [e for e in evaluation or [] if tuple(
        (e.get("metric") or {}).get(n, "") for n in settings.evaluation_identity_labels)
        in by_key]
    parsed = parse_cycle(evaluation=kept, cpu=cpu, facts_results=facts_vector(
        found, allocatable, queries.now_seconds), queries=queries, settings=settings,
        intervals=intervals, progress=progress)
    containers = []
    for c in parsed.snapshot.containers:
        f = by_key[cast(tuple[str, str, str], tuple(c.id.split("/", 2)))]
        containers.append(replace(c, name=f.pod, labels={**f.labels, **c.labels},
                                  annotations=f.annotations))
    snap = parsed.snapshot
    return Parsed(snapshot=Snapshot(time=snap.time, nodes=snap.nodes,
                                    containers=tuple(containers), intervals=snap.intervals),
                  warnings=parsed.warnings)


T = TypeVar("T")


def _api_call(call: Callable[[], T], api: Any, what: str) -> T:
    """`call()`, a list from the Kubernetes API, its failures turned into the cycle's one
    SourceError naming `what` was listed and where (`api`'s host)."""
    where = str(getattr(getattr(getattr(api, "api_client", None), "configuration", None),
                        "host", "the Kubernetes API"))
    try:
        return call()
    except ApiException as exc:
        raise SourceError(kind="http", url=where, what="list", query=what,
                          detail=f"HTTP {exc.status} {exc.reason or ''}".strip()) from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise SourceError(kind="connection", url=where, what="list", query=what,
                          detail=str(exc)) from exc


class KubernetesPodSource:
    """The `policyd.tick.Source` of a Kubernetes cluster (see the module docstring)."""

    def __init__(self, prometheus_url: str, scope: PodScope, *, core: Any,
                 prometheus: PrometheusClient | None = None, timeout_seconds: float = 10,
                 retries: int = 2, access: HttpAccess | None = None,
                 evaluation_node_label: str | None = None,
                 max_concurrent_queries: int = MAX_CONCURRENT_QUERIES,
                 clock: Callable[[], float] = time.time, batch: Any = None) -> None:
        self.url = prometheus_url.rstrip("/")
        self.scope, self.core, self._clock = scope, core, clock
        self.batch = batch  # a BatchV1Api: held Jobs are listed (not on a node agent)
        self.settings = api_settings(evaluation_node_label)
        self._pool = prometheus_pool(self.url, workers=max_concurrent_queries,
                                     name="kubernetes-query", timeout_seconds=timeout_seconds,
                                     retries=retries, access=access, client=prometheus)
        self.last_warnings: tuple[str, ...] = ()

    @property
    def max_concurrent_queries(self) -> int:
        """How many of a cycle's Prometheus queries may be out at once."""
        return self._pool.workers

    def _from_api(self) -> tuple[list[dict[str, Any]], dict[str, float],
                                 dict[str, dict[str, str]]]:
        """The pod list, the nodes' allocatable CPU and their labels; API failures are
        SourceErrors."""
        def listed() -> tuple[list[dict[str, Any]], dict[str, float], dict[str, dict[str, str]]]:
            items, _ = list_pods(self.core, self.scope)
            return items, *list_nodes(self.core, self.scope.node_name)
        return _api_call(listed, self.core, "pods, nodes")

    def _held(self) -> list[dict[str, Any]]:
        """The Jobs that may be held; an API failure is a SourceError, as the pod list's is
        (a cycle without them would present a partial decision as whole)."""
        return _api_call(functools.partial(list_jobs, self.batch, self.scope), self.batch,
                         "jobs")

    def snapshot(self, policies: Sequence[PolicyDocument], *,
                 intervals: Mapping[str, float] | None = None) -> Snapshot:
        now = float(math.floor(self._clock()))
        q = promql.build_queries(policies, self.settings, now_seconds=now, intervals=intervals,
                                 node=self.scope.node_name)
        with self._pool.batch() as batch:
            sent = send_cycle(batch, self.url, q, facts=False)  # the facts: from the API
            listed = batch.alongside(self._from_api)
            jobs = (batch.alongside(self._held)
                    if self.batch is not None and not self.scope.node_name else None)
            # the answers taken in the order they were once asked for: the first failure wins
            evaluation = sent.evaluation()
            cpu = sent.cpu() if sent.cpu is not None else []
            progress, missed = progress_from(q, sent.progress)
            items, allocatable, node_labels = listed()
            snap, warnings = self._merged(q, intervals, evaluation=evaluation, cpu=cpu,
                                          items=items, allocatable=allocatable,
                                          node_labels=node_labels, progress=progress)
            snap, measured = metrics_from(sent.metrics, snap,
                                          self.settings.evaluation_identity_labels)
            held: list[str] = []
            if jobs is not None:
                snap = replace(snap, pending=held_jobs(jobs(), held))
        self.last_warnings = (*missed, *warnings, *measured, *held)
        for line in self.last_warnings:
            LOG.warning("kubernetes source: %s", line)
        return snap

    def _merged(self, q: promql.CycleQueries, intervals: Mapping[str, float] | None, *,
                evaluation: Any, cpu: Any, items: list[dict[str, Any]],
                allocatable: dict[str, float], node_labels: dict[str, dict[str, str]],
                progress: ProgressTable) -> tuple[Snapshot, tuple[str, ...]]:
        """Prometheus's answers and the API's lists -> the snapshot and its warnings."""
        found = [f for f in (pod_facts(p, self.scope.container_name) for p in items)
                 if f is not None and f.running]
        try:
            parsed = merge(evaluation=evaluation, cpu=cpu, found=found,
                           allocatable=allocatable, queries=q, settings=self.settings,
                           intervals=intervals, progress=progress)
        except ResponseShapeError as exc:
            raise SourceError(kind="bad_response", url=self.url, what="cycle",
                              query=q.evaluation, detail=str(exc)) from exc
        speeds, speed_warnings = node_speeds(node_labels)
        snap = parsed.snapshot
        if speeds:  # the operator's policyd.io/speed on the Node
            snap = replace(snap, nodes=tuple(replace(n, speed=speeds.get(n.name, n.speed))
                                             for n in snap.nodes))
        return snap, (*parsed.warnings, *speed_warnings)


class PodWatch(ListWatch):
    """Pods starting and stopping (FlowCon's Algorithm 2 listener; `policyd.tick.EventSource`):
    a running pod (`pod_facts(...).running`, by uid) that appears is "started", one that stops
    running or is deleted "stopped", each named `namespace/pod/container` on its node. The
    list, the watch windows, 410 and the back-off, and the prompt stop are
    `kubernetes_list_watch.ListWatch`'s; the calls `list_namespaced_pod` (one per configured
    namespace) or `list_pod_for_all_namespaces`, with the label selector and, on a node agent,
    the node's field selector."""

    def __init__(self, core: Any, scope: PodScope, **options: Unpack[WatchOptions]) -> None:
        self.core, self.scope = core, scope
        super().__init__(pod_listing(core, scope), self._running, entered="started",
                         left="stopped", name="pod", **options)

    def _running(self, pod: Mapping[str, Any]) -> Tracked | None:
        f = pod_facts(pod, self.scope.container_name)
        if f is None or not f.running:
            return None
        return Tracked(uid=f.uid, container=f.id, node=f.node)
