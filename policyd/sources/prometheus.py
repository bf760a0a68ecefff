"""`PrometheusSource`: the cluster as Prometheus sees it, one snapshot per call, a few queries
(`promql`).

This class owns the clock, its pool of query threads and its error counters. The queries come
from `promql` and the parsing from `parse`, both pure; the clients, and what a failed query
means, from `prometheus_connect`; the sending of a cycle's queries and the reading of their
answers from `prometheus_cycle`, which the kubernetes, docker-stats and cadvisor-rest sources
share. Unlike those, this source asks Prometheus for everything: the CPU and the facts too. A
cycle's queries go several at once on threads of the source's own (`query_pool`;
`max_concurrent_queries`, two by default), or one after the other (1), their answers taken in
the same order either way. It keeps no state between calls except counters and the threads'
clients: a failed call raises one `SourceError` (counted, and logged once) and the next call
simply tries again.

Time: `now` is the injected clock's reading rounded down to a whole second, so that the range
queries' steps fall exactly on the engine's boundaries (prometheus-api-client rounds range
ends to whole seconds anyway; `prometheus_connect.query_range` sends the exact ones).

Must not: speak HTTP itself, build queries or parse answers (the modules above), or keep a
cycle's answers after it returns.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from policyd import fastjson
from policyd.clients.http_access import HttpAccess
from policyd.engine.spec import PolicyDocument
from policyd.model import Snapshot
from policyd.sources.errors import SourceError
from policyd.sources.matrix import ResponseShapeError
from policyd.sources.parse import Parsed, parse_cycle
from policyd.sources.prometheus_connect import (
    MAX_CONCURRENT_QUERIES,
    PrometheusClient,
    prometheus_pool,
)
from policyd.sources.prometheus_cycle import log_warnings, metrics_from, progress_from, send_cycle
from policyd.sources.promql import CycleQueries, build_queries
from policyd.sources.query_pool import Batch
from policyd.sources.settings import SourceSettings

LOG = logging.getLogger(__name__)


class PrometheusSource:
    """The `policyd.tick.Source` reading Prometheus (see the module docstring).

    A cycle's queries are sent on up to `max_concurrent_queries` threads at once
    (`policyd.sources.query_pool`: each thread on its own client, made as `connect_prometheus`
    makes one), so that Prometheus evaluates them in parallel and the decoding of one answer
    overlaps the evaluation of the next (two by default); 1 sends them one after the other in
    the calling thread. A `client` passed in is used by every thread.
    """

    def __init__(self, url: str, settings: SourceSettings, *, timeout_seconds: float = 10,
                 retries: int = 2, retry_backoff_seconds: float = 0.5,
                 client: PrometheusClient | None = None, disable_ssl: bool = False,
                 access: HttpAccess | None = None, node: str | None = None,
                 max_concurrent_queries: int = MAX_CONCURRENT_QUERIES,
                 clock: Callable[[], float] = time.time) -> None:
        if not timeout_seconds > 0:
            raise ValueError("timeout_seconds must be positive")
        if retries < 0:
            raise ValueError("retries must be zero or more")
        self.url = url.rstrip("/")
        self.settings = settings
        self.node = node
        """A node agent's node: every query asks for its containers only (`promql`)."""
        self._clock = clock
        self._pool = prometheus_pool(self.url, workers=max_concurrent_queries,
                                     name="prometheus-query", timeout_seconds=timeout_seconds,
                                     retries=retries,
                                     retry_backoff_seconds=retry_backoff_seconds,
                                     disable_ssl=disable_ssl, access=access, client=client)
        self.errors_total: Counter[str] = Counter()
        self.last_warnings: tuple[str, ...] = ()

    @property
    def max_concurrent_queries(self) -> int:
        """How many of a cycle's queries may be out at once."""
        return self._pool.workers

    def observe(self, policies: Sequence[PolicyDocument], *,
                intervals: Mapping[str, float] | None = None) -> Parsed:
        """One cycle: its queries (`promql`), parsed; raises SourceError (counted and logged)."""
        now = float(math.floor(self._clock()))
        queries = build_queries(policies, self.settings, now_seconds=now, intervals=intervals,
                                node=self.node)
        # The decoded answers and the snapshot built from them: millions of objects, no
        # cycles, so no garbage collection until they are done (policyd.fastjson). The query
        # threads decode inside this pause: a batch is settled before the cycle returns.
        with fastjson.paused_gc(), self._pool.batch() as batch:
            return self._observe(queries, intervals, batch)

    def _observe(self, queries: CycleQueries, intervals: Mapping[str, float] | None,
                 batch: Batch[PrometheusClient]) -> Parsed:
        url = self.url
        sent = send_cycle(batch, url, queries)
        try:  # the answers taken in the order they were once sent in: the first failure wins
            evaluated = sent.evaluation()
            used = sent.cpu() if sent.cpu is not None else []
            found = {fact: answer() for fact, answer in sent.facts}
            progress, missed = progress_from(queries, sent.progress)
            try:
                parsed = parse_cycle(evaluation=evaluated, cpu=used, facts_results=found,
                                     queries=queries, settings=self.settings,
                                     intervals=intervals, progress=progress)
            except ResponseShapeError as exc:
                raise SourceError(kind="bad_response", url=url, what="cycle",
                                  query=queries.evaluation, detail=str(exc)) from exc
        except SourceError as err:
            self.errors_total[err.kind] += 1
            LOG.error("prometheus source: %s", err)
            raise
        snapshot, measured = metrics_from(sent.metrics, parsed.snapshot,
                                          self.settings.evaluation_identity_labels)
        parsed = Parsed(snapshot=snapshot, warnings=(*missed, *parsed.warnings, *measured))
        self.last_warnings = log_warnings("prometheus source", parsed.warnings)
        return parsed

    def snapshot(self, policies: Sequence[PolicyDocument], *,
                 intervals: Mapping[str, float] | None = None) -> Snapshot:
        """The cluster now (the `Source` protocol); `intervals` are the policies' current
        (backed-off) intervals, which only the daemon knows."""
        return self.observe(policies, intervals=intervals).snapshot

    def close(self) -> None:
        """Stop the query threads and close their HTTP sessions (the daemon's shutdown)."""
        self._pool.close()
