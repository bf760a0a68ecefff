"""The manager's source for the kinds that decide from node reports: one instant query.

With `node_reports: true`, node agents publish each node's report of a cluster-wide kind
(`policyd.daemon.node_report_metrics`: SpeCon's category counts, CPU, requests and rebalance
candidates; Predictive's spare cores and waiting jobs; Deadline's spare cores, largest grant and
at-risk jobs; FlowCon2's stated speed and resident jobs; the jobs any split policy's agents
would stop) and Prometheus scrapes them; the
manager asks for all of them at once, with when Prometheus last scraped each report:

    {__name__=~"policyd_node_report_.+", policy=~"<the policies>"}
    or label_replace(timestamp(policyd_node_report_time_seconds{policy=~"<the policies>"}),
                     "scraped", "1", "", "")

and builds a snapshot of nodes and reports, with no containers (`Snapshot.node_reports`). The
answer holds one series per node and figure, plus one per request or candidate (one per
figure of a waiting or at-risk job): its size follows the number of workers, not of
containers (FlowCon2's follows its jobs, a dozen figures each, never their samples). A waiting
or at-risk job missing one of its figures is left out with a warning, its node's report kept; a
resident job missing one leaves its node's report out (the manager's model of that worker would
be short of a job). The policies that admit held jobs (Deadline) get them from the manager's
own source (`ReportedSource`): a held job is not on any node yet.

A report older than two of its policy's intervals when Prometheus last scraped it (an agent
that fell behind, or whose ticks hang while its /metrics still answers) is left out with a
warning: that node is not in the manager's picture this cycle, as a node the source cannot see.
Its age is counted at the scrape, not at the query: between the two lies up to one scrape
interval (30 s in deploy/kubernetes), which two intervals of a 15 s policy cannot also hold,
and an agent that stopped has its series ended by Prometheus's staleness. (A backend whose
`timestamp()` gives the query's time, not the sample's, counts the age at the query.) The
interval counted is the longest the kind may back off to: a FlowCon policy's agents report
only every `max_interval_seconds` while their jobs have all converged, while the manager
decides it at its base interval. When two agents report one node (a
rolling update), the newer report wins. A failed query is the cycle's SourceError, as for
every source: no decision.

Must not: decide anything (`policyd.engine.specon_reports` and `predictive_reports` do), or
read containers' series.
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

from policyd import fastjson
from policyd.clients.http_access import HttpAccess
from policyd.engine.registry import KINDS
from policyd.engine.spec import PolicyDocument
from policyd.model import (
    Node,
    NodeReport,
    PendingJob,
    ReallocationRequest,
    RebalanceCandidate,
    Snapshot,
    StopRequest,
)
from policyd.model.node_report import (
    CATEGORY_FIELDS,
    JOB_LISTS,
    METRIC_PREFIX,
    NODE_FIGURES,
    SPARE_FIGURE,
    SPEED_FIGURE,
    STOP_FIGURE,
    TOP_FIGURE,
)
from policyd.model.qoe import DeliveryEvent
from policyd.sources.errors import SourceError
from policyd.sources.prometheus_connect import PrometheusClient, ask, connect_prometheus
from policyd.sources.promql import render_matchers
from policyd.sources.settings import Matcher, regex_literal
from policyd.tick import Source, close_source

LOG = logging.getLogger(__name__)

STALE_INTERVALS = 2.0
"""A report older than this many of its policy's intervals is left out."""
SCRAPED_LABEL = "scraped"
"""The label of the query's series of each report's scrape time (`reports_query`)."""


_JOB_FIGURES = {f"{jobs.series}_{figure}": (jobs, figure)
                for jobs in JOB_LISTS for figure in (*jobs.figures, *jobs.optional)}
"""A job's series' field -> its list and its field in the list's job."""
_FIELDS = {f"{METRIC_PREFIX}{figure}": field for figure, field in (
    *NODE_FIGURES.items(), (SPARE_FIGURE, SPARE_FIGURE), (TOP_FIGURE, TOP_FIGURE),
    (SPEED_FIGURE, SPEED_FIGURE),
    ("jobs", "jobs"), ("request_gain", "request_gain"),
    ("candidate_converged_seconds", "candidate_converged_seconds"), (STOP_FIGURE, STOP_FIGURE),
    *((name, name) for name in _JOB_FIGURES))}
"""A series' metric name -> the report's field (or the list it goes to)."""
_EVENTS: dict[str, DeliveryEvent] = {"target": "target", "converged": "converged"}
"""A stop request's `event` label -> its event."""


def reports_query(policies: Sequence[str]) -> str:
    """The one instant query of a cycle, for `policies` (by name; each an escaped RE2 literal
    in an escaped PromQL string, so no name can widen the query)."""
    names = "|".join(regex_literal(name) for name in sorted(set(policies)))
    reports = render_matchers((Matcher("__name__", "=~", f"{METRIC_PREFIX}.+"),
                               Matcher("policy", "=~", names)))
    times = render_matchers((Matcher("__name__", "=", f"{METRIC_PREFIX}time_seconds"),
                             Matcher("policy", "=~", names)))
    # the scrape's time, a series of its own (`or` matches label sets without the name)
    return f'{reports} or label_replace(timestamp({times}), "{SCRAPED_LABEL}", "1", "", "")'


