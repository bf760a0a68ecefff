"""`PrometheusSource`: the cluster as Prometheus sees it, one snapshot per call, a few queries
(`promql`).

This class owns the HTTP (through prometheus-api-client, on sessions that authenticate as
`policyd.clients.http_access` says) and the clock; the queries come from
`promql` and the parsing from `parse`, both pure. A cycle's queries go one after the other, or
(`max_concurrent_queries` above 1) several at once on threads of the source's own
(`query_pool`), their answers taken in the same order either way. It keeps no state between
calls except counters and the threads' clients: a failed call raises one `SourceError` and the
next call simply tries again.

Every source that reads Prometheus (this one, and the kubernetes, docker-stats and
cadvisor-rest sources, which read the CPU and the facts elsewhere) makes its pool with
`prometheus_pool` and sends a cycle's queries with `send_cycle`, and reads the answers with the
same functions (`progress_from`, `metrics_from`, `evaluation_matrix`): the same setting, the
same threads' clients, the same order of failures for all of them.

Time: `now` is the injected clock's reading rounded down to a whole second, so that the range
queries' steps fall exactly on the engine's boundaries (prometheus-api-client rounds range
ends to whole seconds anyway). Datetimes handed to the client are UTC-aware (it reads naive
ones as local time), and the exact start and end are also passed as parameters, which the
client sends in place of its rounded ones.
"""

from __future__ import annotations

import ast
import json
import logging
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, cast

from prometheus_api_client.exceptions import PrometheusApiClientException

from policyd import fastjson
from policyd.clients.http_access import HttpAccess, check_files, session
from policyd.engine.spec import PolicyDocument
from policyd.model import Snapshot
from policyd.sources.errors import SourceError
from policyd.sources.http import classify_requests, retry_policy
from policyd.sources.matrix import Matrix, ResponseShapeError, read_matrix
from policyd.sources.parse import Parsed, parse_cycle
from policyd.sources.progress import EMPTY as EMPTY_PROGRESS
from policyd.sources.progress import ProgressTable, parse_progress
from policyd.sources.prometheus_http import FastPrometheusConnect
from policyd.sources.promql import CycleQueries, build_queries
from policyd.sources.qoe_metrics import attach_metrics
from policyd.sources.query_pool import Batch, QueryPool
from policyd.sources.settings import SourceSettings

LOG = logging.getLogger(__name__)

IDENTITY = "identity"
"""The `Accept-Encoding` policyd sends Prometheus unless the settings' `headers` name another
(`gzip` for a server across a slow link). requests asks for gzip by default, and compressing a
10,000-container cycle's 36 MB was 45 % of Prometheus's CPU time for the cycle (0.9 of 2.0 s,
benchmarks/README.md), while loopback or a cluster network carries the plain bytes in tens of
milliseconds."""

MAX_CONCURRENT_QUERIES = 1
"""A cycle's queries in flight at once by default (`prometheus.max_concurrent_queries`, for
every source that reads Prometheus): one after the other. Four at once (a FlowCon cycle on
Kubernetes is eight queries, the biggest three of them range queries) made a 10,000-container
cycle 0.91-0.92x as long with Prometheus on a core of its own, 0.93-1.06x on two cores it
shared with policyd, and raised the process's peak memory from 275 to 478 MiB
(benchmarks/README.md, prometheus_scale.py, "Twelfth session"): worth it for a Prometheus on
its own machine, which a user opts into."""

_STATUS = re.compile(r"HTTP Status Code (\d+) \((.*)\)\s*$", re.DOTALL)


