"""Docker engines as a source: CPU from the stats API, facts from inspect, loss from Prometheus.

For Docker hosts without cAdvisor. Two parts:

* `DockerStats.poll()` asks every host at once (one thread per host) and, on each host, every
  managed container at once (a thread pool per host): `inspect` (start time, labels, CPU
  settings) and `stats(stream=False, one_shot=True)` (API >= 1.41: one sample, no 1-2 s wait
  for a second one). The cumulative `cpu_stats.cpu_usage.total_usage` (ns) and the sample's
  `read` time are kept in a ring per container id, with the cycle time `at` of the poll. Cores
  = delta(total_usage) / delta(read) between consecutive polls, timed at the later poll's
  cycle time: "cores averaged over the sample's preceding interval", which is what the engine
  reads in (t_{m-1}, t_m] when the source polls once per cycle (the daemon's rhythm). A counter
  that went down (a restarted container) gives no sample for that pair.
* `DockerSnapshotSource.snapshot(policies)` (the `policyd.tick.Source` protocol): the policies'
  evaluation query as a range (built by `promql.build_queries`, read by `matrix.read_matrix`,
  errors classified as `PrometheusSource` does), matched to containers by the exporter's
  `container` label = the container's name, merged with the poll. The snapshot's container id
  is the container's name: it is what the exporter labels, and it survives a migration (the
  replacement has the same name on another engine). The Prometheus queries (evaluation, the
  progress pair, the metrics) go on the source's `query_pool` (`max_concurrent_queries`), and
  the engines are polled alongside them in the cycle's own thread (one worker: after the
  evaluation and progress queries, as always). The poll is read first and kept second
  (`DockerStats.read`, `keep`): its samples enter the rings only once the evaluation query
  has answered, so a cycle that fails leaves them as they were.

What a restart of policyd loses: the CPU rings (memory only). The first cycle after a restart
has no CPU samples (the engine takes no CPU-based action for one cycle), and FlowCon's window
fills again over `window_intervals`. Markers are not lost: they are Docker labels, plus what
the actuator's state file holds (`extra_markers`). Node usage is the sum over the managed
containers only (other containers are not polled).

Settings are read through `DockerTargets`, a structural Protocol that the actuator's
`DockerSettings` satisfies: sources never import actuators (the layer contract); the SDK
client comes from `policyd.clients.docker_engine`, which both use.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Protocol

import docker
import docker.errors

from policyd.clients.docker_engine import EngineAddress, connect
from policyd.clients.http_access import HttpAccess
from policyd.engine.spec import PolicyDocument
from policyd.model import Container, Markers, Node, Series, Snapshot
from policyd.model import labels as keys
from policyd.sources import facts
from policyd.sources.cadvisor_info import parse_timestamp
from policyd.sources.docker_held import HELD_STATUS, HeldFacts, held_of, pending_jobs
from policyd.sources.docker_labels import label_markers
from policyd.sources.matrix import Matrix
from policyd.sources.progress import NO_PROGRESS, ProgressTable
from policyd.sources.prometheus_connect import (
    MAX_CONCURRENT_QUERIES,
    PrometheusClient,
    prometheus_pool,
)
from policyd.sources.prometheus_cycle import (
    evaluation_matrix,
    metrics_from,
    progress_from,
    send_cycle,
)
from policyd.sources.promql import CycleQueries, build_queries
from policyd.sources.settings import cadvisor_docker
from policyd.sources.speed_label import parse_speed

LOG = logging.getLogger(__name__)

EVALUATION_LABEL = "container"
"""The exporter's label naming the container (env POLICYD_CONTAINER, exporters/README.md)."""


class DockerTargets(Protocol):
    """What the Docker sources read from the settings (the actuator's DockerSettings)."""

    @property
    def hosts(self) -> Mapping[str, EngineAddress]: ...
    @property
    def managed_label(self) -> str: ...
    @property
    def api_version(self) -> str: ...
    @property
    def timeout_seconds(self) -> float: ...
    @property
    def stats_workers_per_host(self) -> int: ...


@dataclass(frozen=True, kw_only=True)
class ContainerFacts:
    """One running managed container as its engine describes it."""

    id: str
    name: str
    node: str
    started_at: float
    labels: Mapping[str, str]
    created_at: float | None = None
    cpu_shares: int = 0
    cpu_quota: int = 0
    cpu_period: int = 0


@dataclass(frozen=True, kw_only=True)
class HostReading:
    """One host's answer to a poll: its CPUs and its managed containers."""

    node: str
    cores: float
    containers: tuple[ContainerFacts, ...]
    held: tuple[HeldFacts, ...] = ()
    speed: float | None = None
    """Its `policyd.io/speed` engine label (None: not stated, or not a positive number)."""
    samples: tuple[tuple[str, float, float], ...] = ()
    """Each container's CPU counter: (id, the stats' read time s, total_usage ns)."""


