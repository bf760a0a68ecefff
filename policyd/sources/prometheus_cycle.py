"""A cycle's Prometheus queries sent and their answers read, the same way by every source that
reads Prometheus (`prometheus.PrometheusSource`, and the kubernetes, docker-stats and
cadvisor-rest sources, which read the CPU and the facts elsewhere).

A source builds the cycle's queries (`promql.build_queries`), sends them with `send_cycle` on a
batch of its pool (`prometheus_connect.prometheus_pool`, `query_pool`: one after the other, or
several at once), and reads the answers with `evaluation_matrix`, `progress_from` and
`metrics_from`. The answers are taken in the order the queries were once sent in, one after the
other (evaluation, CPU, the facts, the progress pair, the metrics), so that the first failure in
that order is the cycle's error whichever failed first in time: the same setting, the same
threads' clients, the same order of failures for all of them.

What a failure costs: the evaluation query's (or an answer that is not a range result) is the
cycle's `SourceError`, the caller's to count and log; the progress pair's only empties the
jobs' progress and a metric's only leaves its targets unmeasured, each a warning for the cycle
(`log_warnings` logs them), never a lost decision.

Must not: make clients or classify a query's failure (`prometheus_connect`), build queries
(`promql`), parse the evaluation and the facts (`parse`), or keep state between cycles.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from policyd.model import Snapshot
from policyd.sources.errors import SourceError
from policyd.sources.matrix import Matrix, ResponseShapeError, read_matrix
from policyd.sources.progress import EMPTY as EMPTY_PROGRESS
from policyd.sources.progress import ProgressTable, parse_progress
from policyd.sources.prometheus_connect import PrometheusClient, query_instant, query_range
from policyd.sources.promql import CycleQueries
from policyd.sources.qoe_metrics import attach_metrics
from policyd.sources.query_pool import Batch

LOG = logging.getLogger(__name__)

Call = Callable[[PrometheusClient], Any]
"""One query, sent on the client it is given (on a pool's thread: `query_pool`)."""

Answer = Callable[[], Any]
"""A query's answer once it is in (or its SourceError)."""


def log_warnings(source: str, warnings: tuple[str, ...]) -> tuple[str, ...]:
    """One warning line for a cycle's data problems (the first three quoted), every one at debug
    level; returns them (the source keeps them as `last_warnings`)."""
    if warnings:
        LOG.warning("%s: %d data problems, e.g. %s", source, len(warnings),
                    "; ".join(warnings[:3]))
        for line in warnings:
            LOG.debug("%s: %s", source, line)
    return warnings


def range_call(url: str, query: str, queries: CycleQueries) -> Call:
    """The range query `query` over the cycle's window and steps."""
    return lambda client: query_range(client, url, query, start_seconds=queries.start_seconds,
                                      end_seconds=queries.now_seconds,
                                      step_seconds=queries.step_seconds)


def instant_call(url: str, query: str, queries: CycleQueries) -> Call:
    """The instant query `query` at the cycle's time."""
    return lambda client: query_instant(client, url, query, at_seconds=queries.now_seconds)


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
