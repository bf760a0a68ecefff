"""A client of Prometheus: how every source that reads Prometheus makes one (or a pool of them),
and one query on it, its failures turned into one `SourceError`.

Clients are prometheus-api-client's `PrometheusConnect` (`prometheus_http.FastPrometheusConnect`,
which decodes with orjson) on sessions that authenticate as `policyd.clients.http_access`
says, with policyd's retry policy (`sources.http.retry_policy`). A source that sends a
cycle's queries on threads (`query_pool`) has one client per thread (`prometheus_pool`): no
session is shared between threads.

A query's failure is classified once, here, whatever the source (`classify`): the requests
errors as `sources.http` reads them, the client's `HTTP Status Code 400 (b'{...}')` message
read back into Prometheus's `errorType` and `error` (401 and 403 named as refused credentials),
and an answer that is not a query result as `bad_response`. `ask` raises it as one
`SourceError` naming the URL, the endpoint and the query.

Time: the datetimes handed to the client are UTC-aware (it reads naive ones as local time), and
the exact start and end of a range query are also passed as parameters, which the client sends
in place of its own, rounded to whole seconds.

Must not: build queries (`promql`), read or parse answers (`prometheus_cycle`, `parse`), keep
state between calls, or log (the source that asked says what failed).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol, cast

from prometheus_api_client.exceptions import PrometheusApiClientException

from policyd.clients.http_access import HttpAccess, check_files, session
from policyd.sources.errors import SourceError
from policyd.sources.http import classify_requests, retry_policy
from policyd.sources.prometheus_http import FastPrometheusConnect
from policyd.sources.query_pool import QueryPool

IDENTITY = "identity"
"""The `Accept-Encoding` policyd sends Prometheus unless the settings' `headers` name another
(`gzip` for a server across a slow link). requests asks for gzip by default, and compressing a
10,000-container cycle's 36 MB was 45 % of Prometheus's CPU time for the cycle (0.9 of 2.0 s,
benchmarks/README.md), while loopback or a cluster network carries the plain bytes in tens of
milliseconds."""

MAX_CONCURRENT_QUERIES = 2
"""A cycle's queries in flight at once by default (`prometheus.max_concurrent_queries`, for
every source that reads Prometheus): two, so that policyd decodes one answer while Prometheus
evaluates the next. A 10,000-container FlowCon cycle on Kubernetes (eight queries) with
Prometheus on the same two cores was 0.81-0.85x the sequential one on a quiet host and
0.86x with two busy processes beside it (benchmarks/README.md, prometheus_scale.py,
"Twenty-second session"; a slower host shared with other test suites gave 0.92-1.10x in the
twelfth session, which kept 1 then); a Prometheus on cores of its own gains more. `policyd run`
keeps the query threads' memory in one heap (`policyd.allocator`), so the peak RSS is that of
one query at a time (286 MiB at 10,000 containers, against 358 with glibc's per-thread
heaps). Prometheus itself evaluates up to 20 queries at once by default
(`--query.max-concurrency`); 1 sends them one after the other."""

_STATUS = re.compile(r"HTTP Status Code (\d+) \((.*)\)\s*$", re.DOTALL)


class PrometheusClient(Protocol):
    """The two calls of prometheus-api-client's `PrometheusConnect` that the sources make."""

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


def query_instant(client: PrometheusClient, url: str, query: str, *,
                  at_seconds: float) -> Any:
    """One instant query at `at_seconds`."""
    return ask(url, "query", query, lambda: client.custom_query(
        query, params={"time": _seconds(at_seconds)}))


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
        return QueryPool(lambda: given, workers=workers, name=name, owns_clients=False)
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
