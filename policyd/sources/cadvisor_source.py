"""`CadvisorRestSource`: Docker hosts whose cAdvisor no Prometheus scrapes (profile cadvisor-rest).

CPU, facts and markers come from each host's cAdvisor REST API, the loss from Prometheus. Each
call is one snapshot, built from a fixed number of requests whatever the number of containers:

* Prometheus: one range query, the policies' evaluation query from the window's start to now,
  one step per (smallest current) interval: `promql.build_queries`, asked as `PrometheusSource`
  asks it;
* each cAdvisor: one `POST /api/v1.3/docker/` (`cadvisor.CadvisorClient`): every Docker
  container with its spec, labels and the CPU counter samples since that host's previous answer
  (since the window's start, the first time);
* each cAdvisor, once for the life of the source: `GET /api/v1.3/machine` (the node's cores).

The hosts are asked at once (a thread each), alongside the Prometheus queries (the evaluation
range, the progress pair, the metrics), which go on the source's `query_pool`
(`max_concurrent_queries`; one worker: the queries one after the other and the hosts after the
evaluation and progress queries, as always). The answers are taken in that order, so a failed
evaluation query is the cycle's error even when a host failed first. cAdvisor keeps its samples
for `--storage_duration` (two minutes by default), less than a policy's window, so the source
keeps each container's counter samples in a ring between calls (`cpu_counter.CounterRings`) and
turns them into cores per interval at the engine's boundaries. A restart of policyd loses the
rings: its first cycle sees what cAdvisor still holds, and the window fills from there.

A host that does not answer, or answers something that is not cAdvisor's documented shape, and
a failing Prometheus, end the call with one `SourceError` naming the URL (and the node): no
snapshot is made of the hosts that did answer, because the containers of the missing host would
look gone and its capacity free. The next call simply tries again. Joining and bad-data rules:
`cadvisor_snapshot`.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from urllib.parse import urlsplit

import numpy as np

from policyd.clients.http_access import HttpAccess
from policyd.engine.spec import PolicyDocument
from policyd.model import Markers, Series, Snapshot
from policyd.model.snapshot import FloatArray
from policyd.sources.cadvisor import DOCKER_PATH, MACHINE_PATH, CadvisorClient
from policyd.sources.cadvisor_info import machine_cores, read_docker_containers
from policyd.sources.cadvisor_snapshot import SETTINGS, HostReading, assemble
from policyd.sources.cpu_counter import CounterRings, cores_over_intervals
from policyd.sources.errors import SourceError
from policyd.sources.parse import Parsed
from policyd.sources.prometheus_connect import (
    MAX_CONCURRENT_QUERIES,
    PrometheusClient,
    prometheus_pool,
)
from policyd.sources.prometheus_cycle import (
    evaluation_matrix,
    log_warnings,
    metrics_from,
    progress_from,
    send_cycle,
)
from policyd.sources.promql import CycleQueries, build_queries

LOG = logging.getLogger(__name__)

OVERLAP_SECONDS = 5.0
"""A host is asked for samples from this long before the newest one it sent last time (a
sample being collected while the previous answer was written is not lost)."""


def url_problems(cadvisor_urls: Mapping[str, str]) -> list[str]:
    """Every problem with a node -> cAdvisor URL map (empty when it is usable)."""
    if not cadvisor_urls:
        return ["no cAdvisor given: name at least one NODE=URL"]
    problems = []
    for node, url in cadvisor_urls.items():
        if not node.strip():
            problems.append(f"cAdvisor {url!r}: the node name is empty")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            problems.append(f"cAdvisor of node {node!r}: {url!r} is not an http:// or https:// "
                            "URL with a host")
    return problems


def boundaries(q: CycleQueries) -> FloatArray:
    """The interval ends the CPU series is read at: the range's steps, and one step before the
    first (the Prometheus profiles' rate at a step covers the step before it)."""
    steps = round((q.now_seconds - q.start_seconds) / q.step_seconds)
    return q.start_seconds + q.step_seconds * np.arange(-1, steps + 1, dtype=np.float64)


class CadvisorRestSource:
    """The `policyd.tick.Source` of the cadvisor-rest profile (see the module docstring).

    `extra_markers` returns markers by Docker container id that labels cannot hold (the Docker
    actuator's `recorded_markers`), merged with the `policyd.io/*` labels.
    """

    def __init__(self, prometheus_url: str, cadvisor_urls: Mapping[str, str], *,
                 timeout_seconds: float = 10, retries: int = 2,
                 retry_backoff_seconds: float = 0.5, prometheus: PrometheusClient | None = None,
                 extra_markers: Callable[[], Mapping[str, Markers]] | None = None,
                 clock: Callable[[], float] = time.time, max_samples: int = 4096,
                 access: HttpAccess | None = None,
                 max_concurrent_queries: int = MAX_CONCURRENT_QUERIES) -> None:
        problems = url_problems(cadvisor_urls)
        if problems:
            raise ValueError("; ".join(problems))
        self.url = prometheus_url.rstrip("/")
        self.clients = {node: CadvisorClient(url, node=node, timeout_seconds=timeout_seconds,
                                             retries=retries,
                                             retry_backoff_seconds=retry_backoff_seconds)
                        for node, url in sorted(cadvisor_urls.items())}
        self._queries = prometheus_pool(self.url, workers=max_concurrent_queries,
                                        name="cadvisor-query", timeout_seconds=timeout_seconds,
                                        retries=retries,
                                        retry_backoff_seconds=retry_backoff_seconds,
                                        access=access, client=prometheus)
        self._extra = extra_markers
        self._clock = clock
        self._pool = ThreadPoolExecutor(len(self.clients), thread_name_prefix="cadvisor")
        self._lock = threading.Lock()
        self._cores: dict[str, float] = {}
        self._newest: dict[str, float] = {}
        self._keep_seconds = 0.0
        self.rings = CounterRings(max_samples)
        self.errors_total: Counter[str] = Counter()
        self.last_warnings: tuple[str, ...] = ()

    @property
    def max_concurrent_queries(self) -> int:
        """How many of a cycle's Prometheus queries may be out at once."""
        return self._queries.workers

    def close(self) -> None:
        """Stop the host threads and the query threads, and close the HTTP sessions."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._queries.close()
        for client in self.clients.values():
            client.close()

    def _read_host(self, node: str, since: float) -> tuple[HostReading, list[str]]:
        client = self.clients[node]
        if node not in self._cores:
            try:
                self._cores[node] = machine_cores(client.machine())
            except ValueError as exc:
                raise SourceError(kind="bad_response", url=client.base_url,
                                  what=f"cAdvisor of node {node}: GET", query=MACHINE_PATH,
                                  detail=str(exc)) from exc
        payload = client.docker_containers(since_seconds=since)
        try:
            containers, warnings = read_docker_containers(payload, f"node {node}")
        except ValueError as exc:
            raise SourceError(kind="bad_response", url=client.base_url,
                              what=f"cAdvisor of node {node}: POST", query=DOCKER_PATH,
                              detail=str(exc)) from exc
        return HostReading(node=node, cores=self._cores[node],
                           containers=tuple(containers)), warnings

    def _since(self, node: str, horizon: float) -> float:
        newest = self._newest.get(node)
        return horizon if newest is None else max(horizon, newest - OVERLAP_SECONDS)

    def _ask_hosts(self, horizon: float) -> list[Future[tuple[HostReading, list[str]]]]:
        """Every host at once (in node order), each answer done when this returns."""
        futures = [self._pool.submit(self._read_host, node, self._since(node, horizon))
                   for node in self.clients]
        wait(futures)
        return futures

    def _hosts(self, answers: Sequence[Future[tuple[HostReading, list[str]]]]
               ) -> tuple[list[HostReading], list[str]]:
        """The hosts' answers; the first failure (in node order) is raised, the others
        logged."""
        readings: list[HostReading] = []
        warnings: list[str] = []
        failed: list[SourceError] = []
        for future in answers:
            try:
                reading, found = future.result()
            except SourceError as exc:
                failed.append(exc)
                continue
            readings.append(reading)
            warnings.extend(found)
        for err in failed[1:]:
            self.errors_total[err.kind] += 1
            LOG.error("cadvisor-rest source: %s", err)
        if failed:
            raise failed[0]
        return readings, warnings

    def _cpu(self, readings: Sequence[HostReading], q: CycleQueries, now: float
             ) -> dict[str, Series]:
        """Fold the new samples into the rings; cores per interval of every container."""
        self._keep_seconds = max(self._keep_seconds, now - float(boundaries(q)[0]))
        keep_after = now - self._keep_seconds
        for reading in readings:
            for c in reading.containers:
                self.rings.add(c.container_id, c.times_seconds, c.cpu_seconds,
                               keep_after=keep_after)
                if c.times_seconds.size:
                    self._newest[reading.node] = max(self._newest.get(reading.node, -math.inf),
                                                     float(c.times_seconds[-1]))
        alive = [c.container_id for r in readings for c in r.containers]
        self.rings.retain(alive)  # every host answered: a container not listed is gone
        bounds = boundaries(q)
        return {cid: cores_over_intervals(*self.rings.get(cid), bounds) for cid in alive}

    def observe(self, policies: Sequence[PolicyDocument], *,
                intervals: Mapping[str, float] | None = None) -> Parsed:
        """One cycle (see the module docstring); raises SourceError (counted and logged)."""
        with self._lock:  # the rings are one state: cycles of several policies take turns
            try:
                parsed = self._observe(policies, intervals)
            except SourceError as err:
                self.errors_total[err.kind] += 1
                LOG.error("cadvisor-rest source: %s", err)
                raise
        self.last_warnings = log_warnings("cadvisor-rest source", parsed.warnings)
        return parsed

    def _observe(self, policies: Sequence[PolicyDocument],
                 intervals: Mapping[str, float] | None) -> Parsed:
        now = float(math.floor(self._clock()))
        q = build_queries(policies, SETTINGS, now_seconds=now, intervals=intervals)
        with self._queries.batch() as batch:
            sent = send_cycle(batch, self.url, q, cpu=False, facts=False)  # from the cAdvisors
            asked = batch.alongside(functools.partial(self._ask_hosts, float(boundaries(q)[0])))
            # the answers taken in the order they were once asked for: the first failure wins
            evaluation = evaluation_matrix(sent, self.url, q)
            progress, missed = progress_from(q, sent.progress)
            readings, warnings = self._hosts(asked())
            warnings = [*missed, *warnings]
            cpu = self._cpu(readings, q, now)
            extra = dict(self._extra()) if self._extra is not None else {}
            parsed = assemble(evaluation=evaluation, hosts=readings, cpu=cpu, queries=q,
                              extra_markers=extra, intervals=intervals, warnings=warnings,
                              progress=progress)
            snapshot, measured = metrics_from(sent.metrics, parsed.snapshot,
                                              SETTINGS.evaluation_identity_labels)
        return Parsed(snapshot=snapshot, warnings=(*parsed.warnings, *measured))

    def snapshot(self, policies: Sequence[PolicyDocument], *,
                 intervals: Mapping[str, float] | None = None) -> Snapshot:
        """The Docker hosts now (the `Source` protocol); `intervals` are the policies' current
        (backed-off) intervals, which only the daemon knows."""
        return self.observe(policies, intervals=intervals).snapshot


def cadvisor_rest_source(prometheus_url: str, cadvisor_urls: Mapping[str, str], *,
                         timeout_seconds: float = 10, retries: int = 2,
                         extra_markers: Callable[[], Mapping[str, Markers]] | None = None,
                         access: HttpAccess | None = None,
                         max_concurrent_queries: int = MAX_CONCURRENT_QUERIES
                         ) -> CadvisorRestSource:
    """The daemon's factory for `prometheus.profile: cadvisor-rest`: `cadvisor_urls` maps each
    Docker node (named as the Docker actuator names it) to its cAdvisor's base URL; pass the
    Docker actuator's `recorded_markers` as `extra_markers`. Raises ValueError listing every
    problem with the map."""
    return CadvisorRestSource(prometheus_url, cadvisor_urls, timeout_seconds=timeout_seconds,
                              retries=retries, extra_markers=extra_markers, access=access,
                              max_concurrent_queries=max_concurrent_queries)
