"""A node agent's reports on its /metrics, for the manager to read through Prometheus.

With `node_reports: true`, a node agent computes, for each policy of a cluster-wide kind that
can decide from reports (`Kind.node_reports`: SpeCon), its node's report every interval
(`policyd.model.node_report`), and publishes the latest here; Prometheus scrapes it with the
rest of policyd's metrics (the ServiceMonitor of deploy/kubernetes), and the manager reads
every node's with one query (`policyd.sources.node_reports`). A collector, not gauges: a report
replaces the policy's last one whole, so a request or candidate that is gone leaves no series.

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
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from policyd.model import NodeReport

PREFIX = "policyd_node_report_"


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
        families = {
            "time_seconds": GaugeMetricFamily(
                f"{PREFIX}time_seconds", "When the node report was made (its snapshot time).",
                labels=node),
            "cpu_capacity_cores": GaugeMetricFamily(
                f"{PREFIX}cpu_capacity_cores", "The node's cores.", labels=node),
            "cpu_used_cores": GaugeMetricFamily(
                f"{PREFIX}cpu_used_cores", "Cores in use on the node.", labels=node),
            "jobs": GaugeMetricFamily(
                f"{PREFIX}jobs", "Categorised jobs on the node, by category.",
                labels=[*node, "category"]),
            "selected_jobs": GaugeMetricFamily(
                f"{PREFIX}selected_jobs", "Jobs the policy selects on the node.", labels=node),
            "unreallocated_jobs": GaugeMetricFamily(
                f"{PREFIX}unreallocated_jobs",
                "Categorised jobs on the node not reallocated yet.", labels=node),
            "request_gain": GaugeMetricFamily(
                f"{PREFIX}request_gain",
                "A job asking to be reallocated: the gain of its last step.",
                labels=[*node, "container"]),
            "candidate_converged_seconds": GaugeMetricFamily(
                f"{PREFIX}candidate_converged_seconds",
                "A job the rebalancing may move: seconds since it was marked converged.",
                labels=[*node, "container"]),
        }
        for r in reports:
            at = [r.policy, r.node]
            families["time_seconds"].add_metric(at, r.time)
            families["cpu_capacity_cores"].add_metric(at, r.cpu_capacity_cores)
            families["cpu_used_cores"].add_metric(at, r.cpu_used_cores)
            for category, count in (("PC", r.pc), ("WC", r.wc), ("CC", r.cc)):
                families["jobs"].add_metric([*at, category], count)
            families["selected_jobs"].add_metric(at, r.selected)
            families["unreallocated_jobs"].add_metric(at, r.unreallocated)
            for q in r.requests:
                families["request_gain"].add_metric([*at, q.container], q.gain)
            for c in r.candidates:
                families["candidate_converged_seconds"].add_metric([*at, c.container],
                                                                   c.converged_seconds)
        yield from families.values()