def parse_reports(result: Sequence[Mapping[str, Any]], *, now: float,
                  max_age_seconds: Mapping[str, float]
                  ) -> tuple[list[NodeReport], list[str]]:
    """The query's `data.result` -> the fresh reports (one per policy and node) and warnings."""
    figures: defaultdict[tuple[str, str, str], dict[str, float]] = defaultdict(dict)
    requests: defaultdict[tuple[str, str, str], list[ReallocationRequest]] = defaultdict(list)
    candidates: defaultdict[tuple[str, str, str], list[RebalanceCandidate]] = defaultdict(list)
    stops: defaultdict[tuple[str, str, str], list[StopRequest]] = defaultdict(list)
    # by report, list and job: the job's figures
    jobs: defaultdict[tuple[str, str, str], dict[str, defaultdict[str, dict[str, float]]]] = \
        defaultdict(lambda: {j.field: defaultdict(dict) for j in JOB_LISTS})
    isfinite = math.isfinite
    for series in result:  # ~8 a worker: kept to dictionary lookups
        labels = series.get("metric") or {}
        field = ("scraped_at" if labels.get(SCRAPED_LABEL) == "1" and "__name__" not in labels
                 else _FIELDS.get(labels.get("__name__", "")))
        policy, node = labels.get("policy"), labels.get("node")
        if field is None or not policy or not node:
            continue
        value = float((series.get("value") or (0, "nan"))[1])
        if not isfinite(value):
            continue
        key = (policy, node, labels.get("instance", ""))
        if field == "jobs":
            category = CATEGORY_FIELDS.get(labels.get("category", ""))
            if category is not None:
                figures[key][category] = value
        elif field == "request_gain":
            if labels.get("container"):
                requests[key].append(ReallocationRequest(container=labels["container"],
                                                         gain=value))
        elif field == "candidate_converged_seconds":
            if labels.get("container"):
                candidates[key].append(RebalanceCandidate(container=labels["container"],
                                                          converged_seconds=value))
        elif field == STOP_FIGURE:
            event = _EVENTS.get(labels.get("event", ""))
            if labels.get("container") and event is not None:
                stops[key].append(StopRequest(container=labels["container"], event=event,
                                              figure=value))
        elif field in _JOB_FIGURES:
            if labels.get("container"):
                listed, figure = _JOB_FIGURES[field]
                jobs[key][listed.field][labels["container"]][figure] = value
        else:
            figures[key][field] = value
    newest: dict[tuple[str, str], NodeReport] = {}
    warnings: list[str] = []
    for key, found in sorted(figures.items()):
        policy, node, instance = key
        lists = _job_lists(jobs[key], key, warnings)
        if lists is None:
            continue
        try:
            report = NodeReport(
                policy=policy, node=node, time=found["time"],
                cpu_capacity_cores=found["cpu_capacity_cores"],
                cpu_used_cores=found["cpu_used_cores"],
                pc=int(found.get("pc", 0)), wc=int(found.get("wc", 0)),
                cc=int(found.get("cc", 0)), selected=int(found.get("selected", 0)),
                unreallocated=int(found.get("unreallocated", 0)),
                requests=tuple(sorted(requests[key], key=lambda q: q.container)),
                candidates=tuple(sorted(candidates[key], key=lambda c: c.container)),
                spare_cores=found.get(SPARE_FIGURE, 0.0), top_cores=found.get(TOP_FIGURE, 0.0),
                stated_speed=found.get(SPEED_FIGURE, 0.0),
                stops=tuple(sorted(stops[key], key=lambda q: q.container)), **lists)
        except (KeyError, ValueError) as exc:
            warnings.append(f"node report of {node} for {policy} ({instance or 'no instance'}) "
                            f"left out: incomplete or inconsistent ({exc})")
            continue
        scraped = found.get("scraped_at")
        age = (scraped if scraped is not None else now) - report.time
        if age > max_age_seconds.get(policy, math.inf):
            when = "when last scraped" if scraped is not None else "now"
            warnings.append(f"node report of {node} for {policy} was {age:.0f} s old {when} "
                            f"(more than {max_age_seconds[policy]:.0f} s): left out; is its "
                            "node agent running?")
            continue
        kept = newest.get((policy, node))
        if kept is None or report.time > kept.time:
            newest[(policy, node)] = report
    return sorted(newest.values(), key=lambda r: (r.policy, r.node)), warnings