@dataclass
class Poll:
    """Every host that answered, and what went wrong with the others (and with containers),
    for the cycle at time `at`."""

    at: float = 0.0
    hosts: list[HostReading] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def facts_of(attrs: Mapping[str, Any], node: str) -> ContainerFacts:
    """An inspect result -> ContainerFacts (pure)."""
    state, host, config = (attrs.get("State") or {}, attrs.get("HostConfig") or {},
                           attrs.get("Config") or {})
    return ContainerFacts(
        id=str(attrs["Id"]), name=str(attrs.get("Name", "")).lstrip("/"), node=node,
        started_at=parse_timestamp(state.get("StartedAt") or "1970-01-01T00:00:00Z"),
        labels=dict(config.get("Labels") or {}),
        created_at=parse_timestamp(attrs["Created"]) if attrs.get("Created") else None,
        cpu_shares=int(host.get("CpuShares") or 0), cpu_quota=int(host.get("CpuQuota") or 0),
        cpu_period=int(host.get("CpuPeriod") or 0))


class DockerStats:
    """Polls the engines; keeps each container's cumulative CPU counter in a ring."""

    def __init__(self, targets: DockerTargets, *,
                 clients: Mapping[str, docker.DockerClient] | None = None,
                 ring_samples: int = 2048) -> None:
        self.targets = targets
        self._clients = dict(clients or {})
        self._made: list[docker.DockerClient] = []
        self._cores: dict[str, float] = {}
        self._speed: dict[str, float | None] = {}
        self.rings: dict[str, deque[tuple[float, float, float]]] = {}
        self._ring_samples = ring_samples
        nodes = sorted(set(targets.hosts) | set(self._clients))
        self._hosts_pool = ThreadPoolExecutor(max(1, len(nodes)), "docker-stats")
        self._pools = {n: ThreadPoolExecutor(targets.stats_workers_per_host, f"stats-{n}")
                       for n in nodes}

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted(self._pools))

    def client(self, node: str) -> docker.DockerClient:
        if node not in self._clients:
            t = self.targets
            made = connect(t.hosts[node], api_version=t.api_version,
                           timeout_seconds=t.timeout_seconds)
            self._made.append(made)
            self._clients[node] = made
        return self._clients[node]

    def close(self) -> None:
        """Stop the thread pools and close the clients made here (not the ones passed in)."""
        self._hosts_pool.shutdown(wait=True, cancel_futures=True)
        for pool in self._pools.values():
            pool.shutdown(wait=True, cancel_futures=True)
        for client in self._made:
            client.close()
        self._made.clear()

    def poll(self, at: float) -> Poll:
        """Every host at once, for the cycle at time `at`, its samples kept in the rings."""
        return self.keep(self.read(at))

    def read(self, at: float) -> Poll:
        """Every host at once, for the cycle at time `at`; a host that fails is left out with
        a warning. The rings are left as they were (`keep` folds the samples in), so a cycle
        that fails after reading leaves no trace."""
        result = Poll(at=at)
        futures = {n: self._hosts_pool.submit(self._poll_host, n) for n in self.nodes}
        for node, future in futures.items():
            try:
                reading, warnings = future.result()
            except (docker.errors.DockerException, OSError, KeyError, ValueError) as exc:
                result.warnings.append(f"node {node}: engine unreachable or unreadable "
                                       f"({type(exc).__name__}: {exc}); its containers left out")
                continue
            result.hosts.append(reading)
            result.warnings.extend(warnings)
        return result

    def keep(self, poll: Poll) -> Poll:
        """`poll`'s samples folded into the rings (at its cycle time; none for a cycle no
        later than the ring's last), and the containers it did not see forgotten when every
        host answered; returns `poll`."""
        for host in poll.hosts:
            for cid, read_seconds, total in host.samples:
                ring = self.rings.setdefault(cid, deque(maxlen=self._ring_samples))
                if not ring or poll.at > ring[-1][0]:
                    ring.append((poll.at, read_seconds, total))
        alive = {c.id for h in poll.hosts for c in h.containers}
        polled = {h.node for h in poll.hosts}
        for cid in list(self.rings):
            if cid not in alive and polled == set(self.nodes):
                del self.rings[cid]  # gone (forget it only when every host answered)
        return poll

    def _poll_host(self, node: str) -> tuple[HostReading, list[str]]:
        client = self.client(node)
        warnings: list[str] = []
        if node not in self._cores:
            info = client.info()
            self._cores[node] = float(info["NCPU"])
            self._speed[node], problem = engine_speed(info.get("Labels") or [])
            if problem:
                warnings.append(f"node {node}: {problem}")
        listed = client.api.containers(filters={"label": self.targets.managed_label})
        held = client.api.containers(all=True, filters={"label": self.targets.managed_label,
                                                        "status": HELD_STATUS})
        pool = self._pools[node]
        jobs = [pool.submit(self._one, client, node, str(c["Id"])) for c in listed]
        found: list[ContainerFacts] = []
        samples: list[tuple[str, float, float]] = []
        for job in jobs:
            try:
                facts_found, sample = job.result()
            except docker.errors.NotFound:
                continue  # it stopped between the list and the inspect
            except (docker.errors.DockerException, OSError, KeyError, ValueError) as exc:
                warnings.append(f"node {node}: a container could not be read "
                                f"({type(exc).__name__}: {exc})")
                continue
            found.append(facts_found)
            samples.append(sample)
        return HostReading(node=node, cores=self._cores[node], containers=tuple(found),
                           held=tuple(held_of(h, node) for h in held),
                           speed=self._speed.get(node), samples=tuple(samples)), warnings

    def _one(self, client: docker.DockerClient, node: str, cid: str
             ) -> tuple[ContainerFacts, tuple[str, float, float]]:
        """A container's facts and its CPU counter sample (id, read time s, total ns)."""
        attrs = client.api.inspect_container(cid)
        stats = client.api.stats(cid, stream=False, one_shot=True)
        total = float(stats["cpu_stats"]["cpu_usage"]["total_usage"])
        read = stats.get("read")
        read_seconds = parse_timestamp(read) if read else time.time()
        return facts_of(attrs, node), (cid, read_seconds, total)

    def cores(self, container_id: str) -> Series:
        """Cores between consecutive polls, timed at the later poll's cycle time."""
        return cores_of(tuple(self.rings.get(container_id, ())))

    def latest_cores(self, container_id: str) -> float:
        """Cores between the last two polls (0 when there are fewer)."""
        series = self.cores(container_id)
        return float(series.values[-1]) if len(series) else 0.0


