"""The docker-stats source: Docker hosts without cAdvisor, CPU and facts from the engines
(`docker_poll`), the loss from Prometheus.

`DockerSnapshotSource.snapshot(policies)` (the `policyd.tick.Source` protocol): the policies'
evaluation query as a range (built by `promql.build_queries`, read by `matrix.read_matrix`,
errors classified as `PrometheusSource`'s are: `prometheus_cycle`), matched to containers by
the exporter's `container` label = the container's name, merged with the engines' poll. The
snapshot's container id is the container's name: it is what the exporter labels, and it
survives a migration (the replacement has the same name on another engine; `merged_evaluation`
joins the two series of a moved job). The Prometheus queries (evaluation, the progress pair,
the metrics) go on the source's `query_pool` (`max_concurrent_queries`), and the engines are
polled alongside them in the cycle's own thread (one worker: after the evaluation and progress
queries, as always). The poll is read first and kept second (`DockerStats.read`, `keep`): its
samples enter the rings only once the evaluation query has answered, so a cycle that fails
leaves them as they were.

What a restart of policyd loses: the CPU rings (`docker_poll`: memory only). The first cycle
after a restart has no CPU samples (the engine takes no CPU-based action for one cycle), and
FlowCon's window fills again over `window_intervals`. Markers are not lost: they are Docker
labels, plus what the actuator's state file holds (`extra_markers`).

Must not: talk to the engines itself (`docker_poll`), import actuators (the settings come as
`docker_poll.DockerTargets`), or act on what it reads.
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence

import docker

from policyd.clients.http_access import HttpAccess
from policyd.engine.spec import PolicyDocument
from policyd.model import Container, Markers, Node, PendingJob, Series, Snapshot
from policyd.sources import facts
from policyd.sources.docker_held import pending_jobs
from policyd.sources.docker_labels import label_markers
from policyd.sources.docker_poll import ContainerFacts, DockerStats, DockerTargets, Poll
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

LOG = logging.getLogger(__name__)

EVALUATION_LABEL = "container"
"""The exporter's label naming the container (env POLICYD_CONTAINER, exporters/README.md)."""


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

    def held(self, policies: Sequence[PolicyDocument]) -> tuple[PendingJob, ...]:
        """The held jobs alone (`policyd.sources.node_reports.HeldJobs`): the engines' lists,
        no Prometheus query, no container inspected."""
        held, running, warnings = self.stats.held()
        pending = pending_jobs(held, running, warnings)
        for line in warnings:
            LOG.warning("docker source: %s", line)
        return pending

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
