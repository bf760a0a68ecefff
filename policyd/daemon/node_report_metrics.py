"""A node agent's reports on its /metrics, for the manager to read through Prometheus.

With `node_reports: true`, a node agent computes, for each policy of a cluster-wide kind that
can decide from reports (`Kind.reports_of`: SpeCon, Predictive with `migrate`, Deadline,
FlowCon2, a policy cluster-wide only because it may stop jobs), its
node's report every interval (`policyd.model.node_report`), and publishes the latest here;
Prometheus scrapes it with the rest of policyd's metrics (the ServiceMonitor of
deploy/kubernetes), and the manager reads every node's with one query
(`policyd.sources.node_reports`). A collector, not gauges: a report replaces the policy's last
one whole, so a request or candidate that is gone leaves no series.

Names and labels (the contract `policyd.sources.node_reports` reads):

* `policyd_node_report_time_seconds{policy,node}`: the snapshot time the report is of
* `policyd_node_report_cpu_capacity_cores{policy,node}`, `..._cpu_used_cores{policy,node}`
* `policyd_node_report_jobs{policy,node,category}`: categorised jobs, category PC | WC | CC
* `policyd_node_report_selected_jobs{policy,node}`: the jobs the policy selects on the node
* `policyd_node_report_unreallocated_jobs{policy,node}`: categorised jobs not reallocated yet
* `policyd_node_report_request_gain{policy,node,container}`: a job asking to be reallocated,
  the gain of its last step
* `policyd_node_report_candidate_converged_seconds{policy,node,container}`: a job Algorithm 5
  may move, its converged duration
* `policyd_node_report_spare_cores{policy,node}` (Predictive, Deadline): the cores the worker's
  plan leaves unused (Deadline: its capacity less what its jobs must keep)
* `policyd_node_report_top_cores{policy,node}` (Deadline): the most cores one job is granted
* `policyd_node_report_waiting_<figure>{policy,node,container}` (Predictive), one series per
  figure of a job waiting for a core: `ahead_seconds`, `best_cores`, `remaining_steps`,
  `serial_seconds`, `parallel_seconds`, `cap_cores` (`policyd.model.node_report.WaitingJob`)
* `policyd_node_report_at_risk_<figure>{policy,node,container}` (Deadline), one series per
  figure of a job its worker cannot give the cores its deadline needs: `deadline_seconds`,
  `need_elsewhere_cores`, `cap_cores`, `reserved_cores`, `granted_cores`, `need_here_cores`
  (`policyd.model.node_report.AtRiskJob`)
* `policyd_node_report_stated_speed{policy,node}` (FlowCon2 and Predictive, when the node's
  speed is stated): its speed against an average core
* `policyd_node_report_resident_<figure>{policy,node,container}` (FlowCon2), one series per
  figure of each job on the worker as FlowCon2's model sees it: `limit_fraction`,
  `usable_cores`, `converged`, `movable`, `forecast` (those three 1 or 0), `steps_done`,
  `remaining_steps`, `serial_seconds`, `parallel_seconds`, `cap_cores`, `allocation_fraction`,
  `started_at_seconds`, and for a movable job its side of a move, `finish_seconds` and
  `freed_seconds` (`policyd.model.node_report.ResidentJob`)
* `policyd_node_report_stop_request{policy,node,container,event}` (any policy that may stop
  jobs): a job the agent would stop, event target | converged, valued its latest loss or its
  remaining improvement (`policyd.model.node_report.StopRequest`)

A kind's own figures are left out when they are zero, as they are in other kinds' reports (a
SpeCon report has no spare cores, a Predictive report no categorised jobs): the manager reads
a missing figure as 0.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from policyd.model import NodeReport
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

_FIGURE_HELP = {
    "time_seconds": "When the node report was made (its snapshot time).",
    "cpu_capacity_cores": "The node's cores.",
    "cpu_used_cores": "Cores in use on the node.",
    "selected_jobs": "Jobs the policy selects on the node.",
    "unreallocated_jobs": "Categorised jobs on the node not reallocated yet.",
}
_WAITING_HELP = {
    "ahead_seconds": "A job waiting for a core: its predicted seconds to finish where it is.",
    "best_cores": "A job waiting for a core: the cores it can use on its worker.",
    "remaining_steps": "A job waiting for a core: its forecast's remaining steps.",
    "serial_seconds": "A job waiting for a core: the serial seconds of a step (speed model).",
    "parallel_seconds": "A job waiting for a core: the parallel seconds of a step on one core.",
    "cap_cores": "A job waiting for a core: the most cores its speed model can use.",
}

_AT_RISK_HELP = {
    "deadline_seconds": "A job short of the cores its deadline needs: its deadline (epoch s).",
    "need_elsewhere_cores": ("A job short of the cores its deadline needs: the cores it needs on "
                             "another worker, the move's cost counted."),
    "cap_cores": "A job short of the cores its deadline needs: the most cores it can use.",
    "reserved_cores": ("A job short of the cores its deadline needs: the cores its worker keeps "
                       "for it."),
    "granted_cores": ("A job short of the cores its deadline needs: the cores its worker gives "
                      "it."),
    "need_here_cores": ("A job short of the cores its deadline needs: the cores it needs on its "
                        "worker."),
}

_RESIDENT = "A job on the worker, as its policy models it: "
_RESIDENT_HELP = {
    "limit_fraction": f"{_RESIDENT}its next limit (a weight, or a quota's cap).",
    "usable_cores": f"{_RESIDENT}the most cores it can use there.",
    "converged": f"{_RESIDENT}1 when the model counts it converged, else 0.",
    "movable": f"{_RESIDENT}1 when its agent lets it move this cycle, else 0.",
    "forecast": f"{_RESIDENT}1 when it has a forecast, else 0.",
    "steps_done": f"{_RESIDENT}its forecast's steps done.",
    "remaining_steps": f"{_RESIDENT}its forecast's remaining steps.",
    "serial_seconds": f"{_RESIDENT}the serial seconds of a step (speed model).",
    "parallel_seconds": f"{_RESIDENT}the parallel seconds of a step on one core.",
    "cap_cores": f"{_RESIDENT}the most cores its speed model can use.",
    "allocation_fraction": f"{_RESIDENT}its current limit.",
    "started_at_seconds": f"{_RESIDENT}when it started (epoch seconds).",
    "finish_seconds": (f"{_RESIDENT}a movable job's side of a move: when it ends where it is as "
                       "the worker drains (seconds from the report's time)."),
    "freed_seconds": (f"{_RESIDENT}a movable job's side of a move: the seconds the jobs left "
                      "there save without it."),
}

_JOB_HELP = {"waiting": _WAITING_HELP, "at_risk": _AT_RISK_HELP, "resident": _RESIDENT_HELP}
"""The help of each job list's series (`JOB_LISTS`, by series name), by figure."""


