"""Node agents that report SpeCon to the manager (`node_reports: true`): what an agent
publishes, and what the manager's source reads back (`policyd.sources.node_reports`)."""

from __future__ import annotations

import io
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from policyd.daemon.app import run
from policyd.daemon.backend import Parts
from policyd.daemon.metrics import DaemonMetrics
from policyd.daemon.roles import NodeScopedSource, node_agent_policies, watched_kinds
from policyd.daemon.scheduler import Daemon
from policyd.engine import decide
from policyd.engine.spec import PolicyDocument
from policyd.engine.specon_reports import node_reports
from policyd.model import Action, Decision, Migrate, NodeReport, SetCpu, Snapshot
from policyd.sources.errors import SourceError
from policyd.sources.node_reports import (
    NodeReportSource,
    ReportedSource,
    parse_reports,
    reports_query,
)
from policyd.tick import FixedSource
from tests.daemon.fakes import FakeActuator, FakeSource
from tests.daemon.test_kubernetes import SPECON, k8s_settings, two_nodes
from tests.engine.specon_builders import NOW, REQUEST_GAINS, cluster, job, policy, thesis_jobs
from tests.engine.test_specon_reports import moves
from tests.sources.builders import flowcon


class Refusing:
    def apply(self, action: Action, decision: Decision) -> None:
        raise AssertionError(f"a reporting agent applied {action}")


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in registry.collect() for s in family.samples
            if s.name.startswith("policyd_node_report_")}


def agent_tick(policy: PolicyDocument, snapshot: Snapshot, node: str
               ) -> tuple[CollectorRegistry, FakeActuator]:
    """One tick of `node`'s agent, reporting `policy` (`node_reports`), on `snapshot`: where its
    metrics went and what it applied; the tick must have gone well."""
    registry, actuator = CollectorRegistry(), FakeActuator()
    agent = Daemon([policy], source=NodeScopedSource(FixedSource(snapshot), node),
                   actuator=actuator, metrics=DaemonMetrics(registry), scope="node",
                   node_reports=True)
    (report,) = agent.run_once()
    agent.shutdown()
    assert report.result == "ok" and report.outcome is not None
    return registry, actuator


def limits_as_one_snapshot(applied: Sequence[Action], whole: Decision, node: str) -> None:
    """The limits an agent applied on `node` are the ones the one-snapshot decision `whole`
    sets there, but for the jobs `whole` moves: an agent may set a limit on a job its manager
    moves, where one snapshot leaves a moving job's limit alone (docs/design.md)."""
    moving = {a.container for a in whole.actions if isinstance(a, Migrate)}
    assert [(a.container, a.fraction) for a in applied
            if isinstance(a, SetCpu) and a.container not in moving] == [
        (a.container, a.fraction) for a in whole.actions
        if isinstance(a, SetCpu) and a.node == node]


def test_a_node_agent_publishes_its_nodes_report_and_decides_nothing() -> None:
    registry = CollectorRegistry()
    snap = cluster(*thesis_jobs())
    agent = Daemon([policy()], source=NodeScopedSource(FixedSource(snap), "w4"),
                   actuator=Refusing(), metrics=DaemonMetrics(registry), scope="node",
                   node_reports=True)
    (report,) = agent.run_once()
    agent.shutdown()
    assert report.result == "ok"
    found = samples(registry)
    at = (("node", "w4"), ("policy", "specon-test"))
    assert found[("policyd_node_report_jobs", (("category", "PC"), *at))] == 5
    assert found[("policyd_node_report_jobs", (("category", "CC"), *at))] == 1
    assert found[("policyd_node_report_selected_jobs", at)] == 6
    assert found[("policyd_node_report_time_seconds", at)] == NOW
    assert found[("policyd_node_report_request_gain", (("container", "cc"), *at))] == \
        pytest.approx(0.004)


def test_without_node_reports_a_node_agent_leaves_specon_to_the_manager() -> None:
    registry = CollectorRegistry()
    agent = Daemon([policy()], source=FixedSource(cluster(*thesis_jobs())), actuator=Refusing(),
                   metrics=DaemonMetrics(registry), scope="node")
    assert agent.run_once() == []
    agent.shutdown()
    assert samples(registry) == {}


def vector(registry: CollectorRegistry, instance: str = "agent:9100") -> list[dict[str, Any]]:
    """The registry's node-report samples as Prometheus's instant query returns them."""
    return [{"metric": {"__name__": s.name, **s.labels, "instance": instance,
                        "job": "policyd"}, "value": [NOW, repr(s.value)]}
            for family in registry.collect() for s in family.samples
            if s.name.startswith("policyd_node_report_")]


