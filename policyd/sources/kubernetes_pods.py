"""Kubernetes pods as a source: facts and markers from the API, loss and CPU from Prometheus.

Per cycle, a constant number of calls whatever the number of pods: one pod list
(`list_pod_for_all_namespaces`, or one `list_namespaced_pod` per configured namespace, with
the label selector, and on a node agent the field selector of its node) unless the pod watch
keeps them (`pods_from`: `PodWatch.running_now`, an informer's cache), one node list
(allocatable CPU = capacity; both `kubernetes_pod_facts`) unless the node watch keeps them
(`nodes_from`: `NodeWatch.nodes_now`), and the two Prometheus range
queries of `promql.build_queries` (evaluation, CPU), the progress pair when a policy needs
steps and one per QoE metric; with a Jobs API (the manager), one Job list for the held Jobs
(`kubernetes_jobs`). The Prometheus queries go on the source's `query_pool`
(`prometheus.max_concurrent_queries`: two at once by default; 1, one after the other),
and the API lists are made alongside them in the cycle's own thread (one worker: after the
queries they follow, as always); the answers are taken in the order evaluation, CPU, progress,
pods and nodes, metrics, Jobs, so the first failure in that order is the cycle's error, and
progress and metrics failures are warnings. A failed API list is the cycle's `SourceError`,
naming what was listed and where, as a failed query is. The answers are joined by
`kubernetes_snapshot` (pure), and the nodes' `policyd.io/speed` labels read by `speed_label`.

The pods starting and stopping are `kubernetes_pod_watch.PodWatch`'s. Settings come through
`kubernetes_pod_facts.PodScope`, a structural Protocol that the actuator's
`KubernetesSettings` satisfies (sources never import actuators).

Must not: read a pod or a node itself (`kubernetes_pod_facts`), build the snapshot
(`kubernetes_snapshot`), or act on it.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import urllib3
from kubernetes.client.exceptions import ApiException  # type: ignore[import-untyped]

from policyd.clients.http_access import HttpAccess
from policyd.engine.registry import KINDS
from policyd.engine.spec import PolicyDocument
from policyd.model import PendingJob, Snapshot
from policyd.sources import promql
from policyd.sources.errors import SourceError
from policyd.sources.kubernetes_jobs import held_jobs, list_jobs
from policyd.sources.kubernetes_pod_facts import (
    NodeTables,
    PodFacts,
    PodScope,
    list_nodes,
    list_pods,
    running_facts,
)
from policyd.sources.kubernetes_snapshot import api_settings, merge
from policyd.sources.matrix import ResponseShapeError
from policyd.sources.progress import ProgressTable
from policyd.sources.prometheus_connect import (
    MAX_CONCURRENT_QUERIES,
    PrometheusClient,
    prometheus_pool,
)
from policyd.sources.prometheus_cycle import metrics_from, progress_from, send_cycle
from policyd.sources.speed_label import node_speeds

LOG = logging.getLogger(__name__)

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
                 clock: Callable[[], float] = time.time, batch: Any = None,
                 held_from: Callable[[], tuple[PendingJob, ...] | None] | None = None,
                 pods_from: Callable[[], list[PodFacts] | None] | None = None,
                 nodes_from: Callable[[], NodeTables | None] | None = None) -> None:
        self.url = prometheus_url.rstrip("/")
        self.scope, self.core, self._clock = scope, core, clock
        self.batch = batch  # a BatchV1Api: held Jobs are listed (not on a node agent)
        self.held_from = held_from
        """The Jobs held now as the manager's Job watch sees them (`JobWatch.held_now`;
        None from it: not known yet, list them)."""
        self.pods_from = pods_from
        """The managed pods running now as the pod watch sees them (`PodWatch.running_now`;
        None from it: not kept, list them)."""
        self.nodes_from = nodes_from
        """The nodes' allocatable CPU and labels as the node watch sees them
        (`NodeWatch.nodes_now`; None from it: not kept, list them)."""
        self.settings = api_settings(evaluation_node_label)
        self._pool = prometheus_pool(self.url, workers=max_concurrent_queries,
                                     name="kubernetes-query", timeout_seconds=timeout_seconds,
                                     retries=retries, access=access, client=prometheus)
        self.last_warnings: tuple[str, ...] = ()

    @property
    def max_concurrent_queries(self) -> int:
        """How many of a cycle's Prometheus queries may be out at once."""
        return self._pool.workers

    def close(self) -> None:
        """Stop the query threads and close their HTTP sessions (the daemon's shutdown; the
        watches end with the daemon's stop event)."""
        self._pool.close()

    def _from_api(self, pods: list[PodFacts] | None, nodes: NodeTables | None
                  ) -> tuple[list[PodFacts], dict[str, float], dict[str, dict[str, str]]]:
        """The running pods' facts, the nodes' allocatable CPU and their labels: the watches'
        views (`pods`, `nodes`), else listed; API failures are SourceErrors."""
        def listed() -> tuple[list[PodFacts], dict[str, float], dict[str, dict[str, str]]]:
            if pods is not None:
                running = pods
            else:
                items, _ = list_pods(self.core, self.scope)
                running = [f for f in (running_facts(p, self.scope.container_name)
                                       for p in items) if f is not None]
            allocatable, labels = (nodes if nodes is not None
                                   else list_nodes(self.core, self.scope.node_name))
            return running, allocatable, labels
        what = ", ".join(name for name, view in (("pods", pods), ("nodes", nodes))
                         if view is None)
        return _api_call(listed, self.core, what or "nothing")

    def _held(self) -> list[dict[str, Any]]:
        """The Jobs that may be held; an API failure is a SourceError, as the pod list's is
        (a cycle without them would present a partial decision as whole)."""
        return _api_call(functools.partial(list_jobs, self.batch, self.scope), self.batch,
                         "jobs")

    @property
    def _sees_jobs(self) -> bool:
        """Held Jobs are the manager's: a node agent's source has no Jobs API (nor the RBAC)."""
        return self.batch is not None and not self.scope.node_name

    def _watched(self) -> tuple[PendingJob, ...] | None:
        """The held Jobs as the Job watch sees them; None: not known (no watch, or it has not
        listed yet)."""
        return self.held_from() if self.held_from is not None else None

    def held(self, policies: Sequence[PolicyDocument]) -> tuple[PendingJob, ...]:
        """The held Jobs alone (`policyd.sources.node_reports.HeldJobs`): the Job watch's, or
        one list of Jobs, no query; a node agent's source has none (it lists no Jobs)."""
        if not self._sees_jobs:
            return ()
        watched = self._watched()
        if watched is not None:
            return watched
        warnings: list[str] = []
        pending = held_jobs(self._held(), warnings)
        for line in warnings:
            LOG.warning("kubernetes source: %s", line)
        return pending

    def snapshot(self, policies: Sequence[PolicyDocument], *,
                 intervals: Mapping[str, float] | None = None) -> Snapshot:
        now = float(math.floor(self._clock()))
        q = promql.build_queries(policies, self.settings, now_seconds=now, intervals=intervals,
                                 node=self.scope.node_name)
        with self._pool.batch() as batch:
            sent = send_cycle(batch, self.url, q, facts=False)  # the facts: from the API
            pods = self.pods_from() if self.pods_from is not None else None
            nodes = self.nodes_from() if self.nodes_from is not None else None
            listed = batch.alongside(functools.partial(self._from_api, pods, nodes))
            # held Jobs only for a policy that starts them, from the Job watch when it runs:
            # listing every managed Job is the cycle's largest read on a big cluster
            # (benchmarks/README.md)
            wanted = self._sees_jobs and KINDS.admitting(policies)
            watched = self._watched() if wanted else None
            jobs = batch.alongside(self._held) if wanted and watched is None else None
            # the answers taken in the order they were once asked for: the first failure wins
            evaluation = sent.evaluation()
            cpu = sent.cpu() if sent.cpu is not None else []
            progress, missed = progress_from(q, sent.progress)
            found, allocatable, node_labels = listed()
            snap, warnings = self._merged(q, intervals, evaluation=evaluation, cpu=cpu,
                                          found=found, allocatable=allocatable,
                                          node_labels=node_labels, progress=progress)
            snap, measured = metrics_from(sent.metrics, snap,
                                          self.settings.evaluation_identity_labels)
            held: list[str] = []
            if jobs is not None:
                snap = replace(snap, pending=held_jobs(jobs(), held))
            elif watched is not None:
                snap = replace(snap, pending=watched)
        self.last_warnings = (*missed, *warnings, *measured, *held)
        for line in self.last_warnings:
            LOG.warning("kubernetes source: %s", line)
        return snap

    def _merged(self, q: promql.CycleQueries, intervals: Mapping[str, float] | None, *,
                evaluation: Any, cpu: Any, found: list[PodFacts],
                allocatable: dict[str, float], node_labels: dict[str, dict[str, str]],
                progress: ProgressTable) -> tuple[Snapshot, tuple[str, ...]]:
        """Prometheus's answers and the API's lists -> the snapshot and its warnings."""
        found = sorted(found, key=lambda f: f.id)  # the list's order, whichever gave them
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