class PrometheusClient(Protocol):
    """The two calls of prometheus-api-client's `PrometheusConnect` that the source makes."""

    def custom_query(self, query: str, params: dict[str, Any] | None = None) -> Any: ...

    def custom_query_range(self, query: str, start_time: datetime, end_time: datetime,
                           step: str, params: dict[str, Any] | None = None) -> Any: ...


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def _seconds(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")


def _client_error(exc: PrometheusApiClientException) -> tuple[str, str]:
    """(kind, detail) from the client's `HTTP Status Code 400 (b'{...}')` message."""
    match = _STATUS.match(str(exc))
    if match is None:
        return "http", str(exc)
    status, body = int(match.group(1)), match.group(2)
    try:
        raw = ast.literal_eval(body)
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    except (ValueError, SyntaxError):
        text = body
    try:
        doc = json.loads(text)
        error_type, error = str(doc.get("errorType", "")), str(doc.get("error", ""))
    except (ValueError, AttributeError, TypeError):
        error_type, error = "", text.strip()[:200]
    if status in (401, 403):
        return "auth", (f"HTTP {status}: the server refused policyd's credentials (check "
                        f"bearer_token_file, basic_auth, tls_config.cert_file): "
                        f"{error.strip()[:200]}")
    kind = "bad_data" if error_type == "bad_data" else "http"
    return kind, f"HTTP {status}" + (f" {error_type}" if error_type else "") + f": {error}"


def classify(exc: BaseException) -> tuple[str, str] | None:
    """(kind, detail) for an exception a query may raise, or None if it is not ours to catch."""
    found = classify_requests(exc)
    if found is not None:
        return found
    if isinstance(exc, PrometheusApiClientException):
        return _client_error(exc)
    if isinstance(exc, KeyError | TypeError | ValueError):
        return "bad_response", f"the answer is not a Prometheus query result ({exc!r})"
    return None


def ask(url: str, what: str, query: str, call: Callable[[], Any]) -> Any:
    """`call()`, with the errors a query may raise turned into one SourceError naming `url`."""
    try:
        return call()
    except Exception as exc:
        found = classify(exc)
        if found is None:
            raise
        kind, detail = found
        raise SourceError(kind=kind, url=url, what=what, query=query, detail=detail) from exc


def query_range(client: PrometheusClient, url: str, query: str, *, start_seconds: float,
                end_seconds: float, step_seconds: float, what: str = "query_range") -> Any:
    """One range query with exact start/end (the client's own would round them) in UTC."""
    params = {"start": _seconds(start_seconds), "end": _seconds(end_seconds)}
    return ask(url, what, query, lambda: client.custom_query_range(
        query, start_time=_utc(start_seconds), end_time=_utc(end_seconds),
        step=_seconds(step_seconds), params=params))


def log_warnings(source: str, warnings: tuple[str, ...]) -> tuple[str, ...]:
    """One warning line for a cycle's data problems (the first three quoted), every one at debug
    level; returns them (the source keeps them as `last_warnings`)."""
    if warnings:
        LOG.warning("%s: %d data problems, e.g. %s", source, len(warnings),
                    "; ".join(warnings[:3]))
        for line in warnings:
            LOG.debug("%s: %s", source, line)
    return warnings


Call = Callable[[PrometheusClient], Any]
"""One query, sent on the client it is given (on a pool's thread: `query_pool`)."""

Answer = Callable[[], Any]
"""A query's answer once it is in (or its SourceError)."""


def range_call(url: str, query: str, queries: CycleQueries) -> Call:
    """The range query `query` over the cycle's window and steps."""
    return lambda client: query_range(client, url, query, start_seconds=queries.start_seconds,
                                      end_seconds=queries.now_seconds,
                                      step_seconds=queries.step_seconds)


def instant_call(url: str, query: str, queries: CycleQueries) -> Call:
    """The instant query `query` at the cycle's time."""
    return lambda client: ask(url, "query", query, lambda: client.custom_query(
        query, params={"time": _seconds(queries.now_seconds)}))


def progress_calls(url: str, queries: CycleQueries) -> tuple[Call, Call] | None:
    """The cycle's two progress queries (`policyd.sources.progress`: the steps range, the ratio
    instant), or None when no policy needs steps."""
    if queries.steps is None or queries.progress is None:
        return None
    return range_call(url, queries.steps, queries), instant_call(url, queries.progress, queries)


def progress_from(queries: CycleQueries, answers: tuple[Answer, Answer] | None
                  ) -> tuple[ProgressTable, tuple[str, ...]]:
    """The jobs' progress from the two progress answers (`progress_calls`), and why they gave
    nothing when they failed. Progress only informs the forecasts, so a failure here is a
    warning for the cycle, never a lost decision."""
    if answers is None:
        return EMPTY_PROGRESS, ()
    steps, ratios = answers
    try:
        return parse_progress(steps(), ratios()), ()
    except SourceError as err:
        return EMPTY_PROGRESS, (f"no job's progress this cycle (forecasts say so): {err}",)
    except ResponseShapeError as exc:
        return EMPTY_PROGRESS, (f"no job's progress this cycle (forecasts say so): the answer "
                                f"to {queries.steps!r} or {queries.progress!r} is not a query "
                                f"result: {exc}",)


def metric_calls(url: str, queries: CycleQueries) -> list[tuple[str, Call]]:
    """The policies' per-job metrics (`queries.metrics`), one range query each, by name."""
    return [(name, range_call(url, query, queries)) for name, query in queries.metrics]


def metrics_from(answers: Sequence[tuple[str, Answer]], snapshot: Snapshot,
                 identity: tuple[str, ...]) -> tuple[Snapshot, tuple[str, ...]]:
    """`snapshot` with the metrics' answers (`metric_calls`) on its containers
    (`policyd.sources.qoe_metrics`), and the warnings. A metric whose query fails is a warning
    and no value for the cycle (its targets are not measured), never a lost decision for the
    other jobs."""
    results: dict[str, Any] = {}
    warnings: list[str] = []
    for name, answer in answers:
        try:
            results[name] = answer()
        except SourceError as err:
            warnings.append(f"metric {name}: not measured this cycle: {err}")
    try:
        snapshot, placed = attach_metrics(snapshot, results, identity)
    except ResponseShapeError as exc:
        return snapshot, (*warnings, f"metrics not measured this cycle: an answer is not a "
                                     f"query result: {exc}")
    return snapshot, (*warnings, *placed)


@dataclass(frozen=True, kw_only=True)
class Sent:
    """A cycle's queries sent on a batch (`send_cycle`). Their answers are taken in the order
    the queries were once sent in, one after the other (evaluation, CPU, the facts, the
    progress pair, the metrics), so that the first failure in that order is the cycle's error
    whichever failed first in time."""

    evaluation: Answer
    cpu: Answer | None
    facts: list[tuple[str, Answer]]
    progress: tuple[Answer, Answer] | None
    metrics: list[tuple[str, Answer]]


def send_cycle(batch: Batch[PrometheusClient], url: str, queries: CycleQueries, *,
               cpu: bool = True, facts: bool = True) -> Sent:
    """The cycle's queries sent on `batch` (`query_pool`: together on several workers, each
    when its answer is asked for on one): the evaluation range; the CPU range and the facts
    unless the source reads them elsewhere (`cpu`, `facts` False); the progress pair when a
    policy needs steps; the policies' metrics."""
    evaluation = batch.send(range_call(url, queries.evaluation, queries))
    used = (batch.send(range_call(url, queries.cpu, queries))
            if cpu and queries.cpu is not None else None)
    found = [(fact, batch.send(instant_call(url, query, queries)))
             for fact, query in (queries.facts if facts else ())]
    pair = progress_calls(url, queries)
    progress = None if pair is None else (batch.send(pair[0]), batch.send(pair[1]))
    return Sent(evaluation=evaluation, cpu=used, facts=found, progress=progress,
                metrics=[(name, batch.send(call)) for name, call in metric_calls(url, queries)])


def evaluation_matrix(sent: Sent, url: str, queries: CycleQueries) -> Matrix:
    """The evaluation query's answer as a `Matrix`; an answer that is not a range result is
    the cycle's SourceError, as a failed query is."""
    try:
        return read_matrix(sent.evaluation())
    except ResponseShapeError as exc:
        raise SourceError(kind="bad_response", url=url, what="query_range",
                          query=queries.evaluation, detail=str(exc)) from exc


def connect_prometheus(url: str, *, timeout_seconds: float, retries: int,
                       retry_backoff_seconds: float = 0.5, disable_ssl: bool = False,
                       access: HttpAccess | None = None) -> PrometheusClient:
    """prometheus-api-client's `PrometheusConnect` for `url`, with policyd's retry policy,
    answers decoded by orjson (`prometheus_http`) and TLS and authentication as `access` says
    (`policyd.clients.http_access`, on the client's session): the client every source that
    reads Prometheus uses. Answers come uncompressed unless `access.headers` asks otherwise
    (`IDENTITY`)."""
    made = session(access)
    if disable_ssl:
        made.verify = False
    if not any(name.lower() == "accept-encoding" for name in (access.headers if access else {})):
        made.headers["Accept-Encoding"] = IDENTITY
    return cast(PrometheusClient, FastPrometheusConnect(
        url=url, session=made, retry=retry_policy(retries, retry_backoff_seconds),
        timeout=timeout_seconds))  # type: ignore[arg-type]


def prometheus_pool(url: str, *, workers: int, name: str, timeout_seconds: float,
                    retries: int, retry_backoff_seconds: float = 0.5, disable_ssl: bool = False,
                    access: HttpAccess | None = None, client: PrometheusClient | None = None
                    ) -> QueryPool[PrometheusClient]:
    """The `QueryPool` of a source reading Prometheus at `url` (its `max_concurrent_queries`
    are `workers`): each thread's client made as `connect_prometheus` makes one, `access`'s
    certificate, key and CA files checked now rather than at a thread's first query (one gone
    since is that cycle's SourceError). A `client` passed in (tests) is every thread's."""
    if client is not None:
        given = client
        return QueryPool(lambda: given, workers=workers, name=name)
    if access is not None:
        check_files(access)

    def connect() -> PrometheusClient:
        try:
            return connect_prometheus(url, timeout_seconds=timeout_seconds, retries=retries,
                                      retry_backoff_seconds=retry_backoff_seconds,
                                      disable_ssl=disable_ssl, access=access)
        except ValueError as exc:
            raise SourceError(kind="tls", url=url, what="connect", query="",
                              detail=str(exc)) from exc

    return QueryPool(connect, workers=workers, name=name)


class PrometheusSource:
    """The `policyd.tick.Source` reading Prometheus (see the module docstring).

    A cycle's queries are sent on up to `max_concurrent_queries` threads at once
    (`policyd.sources.query_pool`: each thread on its own client, made as `connect_prometheus`
    makes one), so that Prometheus evaluates them in parallel and the decoding of one answer
    overlaps the evaluation of the next; 1, the default, sends them one after the other in the
    calling thread. A `client` passed in is used by every thread.
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