def read_back_without(policy: str, reports: tuple[NodeReport, ...], metric: str, node: str, *,
                      now: float) -> tuple[list[NodeReport], list[str]]:
    """`reports` published and read back as the manager's source parses them, without
    `node`'s series of `metric`."""
    registry = CollectorRegistry()
    DaemonMetrics(registry).node_reports.publish(policy, reports)
    answer = [s for s in vector(registry)
              if not (s["metric"]["__name__"] == metric and s["metric"]["node"] == node)]
    return parse_reports(answer, now=now, max_age_seconds={})


def published(snapshot_nodes: tuple[str, ...], *, time: float = NOW) -> CollectorRegistry:
    """What the agents of `snapshot_nodes` publish of the thesis cluster, in one registry."""
    registry = CollectorRegistry()
    metrics = DaemonMetrics(registry)
    snap = cluster(*thesis_jobs(), time=time)
    p = policy()
    metrics.node_reports.publish(p.name, tuple(r for r in node_reports(p, snap)
                                               if r.node in snapshot_nodes))
    return registry


class Answering:
    """A Prometheus client answering every instant query with `result`."""

    def __init__(self, result: Any) -> None:
        self.result = result
        self.queries: list[str] = []

    def custom_query(self, query: str, params: dict[str, Any] | None = None) -> Any:
        self.queries.append(query)
        return self.result

    def custom_query_range(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the manager's source asks no range")


def test_the_manager_decides_from_the_reports_what_it_decides_from_every_container() -> None:
    everything = ("w1", "w2", "w3", "w4")
    client = Answering(vector(published(everything)))
    source = NodeReportSource("http://prom", client=client, clock=lambda: NOW + 5)
    p = policy()
    snap = source.snapshot([p])
    assert snap.containers == () and [n.name for n in snap.nodes] == list(everything)
    assert client.queries == [reports_query([p.name])]
    whole = cluster(*thesis_jobs(), time=NOW + 5)
    assert moves(decide(p, snap)) == moves(decide(p, whole))
    assert moves(decide(p, snap))  # the thesis's 6.2.3 example moves its converged job


def test_a_stale_report_is_left_out_with_a_warning() -> None:
    fresh = vector(published(("w1", "w2", "w3")))
    old = vector(published(("w4",), time=NOW - 600))
    source = NodeReportSource("http://prom", client=Answering(fresh + old),
                              clock=lambda: NOW + 5)
    snap = source.snapshot([policy()])
    assert [r.node for r in snap.node_reports] == ["w1", "w2", "w3"]
    assert any("w4" in w and "old" in w for w in source.last_warnings)


def scraped(series: list[dict[str, Any]], at: float) -> list[dict[str, Any]]:
    """The query's series of when Prometheus last scraped each report in `series`."""
    return [{"metric": {**{k: v for k, v in s["metric"].items() if k != "__name__"},
                        "scraped": "1"}, "value": [NOW, str(at)]}
            for s in series if s["metric"]["__name__"] == "policyd_node_report_time_seconds"]


def test_a_report_is_judged_by_its_age_when_last_scraped_not_at_the_query() -> None:
    # A 15 s policy (stale after 30 s) whose agents Prometheus scrapes every 30 s: read 45 s
    # after it was made, a report scraped 10 s after it is fresh; one whose agent stopped
    # reporting 95 s before the last scrape (its /metrics still answering) is not.
    made = vector(published(("w1",), time=NOW - 45))
    behind = vector(published(("w2",), time=NOW - 100))
    answer = made + scraped(made, NOW - 35) + behind + scraped(behind, NOW - 5)
    reports, warnings = parse_reports(answer, now=NOW, max_age_seconds={"specon-test": 30.0})
    assert [r.node for r in reports] == ["w1"]
    (warning,) = warnings
    assert "w2" in warning and "95 s old when last scraped (more than 30 s)" in warning
    # without the scrape's time (a backend that gives the query's), the age at the query
    reports, warnings = parse_reports(made, now=NOW, max_age_seconds={"specon-test": 30.0})
    assert reports == [] and "45 s old now" in warnings[0]


def test_the_query_asks_for_each_reports_scrape_time() -> None:
    query = reports_query(["specon"])
    assert query.startswith('{__name__=~"policyd_node_report_.+",policy=~"specon"} or ')
    assert ('label_replace(timestamp({__name__="policyd_node_report_time_seconds",'
            'policy=~"specon"}), "scraped", "1", "", "")') in query


def test_of_two_agents_reporting_one_node_the_newer_wins() -> None:
    older = vector(published(("w1",), time=NOW - 10), instance="old:9100")
    newer = vector(published(("w1",)), instance="new:9100")
    reports, warnings = parse_reports(older + newer, now=NOW, max_age_seconds={})
    assert [(r.node, r.time) for r in reports] == [("w1", NOW)] and warnings == []


def test_an_incomplete_report_is_a_warning_not_a_decision() -> None:
    partial = [s for s in vector(published(("w1",)))
               if s["metric"]["__name__"] != "policyd_node_report_cpu_capacity_cores"]
    reports, warnings = parse_reports(partial, now=NOW, max_age_seconds={})
    assert reports == [] and "incomplete" in warnings[0]


def test_no_report_at_all_says_why() -> None:
    source = NodeReportSource("http://prom", client=Answering([]), clock=lambda: NOW)
    snap = source.snapshot([policy()])
    assert snap.node_reports == () and "no node agent publishes" in source.last_warnings[0]


def test_an_answer_that_is_not_a_vector_is_the_cycles_source_error() -> None:
    source = NodeReportSource("http://prom", client=Answering({"resultType": "matrix"}),
                              clock=lambda: NOW)
    with pytest.raises(SourceError, match="expected a vector"):
        source.snapshot([policy()])


def test_a_reported_job_keeps_its_id_through_the_labels() -> None:
    snap = cluster(job("ml/train-7/trainer", "w1", REQUEST_GAINS),
                   job("a", "w1"), job("b", "w1"), nodes=("w1", "w2"))
    registry = CollectorRegistry()
    DaemonMetrics(registry).node_reports.publish("specon-test", node_reports(policy(), snap))
    reports, _ = parse_reports(vector(registry), now=NOW, max_age_seconds={})
    assert [q.container for r in reports for q in r.requests] == ["ml/train-7/trainer"]


class Recording:
    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def snapshot(self, policies: Any, *, intervals: Any = None) -> Any:
        self.asked.append([p.name for p in policies])
        return cluster(*thesis_jobs())


def test_the_managers_source_routes_specon_to_the_reports_and_flowcon_to_the_cluster() -> None:
    everything = Recording()
    reports = NodeReportSource("http://prom", client=Answering(vector(published(("w1",)))),
                               clock=lambda: NOW)
    source = ReportedSource(everything, reports)
    assert [r.node for r in source.snapshot([policy()]).node_reports] == ["w1"]
    assert source.snapshot([flowcon()]).node_reports == ()
    assert everything.asked == [["fc"]]


def test_a_node_agent_with_only_specon_starts_when_it_reports() -> None:
    assert node_agent_policies([policy()]) == []
    assert [p.name for p in node_agent_policies([policy()], node_reports=True)] == ["specon-test"]


def test_a_reporting_node_agent_watches_the_specon_resources_too() -> None:
    assert "SpeCon" not in watched_kinds("w1", leader=False)
    assert "SpeCon" in watched_kinds("w1", leader=False, node_reports=True)


# --- `policyd run`: the settings' switch, an agent and a manager ------------------------------

def test_policyd_run_with_node_reports_an_agent_reports_and_the_manager_reads_them(
        tmp_path: Path) -> None:
    """A node agent with only the SpeCon policy starts and publishes its node's report; the
    manager sends its SpeCon tick to Prometheus's node reports (here a closed port: that
    tick's source error) while FlowCon still reads the cluster."""
    settings = k8s_settings(tmp_path, tmp_path / "p.yaml", SPECON).model_copy(
        update={"node_reports": True})
    agent_settings = k8s_settings(tmp_path, SPECON).model_copy(update={"node_reports": True})
    registry, out = CollectorRegistry(), io.StringIO()
    code = run(agent_settings, out=out, stop=threading.Event(), once=True, node="w1",
               registry=registry,
               parts=Parts(source=FakeSource(two_nodes), actuator=FakeActuator(), events=None))
    assert code == 0, out.getvalue()
    assert {dict(labels)["node"] for _, labels in samples(registry)} == {"w1"}
    out, actuator = io.StringIO(), FakeActuator()
    code = run(settings, out=out, stop=threading.Event(), once=True,
               parts=Parts(source=FakeSource(two_nodes), actuator=actuator, events=None))
    lines = sorted(out.getvalue().splitlines())
    assert code == 1 and lines[0].startswith("policy fc: ok"), lines
    assert "source_error" in lines[1] and "policyd_node_report_" in lines[1], lines
