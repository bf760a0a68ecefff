"""Each job's forecast on /metrics: when policyd expects it to be done.

Every decision carries a forecast per job, or a note why there is none
(`policyd.engine.decide`); `policyd plan` shows them, and this collector puts the latest
decision's on the daemon's /metrics, so that a dashboard or an alert answers "when will my job
be done" without running anything. A collector, not gauges: each decision replaces its policy's
forecasts whole, so a job that has finished, or no longer has a forecast, leaves no series.

Names and labels (docs/settings.md, "Metrics"):

* `policyd_job_finish_timestamp_seconds{policy,container,node,estimate}`: when the job is
  predicted to finish at its current allocation (Unix seconds); `estimate` = `expected` (the
  forecast's point), `earliest` and `latest` (its range). Time left is this less `time()`.
* `policyd_job_forecasts{policy,state}`: the jobs of the policy's latest decision with a
  forecast (`forecast`) and without one (`none`: too few samples, no steps reported, a loss
  that does not fall...; `policyd plan` says why for each). A manager deciding from node
  reports forecasts nothing itself (its agents publish their jobs'): its jobs are not counted.

A timestamp rather than seconds left: it stays right between two decisions, where seconds left
would be as old as the decision. One job in several policies (their selectors overlap) is
published under each; a node agent publishes its own node's jobs. Three series a job: 30,000
for a cluster-wide policy that reads 10,000 containers, as many as its category series times
three.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from policyd.model import Assessment, Decision

ESTIMATES = ("expected", "earliest", "latest")


@dataclass(frozen=True)
class _Published:
    """One policy's latest decision's forecasts: (container, node, expected, earliest,
    latest) finish times, and how many of its jobs had none."""

    finishes: tuple[tuple[str, str, float, float, float], ...]
    without: int


def _published(time: float, assessments: Iterable[Assessment]) -> _Published:
    """Each forecast's seconds (left, low, high: counted from the decision's `time`) as
    finish times."""
    finishes = []
    without = 0
    for a in assessments:
        f = a.forecast
        if f is None:
            # a job the forecast step judged and could not forecast says why; one it never
            # judged (a manager's answer to a node report) is not counted
            without += bool(a.forecast_note)
            continue
        row = (time + f.remaining_seconds, time + f.low_seconds, time + f.high_seconds)
        if all(math.isfinite(x) for x in row):
            finishes.append((a.container, a.node, *row))
        else:
            without += 1
    return _Published(finishes=tuple(finishes), without=without)


class ForecastCollector(Collector):
    """The latest decision's forecasts of every policy (module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._policies: dict[str, _Published] = {}

    def publish(self, policy: str, decision: Decision) -> None:
        """The forecasts of `decision` (a tick of `policy`) replace the policy's last ones."""
        published = _published(decision.time, decision.assessments)
        with self._lock:
            self._policies[policy] = published

    def forget(self, policy: str) -> None:
        with self._lock:
            self._policies.pop(policy, None)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            policies = sorted(self._policies.items())
        finish = GaugeMetricFamily(
            "policyd_job_finish_timestamp_seconds",
            "When the job is predicted to finish at its current allocation (Unix seconds): "
            "expected, and the forecast's range (earliest, latest).",
            labels=["policy", "container", "node", "estimate"])
        counts = GaugeMetricFamily(
            "policyd_job_forecasts",
            "Jobs of the policy's latest decision with a forecast and without one.",
            labels=["policy", "state"])
        for policy, published in policies:
            for container, node, *times in published.finishes:
                for estimate, value in zip(ESTIMATES, times, strict=True):
                    finish.add_metric([policy, container, node, estimate], value)
            counts.add_metric([policy, "forecast"], float(len(published.finishes)))
            counts.add_metric([policy, "none"], float(published.without))
        yield finish
        yield counts

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """The families without samples, so that registering does not call `collect`."""
        yield GaugeMetricFamily("policyd_job_finish_timestamp_seconds", "",
                                labels=["policy", "container", "node", "estimate"])
        yield GaugeMetricFamily("policyd_job_forecasts", "", labels=["policy", "state"])
