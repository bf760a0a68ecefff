"""policyd's own Prometheus metrics, on a registry passed in (never the global one).

One `DaemonMetrics` per daemon; `record_outcome` turns a tick's `Outcome` into counters and the
per-container category gauge. Series of the category gauge are removed when a container leaves
the decision (or changes category), and every series of a policy when the policy is removed,
so a long-running daemon does not accumulate dead series.

Metric names and labels (the contract dashboards and alert rules rely on):

* `policyd_actions_total{policy,kind,result,dry_run}`: result = applied | failed
* `policyd_migrations_total{policy,from,to,dry_run}`: migrations applied (Migrate actions)
* `policyd_tick_duration_seconds{policy}`: histogram of wall time per tick
* `policyd_source_errors_total{policy,kind}`: kind = `policyd.sources.errors.KINDS`
* `policyd_ticks_total{policy,result}`: result = ok | source_error | error
* `policyd_job_category{policy,container,node,category}`: 1 for the current category
* `policyd_interval_seconds{policy}`: the policy's current (backed-off) interval
* `policyd_policy_reload_errors_total`: hot reloads rejected (the last good policies stay)
* `policyd_qoe_ratio{policy,container,node,state}`: a job measured against its QoE target,
  measured / target in the better direction (>= 1 meets it); state = satisfied | short |
  infeasible
* `policyd_qoe_short_seconds{policy,container,node}`: how long the job has been short
* `policyd_qoe_alerting{policy,container,node}`: 1 when short for the policy's
  `alert_after_seconds` (the PolicydQoeShort rule), else 0
* `policyd_jobs_delivered_total{policy,event,response}`: ticks that found a job delivered
  (event = target | converged; response = notify | deprioritize | stop); a job stays delivered,
  so a notify is counted on every tick it is seen
* each job's predicted finish: `policyd.daemon.forecast_metrics`
* deadlines and admission: `policyd.daemon.deadline_metrics`
* a node agent's reports for the manager (`node_reports: true`):
  `policyd.daemon.node_report_metrics`
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from policyd.daemon.deadline_metrics import DeadlineMetrics
from policyd.daemon.forecast_metrics import ForecastCollector
from policyd.daemon.node_report_metrics import NodeReportCollector
from policyd.model import Assessment, Migrate
from policyd.tick import Outcome

TICK_RESULTS = ("ok", "source_error", "error")
_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def _flag(value: bool) -> str:
    return "true" if value else "false"


class DaemonMetrics:
    """The daemon's metrics on `registry` (see the module docstring for names and labels)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.actions = Counter("policyd_actions", "Actions policyd carried out or tried.",
                               ["policy", "kind", "result", "dry_run"], registry=registry)
        self.migrations = Counter("policyd_migrations", "Containers migrated between nodes.",
                                  ["policy", "from", "to", "dry_run"], registry=registry)
        self.tick_duration = Histogram("policyd_tick_duration_seconds",
                                       "Wall time of one collect-decide-apply tick.",
                                       ["policy"], buckets=_BUCKETS, registry=registry)
        self.source_errors = Counter("policyd_source_errors",
                                     "Snapshots that could not be read, by error kind.",
                                     ["policy", "kind"], registry=registry)
        self.ticks = Counter("policyd_ticks", "Ticks run, by result.", ["policy", "result"],
                             registry=registry)
        self.job_category = Gauge("policyd_job_category",
                                  "1 for each container's current category.",
                                  ["policy", "container", "node", "category"],
                                  registry=registry)
        self.interval = Gauge("policyd_interval_seconds",
                              "The policy's current evaluation interval (FlowCon back-off).",
                              ["policy"], registry=registry)
        self.reload_errors = Counter("policyd_policy_reload_errors",
                                     "Policy reloads rejected; the last good policies stay.",
                                     registry=registry)
        self.deadlines = DeadlineMetrics(registry)
        self.qoe_ratio = Gauge("policyd_qoe_ratio",
                               "A job's QoE metric over its target (>= 1 meets it).",
                               ["policy", "container", "node", "state"], registry=registry)
        self.qoe_short = Gauge("policyd_qoe_short_seconds",
                               "How long a job has been short of its QoE target.",
                               ["policy", "container", "node"], registry=registry)
        self.qoe_alerting = Gauge("policyd_qoe_alerting",
                                  "1 when a job has been short of its QoE target for the "
                                  "policy's alert_after_seconds.",
                                  ["policy", "container", "node"], registry=registry)
        self.delivered = Counter("policyd_jobs_delivered",
                                 "Ticks that found a job at its target loss or converged.",
                                 ["policy", "event", "response"], registry=registry)
        self.node_reports = NodeReportCollector()
        registry.register(self.node_reports)
        self.forecasts = ForecastCollector()
        registry.register(self.forecasts)
        self._lock = threading.Lock()
        self._categories: dict[str, set[tuple[str, str, str]]] = {}
        self._qoe: dict[str, set[tuple[str, str, str]]] = {}

    def record_outcome(self, policy: str, outcome: Outcome, *, dry_run: bool,
                       duration_seconds: float | None = None) -> None:
        """Count a tick that produced a decision: its actions, migrations and categories."""
        flag = _flag(dry_run)
        failed = {id(action) for action, _ in outcome.failed}
        for action in outcome.decision.actions:
            result = "failed" if id(action) in failed else "applied"
            self.actions.labels(policy, action.kind, result, flag).inc()
            if isinstance(action, Migrate) and result == "applied":
                self.migrations.labels(policy, action.from_node, action.to_node, flag).inc()
        self.ticks.labels(policy, "ok").inc()
        if duration_seconds is not None:
            self.tick_duration.labels(policy).observe(duration_seconds)
        self.set_categories(policy, {(a.container, a.node, a.category)
                                     for a in outcome.decision.assessments
                                     if a.category is not None})
        self.deadlines.record(outcome.decision)
        self.forecasts.publish(policy, outcome.decision)
        self.set_qoe(policy, outcome.decision.assessments)
        for a in outcome.decision.assessments:
            if a.delivery is not None:
                self.delivered.labels(policy, a.delivery.event, a.delivery.response).inc()

    def record_failure(self, policy: str, result: str, *, source_error_kind: str | None = None,
                       duration_seconds: float | None = None) -> None:
        """Count a tick that produced no decision (`result`: source_error | error)."""
        if result not in TICK_RESULTS:
            raise ValueError(f"tick result {result!r} is not one of {TICK_RESULTS}")
        self.ticks.labels(policy, result).inc()
        if source_error_kind is not None:
            self.source_errors.labels(policy, source_error_kind).inc()
        if duration_seconds is not None:
            self.tick_duration.labels(policy).observe(duration_seconds)

    def set_categories(self, policy: str, current: set[tuple[str, str, str]]) -> None:
        """Make `(container, node, category)` the policy's category series: 1 each, others
        removed."""
        with self._lock:
            before = self._categories.get(policy, set())
            for container, node, category in before - current:
                self.job_category.remove(policy, container, node, category)
            for container, node, category in current:
                self.job_category.labels(policy, container, node, category).set(1)
            self._categories[policy] = set(current)

    def set_qoe(self, policy: str, assessments: Iterable[Assessment]) -> None:
        """Make the assessments' QoE standings the policy's QoE series; others removed."""
        current = {(a.container, a.node, a.qoe.state): a.qoe for a in assessments
                   if a.qoe is not None}
        with self._lock:
            for container, node, state in self._qoe.get(policy, set()) - set(current):
                self.qoe_ratio.remove(policy, container, node, state)
            alive = {(c, n) for c, n, _ in current}
            for container, node, _ in self._qoe.get(policy, set()):
                if (container, node) not in alive:
                    for gauge in (self.qoe_short, self.qoe_alerting):
                        with contextlib.suppress(KeyError):
                            gauge.remove(policy, container, node)
            for (container, node, state), status in current.items():
                self.qoe_ratio.labels(policy, container, node, state).set(
                    min(status.ratio, 1e9))
                self.qoe_short.labels(policy, container, node).set(status.short_seconds)
                self.qoe_alerting.labels(policy, container, node).set(
                    1.0 if status.alerting else 0.0)
            self._qoe[policy] = set(current)

    def set_interval(self, policy: str, seconds: float) -> None:
        self.interval.labels(policy).set(seconds)

    def forget_policy(self, policy: str) -> None:
        """Remove the series of a policy that is gone (counters keep their history)."""
        self.set_categories(policy, set())
        self.deadlines.forget_policy(policy)
        self.node_reports.forget(policy)
        self.forecasts.forget(policy)
        self.set_qoe(policy, ())
        with self._lock:
            self._categories.pop(policy, None)
            self._qoe.pop(policy, None)
        with contextlib.suppress(KeyError):
            self.interval.remove(policy)
