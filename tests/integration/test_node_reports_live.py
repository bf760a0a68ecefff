"""Node reports through a real Prometheus: two node agents' /metrics scraped, the manager's
source reads every node's report back in one query and decides what one snapshot of every
container decides (`node_reports: true`), for SpeCon, Predictive with `migrate`, Deadline, and
a policy of scope node that may stop jobs."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from policyd.daemon.health import Health
from policyd.daemon.http import StatusServer
from policyd.daemon.metrics import DaemonMetrics
from policyd.engine import decide, report
from policyd.engine.deadline import node_reports as deadline_reports
from policyd.engine.predictive_reports import node_reports as predictive_reports
from policyd.engine.spec import PolicyDocument
from policyd.engine.specon_reports import node_reports
from policyd.model import NodeReport, Snapshot, Stop
from policyd.sources.node_reports import NodeReportSource, reports_query
from policyd.sources.prometheus_connect import connect_prometheus
from tests.daemon.test_node_reports_deadline import mid_run as deadline_mid_run
from tests.daemon.test_node_reports_predictive import mid_run
from tests.daemon.test_node_reports_stops import policy as stopping_policy
from tests.daemon.test_node_reports_stops import with_stops
from tests.engine.specon_builders import cluster, policy, thesis_jobs
from tests.engine.test_deadline_reports import placements
from tests.engine.test_deadline_reports import shipped as deadline_policy
from tests.engine.test_predictive_reports import moves as migrations
from tests.engine.test_predictive_reports import shipped
from tests.engine.test_specon_reports import moves
from tests.integration.servers import LOOPBACK, prometheus

pytestmark = pytest.mark.slow

AGENTS = {"agent-a": ("w1", "w2"), "agent-b": ("w3", "w4")}


def wait_for_reports(source: NodeReportSource, p: PolicyDocument, count: int,
                     timeout_seconds: float) -> None:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if len(source.snapshot([p]).node_reports) == count:
            return
        time.sleep(0.25)
    raise AssertionError(f"{count} node reports not in Prometheus within {timeout_seconds} s: "
                         f"{source.last_warnings}")


def through_prometheus(tmp_path: Path, p: PolicyDocument, reports: tuple[NodeReport, ...],
                       agents: Mapping[str, tuple[str, ...]]) -> Snapshot:
    """The manager's snapshot of `reports`, each published (made now) by the agent of its node
    on its own /metrics, scraped by a real Prometheus every 0.5 s and read in one query."""
    servers = []
    try:
        for nodes in agents.values():
            registry = CollectorRegistry()
            metrics = DaemonMetrics(registry)
            server = StatusServer(LOOPBACK, 0, registry=registry, health=Health())
            server.start()
            servers.append((server, metrics, nodes))
        targets = [f"{LOOPBACK}:{server.port}" for server, _, _ in servers]
        with prometheus(tmp_path, targets, scrape_seconds=0.5) as prom:
            source = NodeReportSource(prom.url, timeout_seconds=5, retries=0)
            now = float(int(time.time()))
            for _, metrics, nodes in servers:  # each agent's reports, made now
                metrics.node_reports.publish(p.name, tuple(
                    replace(r, time=now) for r in reports if r.node in nodes))
            wait_for_reports(source, p, count=len(reports), timeout_seconds=30)
            snap = source.snapshot([p])
            assert source.last_warnings == ()
            # the query's scrape times: one per report, a real sample's time since it was made
            client = connect_prometheus(prom.url, timeout_seconds=5, retries=0)
            answer = client.custom_query(reports_query([p.name]),
                                         params={"time": f"{time.time():.3f}"})
            scraped = [float(x["value"][1]) for x in answer
                       if x["metric"].get("scraped") == "1" and "__name__" not in x["metric"]]
            assert len(scraped) == len(reports), answer
            assert all(now <= at <= time.time() + 1 for at in scraped), scraped
            return snap
    finally:
        for server, _, _ in servers:
            server.close()


def test_the_manager_reads_every_agents_report_from_prometheus(tmp_path: Path) -> None:
    p = policy()
    whole = cluster(*thesis_jobs())
    reports = node_reports(p, whole)
    snap = through_prometheus(tmp_path, p, reports, AGENTS)
    assert [r.node for r in snap.node_reports] == ["w1", "w2", "w3", "w4"]
    assert [replace(r, time=0.0) for r in snap.node_reports] == \
        [replace(r, time=0.0) for r in reports]
    decided = decide(p, snap)
    assert moves(decided) == moves(decide(p, whole))  # the reports were made of it
    assert moves(decided), "the thesis's example moves its converged job"


def test_predictives_waiting_jobs_come_back_whole_and_move_as_from_every_container(
        tmp_path: Path) -> None:
    """Predictive with `migrate` (the shipped policy) on specon-random-50-8w at 405 s, its
    eight workers' reports published by two agents: every figure of every waiting job read
    back exactly, and the move one snapshot of every container makes."""
    p, whole = shipped(), mid_run()
    reports = predictive_reports(p, whole)
    nodes = [n.name for n in whole.nodes]
    snap = through_prometheus(tmp_path, p, reports, {"agent-a": tuple(nodes[:4]),
                                                     "agent-b": tuple(nodes[4:])})
    assert [replace(r, time=0.0) for r in snap.node_reports] == \
        [replace(r, time=0.0) for r in reports]
    assert any(r.waiting for r in snap.node_reports)
    decided = decide(p, snap)
    assert migrations(decided) == migrations(decide(p, whole)) == [
        ("job-13", "worker-4", "worker-2")]


def test_deadlines_at_risk_jobs_come_back_whole_and_are_placed_as_from_every_container(
        tmp_path: Path) -> None:
    """Deadline (the shipped policy) on deadline-insufficient at 420 s, its three workers'
    reports published by two agents: every figure of every at-risk job read back exactly, and
    with the held jobs the moves and the admission one snapshot of every container makes."""
    p, whole = deadline_policy(), deadline_mid_run()
    reports = deadline_reports(p, whole)
    nodes = [n.name for n in whole.nodes]
    snap = through_prometheus(tmp_path, p, reports, {"agent-a": tuple(nodes[:2]),
                                                     "agent-b": tuple(nodes[2:])})
    assert [replace(r, time=0.0) for r in snap.node_reports] == \
        [replace(r, time=0.0) for r in reports]
    assert any(r.at_risk for r in snap.node_reports)
    # at the simulated cluster's time, as its held jobs' deadlines are (the reports were
    # published now)
    decided = decide(p, replace(snap, time=whole.time, pending=whole.pending))
    assert placements(decided) == placements(decide(p, whole))
    assert {frm for _, frm, _ in placements(decided)} >= {"held", "worker-2"}


def test_the_jobs_to_stop_come_back_whole_and_are_stopped_as_from_every_container(
        tmp_path: Path) -> None:
    """A QoE policy with `on_converged` / `on_target: stop` (scope node: its agents decide it)
    on qoe-random-32-4w at its first stop, its four workers' reports published by two agents:
    every job to stop read back with its event and figure, and the stops one snapshot of every
    container makes."""
    p, whole = stopping_policy(), with_stops()
    _, reports = report(p, whole)
    assert any(r.stops for r in reports)
    nodes = [n.name for n in whole.nodes]
    snap = through_prometheus(tmp_path, p, reports, {"agent-a": tuple(nodes[:2]),
                                                     "agent-b": tuple(nodes[2:])})
    assert [replace(r, time=0.0) for r in snap.node_reports] == \
        [replace(r, time=0.0) for r in reports]
    decided = decide(p, snap)
    assert sorted((a.container, a.node, a.event) for a in decided.actions) == sorted(
        (a.container, a.node, a.event) for a in decide(p, whole).actions if isinstance(a, Stop))