def _job_lists(found: Mapping[str, Mapping[str, Mapping[str, float]]],
               key: tuple[str, str, str], warnings: list[str]
               ) -> dict[str, tuple[Any, ...]] | None:
    """One report's lists of jobs (`JOB_LISTS`) from their figures (`found`: by list and
    job), by `NodeReport` field, each in its order; None when a job of a list that must be
    whole cannot be made. `key`: the report's policy, node and instance, for the warnings
    about jobs that could not be made whole (a figure missing, or out of range)."""
    policy, node, instance = key
    lists: dict[str, tuple[Any, ...]] = {}
    for listed in JOB_LISTS:
        made, left_out = [], []
        for container, figures in found[listed.field].items():
            try:
                made.append(listed.make(container=container, **figures))
            except (TypeError, ValueError):
                left_out.append(container)
        ids = ", ".join(sorted(left_out))
        if left_out and listed.whole:
            warnings.append(f"node report of {node} for {policy} ({instance or 'no instance'}) "
                            f"left out: {listed.what} job(s) {ids} incomplete (a figure "
                            "missing or out of range)")
            return None
        if left_out:
            warnings.append(f"node report of {node} for {policy}: {listed.what} job(s) {ids} "
                            "left out: a figure missing or out of range")
        lists[listed.field] = tuple(sorted(made, key=listed.order))
    return lists


class NodeReportSource:
    """The `policyd.tick.Source` of the policies decided from node reports (module
    docstring)."""

    def __init__(self, url: str, *, timeout_seconds: float = 10, retries: int = 2,
                 access: HttpAccess | None = None, client: PrometheusClient | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.url = url.rstrip("/")
        self._owns_client = client is None
        self._client = client if client is not None else connect_prometheus(
            self.url, timeout_seconds=timeout_seconds, retries=retries, access=access)
        self._clock = clock
        self.last_warnings: tuple[str, ...] = ()

    def close(self) -> None:
        """Close the HTTP session of the client it made (a client passed in is the
        caller's)."""
        if self._owns_client:
            close_source(self._client)

    def snapshot(self, policies: Sequence[PolicyDocument], *,
                 intervals: Mapping[str, float] | None = None) -> Snapshot:
        now = float(math.floor(self._clock()))
        current = {p.name: float((intervals or {}).get(p.name)
                                 or KINDS.of(p).intervals(p).base_seconds) for p in policies}
        query = reports_query([p.name for p in policies])
        # The decoded answer and the reports made of it: a few objects a series, no cycles,
        # so no garbage collection until they are done (policyd.fastjson)
        with fastjson.paused_gc():
            answer = ask(self.url, "query", query, lambda: self._client.custom_query(
                query, params={"time": f"{now:.3f}"}))
            if not isinstance(answer, list):
                raise SourceError(kind="bad_response", url=self.url, what="query", query=query,
                                  detail=f"expected a vector, got {type(answer).__name__}")
            reports, warnings = parse_reports(answer, now=now, max_age_seconds={
                p.name: STALE_INTERVALS * max(current[p.name],
                                              KINDS.of(p).intervals(p).longest_seconds)
                for p in policies})
        if not reports:
            warnings.append(f"no node report for {', '.join(current)}: no node agent publishes "
                            "one (node_reports: true in the agents' settings too?)")
        self.last_warnings = tuple(warnings)
        for line in warnings:
            LOG.warning("node reports: %s", line)
        nodes: dict[str, Node] = {}
        for r in reports:
            nodes.setdefault(r.node, Node(name=r.node, cpu_capacity=r.cpu_capacity_cores,
                                          cpu_usage=r.cpu_used_cores))
        return Snapshot(time=now, nodes=tuple(nodes[n] for n in sorted(nodes)), containers=(),
                        intervals=current, node_reports=tuple(reports))


@runtime_checkable
class HeldJobs(Protocol):
    """A source that can list the held jobs alone, without a snapshot's queries (the
    Kubernetes source: its Job watch's; docker-stats: the engines' lists)."""

    def held(self, policies: Sequence[PolicyDocument]) -> tuple[PendingJob, ...]: ...


class ReportedSource:
    """A `policyd.tick.Source` that hands the policies decided from node reports to `reports`
    and every other policy to `source` (the manager with `node_reports: true`). A reported
    policy that admits held jobs (Deadline) gets them from `source`, when it can list them
    alone (`HeldJobs`); a source that cannot sees no held jobs in its snapshots either."""

    def __init__(self, source: Source, reports: NodeReportSource) -> None:
        self.source, self.reports = source, reports
        self._last: object = source

    def close(self) -> None:
        close_source(self.source)
        self.reports.close()

    @property
    def last_warnings(self) -> tuple[str, ...]:
        """The data problems met by whichever source made the last snapshot."""
        return tuple(getattr(self._last, "last_warnings", ()))

    def snapshot(self, policies: Sequence[PolicyDocument], *,
                 intervals: Mapping[str, float] | None = None) -> Snapshot:
        if not policies or not all(KINDS.of(p).reports_of(p) for p in policies):
            self._last = self.source
            return self.source.snapshot(policies, intervals=intervals)
        self._last = self.reports
        snap = self.reports.snapshot(policies, intervals=intervals)
        if isinstance(self.source, HeldJobs) and KINDS.admitting(policies):
            snap = replace(snap, pending=self.source.held(policies))
        return snap