def engine_speed(labels: Sequence[str]) -> tuple[float | None, str]:
    """The engine's `policyd.io/speed=X` label (`dockerd --label`), and what is wrong with it
    ("" when nothing): not a positive number means not stated."""
    prefix = keys.SPEED + "="
    for label in labels:
        if isinstance(label, str) and label.startswith(prefix):
            return parse_speed(label[len(prefix):], "engine")
    return None, ""


def cores_of(ring: Sequence[tuple[float, float, float]]) -> Series:
    """(cycle time, read time s, total_usage ns) samples -> cores per poll pair (pure)."""
    times: list[float] = []
    values: list[float] = []
    for (_, read_a, total_a), (at_b, read_b, total_b) in pairwise(ring):
        dt, du = read_b - read_a, total_b - total_a
        if dt > 0 and du >= 0:
            times.append(at_b)
            values.append(du / 1e9 / dt)
    return Series.of(times, values)


def merged_evaluation(matrix: Matrix) -> dict[str, Series]:
    """Name -> evaluation series. Several series of one name (the old and the new container
    of a migration, scraped as two targets) are joined: at a time both have, the series whose
    last sample is later wins, so the loss curve continues across the move."""
    by_name: dict[str, list[int]] = {}
    for i, metric in enumerate(matrix.labels):
        name = metric.get(EVALUATION_LABEL, "")
        if name and matrix.broken[i] is None and matrix.offsets[i + 1] > matrix.offsets[i]:
            by_name.setdefault(name, []).append(i)
    out: dict[str, Series] = {}
    for name, rows in by_name.items():
        rows.sort(key=lambda i: float(matrix.times[matrix.offsets[i + 1] - 1]))
        points: dict[float, float] = {}
        for i in rows:
            lo, hi = matrix.span(i)
            points.update(zip(matrix.times[lo:hi].tolist(), matrix.values[lo:hi].tolist(),
                              strict=True))
        times = sorted(points)
        out[name] = Series.of(times, [points[t] for t in times])
    return out