class NodeReportCollector(Collector):
    """The latest node reports of each policy (module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reports: dict[str, tuple[NodeReport, ...]] = {}

    def publish(self, policy: str, reports: tuple[NodeReport, ...]) -> None:
        """`reports` replace the policy's last ones."""
        with self._lock:
            self._reports[policy] = reports

    def forget(self, policy: str) -> None:
        with self._lock:
            self._reports.pop(policy, None)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            reports = [r for published in self._reports.values() for r in published]
        node = ["policy", "node"]
        families = {figure: GaugeMetricFamily(f"{METRIC_PREFIX}{figure}", _FIGURE_HELP[figure],
                                              labels=node)
                    for figure in NODE_FIGURES}
        jobs = GaugeMetricFamily(f"{METRIC_PREFIX}jobs",
                                 "Categorised jobs on the node, by category.",
                                 labels=[*node, "category"])
        requests = GaugeMetricFamily(
            f"{METRIC_PREFIX}request_gain",
            "A job asking to be reallocated: the gain of its last step.",
            labels=[*node, "container"])
        candidates = GaugeMetricFamily(
            f"{METRIC_PREFIX}candidate_converged_seconds",
            "A job the rebalancing may move: seconds since it was marked converged.",
            labels=[*node, "container"])
        spare = GaugeMetricFamily(f"{METRIC_PREFIX}{SPARE_FIGURE}",
                                  "Cores the node's plan leaves unused.", labels=node)
        top = GaugeMetricFamily(f"{METRIC_PREFIX}{TOP_FIGURE}",
                                "The most cores one job is granted on the node.", labels=node)
        speed = GaugeMetricFamily(f"{METRIC_PREFIX}{SPEED_FIGURE}",
                                  "The node's stated speed against an average core.",
                                  labels=node)
        stops = GaugeMetricFamily(
            f"{METRIC_PREFIX}{STOP_FIGURE}",
            "A job the node agent would stop, for the manager to stop: its latest loss (target) "
            "or its remaining improvement (converged).",
            labels=[*node, "container", "event"])
        listed = {(job_list.series, figure): GaugeMetricFamily(
                      f"{METRIC_PREFIX}{job_list.series}_{figure}",
                      _JOB_HELP[job_list.series][figure], labels=[*node, "container"])
                  for job_list in JOB_LISTS
                  for figure in (*job_list.figures, *job_list.optional)}
        for r in reports:
            at = [r.policy, r.node]
            for figure, field in NODE_FIGURES.items():
                families[figure].add_metric(at, getattr(r, field))
            if r.categorised:
                for category, field in CATEGORY_FIELDS.items():
                    jobs.add_metric([*at, category], getattr(r, field))
            for q in r.requests:
                requests.add_metric([*at, q.container], q.gain)
            for c in r.candidates:
                candidates.add_metric([*at, c.container], c.converged_seconds)
            if r.spare_cores:
                spare.add_metric(at, r.spare_cores)
            if r.top_cores:
                top.add_metric(at, r.top_cores)
            if r.stated_speed:
                speed.add_metric(at, r.stated_speed)
            for s in r.stops:
                stops.add_metric([*at, s.container, s.event], s.figure)
            for job_list in JOB_LISTS:
                for j in getattr(r, job_list.field):
                    for figure in (*job_list.figures, *job_list.optional):
                        value = getattr(j, figure)
                        if value is not None:  # an optional figure not reported
                            listed[(job_list.series, figure)].add_metric(
                                [*at, j.container], float(value))
        yield from (*families.values(), jobs, requests, candidates, spare, top, speed, stops,
                    *listed.values())
