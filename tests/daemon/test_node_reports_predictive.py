"""Node agents that set Predictive's CPU limits on their node and report its waiting jobs to the
manager (`node_reports: true`, a Predictive policy with `migrate`): what an agent applies and
publishes, and the moves the manager's source reads back (`policyd.sources.node_reports`)."""

from __future__ import annotations

import io
import threading
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from policyd.daemon.app import run
from policyd.daemon.backend import Parts
from policyd.daemon.metrics import DaemonMetrics
from policyd.daemon.roles import node_agent_policies
from policyd.engine import decide
from policyd.engine.predictive_reports import node_reports
from policyd.model import Migrate, SetCpu, Snapshot
from policyd.model.node_report import WAITING_FIGURES
from policyd.sim import scenarios
from policyd.sim.world import World
from policyd.sources.node_reports import NodeReportSource, ReportedSource
from policyd.tick import FixedSource, observe
from tests.daemon.fakes import FakeActuator
from tests.daemon.test_kubernetes import k8s_settings
from tests.daemon.test_node_reports import (
    Answering,
    agent_tick,
    limits_as_one_snapshot,
    read_back_without,
    samples,
    vector,
)
from tests.engine.test_predictive_reports import POLICY, moves, shipped


@cache
def mid_run() -> Snapshot:
    """specon-random-50-8w under the shipped Predictive policy at 405 s: a job waiting for a
    core on worker-4 and worker-2 with one to spare (the policy's next tick moves it)."""
    world = World(scenarios.build("specon-random-50-8w"), policies=(shipped(),))
    world.run_until(405)
    return observe(world, shipped())


def unlimited(snap: Snapshot) -> Snapshot:
    """`snap` with every job's limit back at 1, as if no policy had run: the plan sets some."""
    return replace(snap, containers=tuple(replace(c, cpu_allocation=1.0)
                                          for c in snap.containers))


def waiting_node(snap: Snapshot) -> str:
    return next(r.node for r in node_reports(shipped(), snap) if r.waiting)


def test_a_node_agent_sets_its_nodes_limits_and_reports_its_waiting_jobs() -> None:
    snap, p = unlimited(mid_run()), shipped()
    node = waiting_node(snap)
    registry, actuator = agent_tick(p, snap, node)
    # the agent's part: the limits of its node's jobs, no move (the manager's)
    assert not any(isinstance(a, Migrate) for a in actuator.applied)
    assert {a.container for a in actuator.applied} <= {c.id for c in snap.containers
                                                       if c.node == node}
    applied = [a for a in actuator.applied if isinstance(a, SetCpu)]
    assert applied and applied == actuator.applied
    # one snapshot's limits on this node; a job the manager moves also gets its limit from
    # its agent (one snapshot leaves a moving job's limit alone: docs/design.md)
    whole = decide(p, snap)
    moving = {a.container for a in whole.actions if isinstance(a, Migrate)}
    assert moving and moving <= {a.container for a in applied}
    limits_as_one_snapshot(applied, whole, node)
    # its report: every waiting job's figures (forecast from its node's jobs alone, so equal
    # to the whole cluster's to the last bits of the fits' sums)
    (mine,) = [r for r in node_reports(p, snap) if r.node == node]
    assert mine.waiting
    found = samples(registry)
    at = (("node", node), ("policy", p.name))
    assert found[("policyd_node_report_selected_jobs", at)] == mine.selected
    for w in mine.waiting:
        key = (("container", w.container), *at)
        for figure in WAITING_FIGURES:
            assert found[(f"policyd_node_report_waiting_{figure}", key)] == \
                pytest.approx(getattr(w, figure), rel=1e-9)
    assert not any(name == "policyd_node_report_jobs" for name, _ in found)  # SpeCon's


def test_the_manager_moves_from_the_reports_what_it_moves_from_every_container() -> None:
    snap, p = mid_run(), shipped()
    registry = CollectorRegistry()
    DaemonMetrics(registry).node_reports.publish(p.name, node_reports(p, snap))
    source = NodeReportSource("http://prom", client=Answering(vector(registry)),
                              clock=lambda: snap.time)
    manager = source.snapshot([p])
    assert source.last_warnings == ()
    assert manager.node_reports == node_reports(p, snap)
    found = decide(p, manager)
    assert moves(found) == moves(decide(p, snap))
    assert moves(found) == [("job-13", "worker-4", "worker-2")]
    assert not any(isinstance(a, SetCpu) for a in found.actions)  # the agents' part


def test_a_waiting_job_missing_a_figure_is_left_out_with_a_warning() -> None:
    snap, p = mid_run(), shipped()
    node = waiting_node(snap)
    reports, warnings = read_back_without(p.name, node_reports(p, snap),
                                          "policyd_node_report_waiting_best_cores", node,
                                          now=snap.time)
    (kept,) = [r for r in reports if r.node == node]
    assert kept.waiting == () and kept.selected > 0
    assert any(node in w and "left out" in w for w in warnings)


def test_only_a_predictive_policy_that_moves_jobs_is_reported() -> None:
    p = shipped()
    part = p.model_copy(update={"spec": p.spec.model_copy(update={"migrate": False})})
    assert node_agent_policies([p]) == []
    assert node_agent_policies([p], node_reports=True) == [p]
    assert node_agent_policies([part]) == [part]  # of scope node: the agent's own


def test_the_managers_source_sends_predictive_to_the_reports_only_when_it_moves_jobs() -> None:
    snap, p = mid_run(), shipped()
    registry = CollectorRegistry()
    DaemonMetrics(registry).node_reports.publish(p.name, node_reports(p, snap))
    everything = FixedSource(snap)
    source = ReportedSource(everything, NodeReportSource(
        "http://prom", client=Answering(vector(registry)), clock=lambda: snap.time))
    assert source.snapshot([p]).containers == ()  # from the reports
    without_moves = p.model_copy(update={"spec": p.spec.model_copy(update={"migrate": False})})
    assert source.snapshot([without_moves]) is snap  # of scope node: every container


def test_policyd_run_a_node_agent_sets_its_nodes_limits_and_publishes_its_report(
        tmp_path: Path) -> None:
    """`policyd run --node` with `node_reports: true` and only the shipped Predictive policy
    (it moves jobs, so it is cluster-wide): the agent starts, applies its node's limits and
    publishes its node's report."""
    snap = unlimited(mid_run())
    node = waiting_node(snap)
    agent_runs_and_publishes(tmp_path, POLICY, snap, node,
                             "policyd_node_report_waiting_ahead_seconds")


def agent_runs_and_publishes(tmp_path: Path, policy_file: Path, snap: Snapshot, node: str,
                             metric: str) -> None:
    """`policyd run --node NODE --once` with `node_reports: true` and only `policy_file`, on
    `snap`: it exits 0, applies CPU limits on its node only and publishes its node's report,
    `metric` among it."""
    settings = k8s_settings(tmp_path, policy_file).model_copy(update={"node_reports": True})
    registry, out, actuator = CollectorRegistry(), io.StringIO(), FakeActuator()
    code = run(settings, out=out, stop=threading.Event(), once=True, node=node,
               registry=registry,
               parts=Parts(source=FixedSource(snap), actuator=actuator, events=None))
    assert code == 0, out.getvalue()
    assert {dict(labels)["node"] for _, labels in samples(registry)} == {node}
    assert any(name == metric for name, _ in samples(registry))
    assert actuator.applied and all(isinstance(a, SetCpu) and a.node == node
                                    for a in actuator.applied)