class DockerSnapshotSource:
    """The `policyd.tick.Source` of Docker hosts without cAdvisor (see the module docstring).

    `extra_markers` returns markers by engine container id that Docker labels cannot hold
    (the actuator's `recorded_markers`: MarkMigrated, last_action_at); they are merged with
    the labels (`label_markers`)."""

    def __init__(self, prometheus_url: str, targets: DockerTargets, *,
                 clients: Mapping[str, docker.DockerClient] | None = None,
                 prometheus: PrometheusClient | None = None,
                 extra_markers: Callable[[], Mapping[str, Markers]] | None = None,
                 timeout_seconds: float = 10, retries: int = 2,
                 access: HttpAccess | None = None,
                 max_concurrent_queries: int = MAX_CONCURRENT_QUERIES,
                 clock: Callable[[], float] = time.time) -> None:
        self.url = prometheus_url.rstrip("/")
        self.stats = DockerStats(targets, clients=clients)
        self._extra = extra_markers
        self._clock = clock
        self._settings = cadvisor_docker()  # only its allocation reading is used
        self._pool = prometheus_pool(self.url, workers=max_concurrent_queries,
                                     name="docker-query", timeout_seconds=timeout_seconds,
                                     retries=retries, access=access, client=prometheus)
        self.last_warnings: tuple[str, ...] = ()

    @property
    def max_concurrent_queries(self) -> int:
        """How many of a cycle's Prometheus queries may be out at once."""
        return self._pool.workers

    def close(self) -> None:
        self.stats.close()
        self._pool.close()

    def snapshot(self, policies: Sequence[PolicyDocument], *,
                 intervals: Mapping[str, float] | None = None) -> Snapshot:
        now = float(math.floor(self._clock()))
        q = build_queries(policies, self._settings, now_seconds=now, intervals=intervals)
        with self._pool.batch() as batch:
            sent = send_cycle(batch, self.url, q, cpu=False, facts=False)  # both: the engines'
            polled = batch.alongside(functools.partial(self.stats.read, now))
            # the answers taken in the order they were once asked for: the first failure wins
            evaluation = merged_evaluation(evaluation_matrix(sent, self.url, q))
            progress, missed = progress_from(q, sent.progress)
            poll = self.stats.keep(polled())  # the rings change only once Prometheus answered
            snapshot, warnings = self._merged(policies, intervals, q, evaluation=evaluation,
                                              progress=progress, poll=poll)
            snapshot, measured = metrics_from(sent.metrics, snapshot, (EVALUATION_LABEL,))
        self.last_warnings = (*missed, *warnings, *measured)
        for line in self.last_warnings:
            LOG.warning("docker source: %s", line)
        return snapshot

    def _merged(self, policies: Sequence[PolicyDocument],
                intervals: Mapping[str, float] | None, q: CycleQueries, *,
                evaluation: dict[str, Series], progress: ProgressTable, poll: Poll
                ) -> tuple[Snapshot, list[str]]:
        """The loss series and the engines' poll -> the snapshot (without the metrics) and
        its warnings."""
        now = q.now_seconds
        steps = progress.by_label(EVALUATION_LABEL)
        warnings = list(poll.warnings)
        extra = dict(self._extra()) if self._extra is not None else {}
        chosen: dict[str, tuple[ContainerFacts, float]] = {}
        for host in poll.hosts:
            for c in host.containers:
                other = chosen.get(c.name)
                if other is not None:
                    warnings.append(f"container {c.name} runs on {other[0].node} and {c.node} "
                                    "(a half-done migration?); using the later start")
                    if other[0].started_at >= c.started_at:
                        continue
                chosen[c.name] = (c, host.cores)
        # Algorithm 2: a container that has just started is a new job (NL / PC) before its
        # exporter has been scraped (starting Python and the framework takes seconds); without
        # this, the listener's immediate tick would not see it at all. Only while it is young
        # (2 intervals, the engine's own "young"): later, no series means not a training job.
        young_seconds = 2 * max((float((intervals or {}).get(p.name, 0.0))
                                 or float(getattr(p.spec, "interval_seconds", 0.0))
                                 for p in policies), default=0.0)
        containers: list[Container] = []
        for name, (c, cores) in sorted(chosen.items()):
            series = evaluation.get(name)
            if series is None:
                if abs(now - c.started_at) > young_seconds:  # (skew: either side)
                    continue
                series = Series.of([], [])
            res = facts.Resource(shares=c.cpu_shares or None, quota=c.cpu_quota,
                                 period=c.cpu_period)
            containers.append(Container(
                id=name, name=name, node=c.node, started_at=c.started_at,
                evaluation=series, cpu_usage=self.stats.cores(c.id),
                cpu_allocation=facts.allocation(res, q.allocation_mode, cores, self._settings),
                labels=c.labels, submitted_at=c.created_at,
                markers=label_markers(c.labels, extra.get(c.id), warnings,
                                      f"container {name}"),
                steps=steps.get(name, NO_PROGRESS).steps,
                total_steps=steps.get(name, NO_PROGRESS).total_steps))
        unseen = sorted(set(evaluation) - set(chosen))
        if unseen:
            warnings.append(f"{len(unseen)} evaluation series name no running managed "
                            f"container: {', '.join(unseen[:5])}")
        nodes = tuple(Node(name=h.node, cpu_capacity=h.cores,
                           cpu_usage=sum(self.stats.latest_cores(c.id) for c in h.containers),
                           speed=h.speed)
                      for h in sorted(poll.hosts, key=lambda h: h.node))
        pending = pending_jobs([h for host in poll.hosts for h in host.held], set(chosen),
                               warnings)
        return Snapshot(time=now, nodes=nodes, containers=tuple(containers),
                        intervals=dict(intervals or {}), pending=pending), warnings
