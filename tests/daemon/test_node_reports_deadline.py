"""Node agents that size Deadline's jobs on their node and report what a move or an admission
needs to the manager (`node_reports: true`, a Deadline policy): what an agent applies and
publishes, and the moves and admissions the manager decides from what its source reads back
(`policyd.sources.node_reports`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from prometheus_client import CollectorRegistry

from policyd.daemon.metrics import DaemonMetrics
from policyd.daemon.roles import node_agent_policies
from policyd.engine import decide
from policyd.engine.deadline import node_reports
from policyd.engine.spec import PolicyDocument
from policyd.model import Admit, Migrate, PendingJob, SetCpu, Snapshot
from policyd.model.node_report import AT_RISK_FIGURES
from policyd.sim import scenarios
from policyd.sim.world import World
from policyd.sources.node_reports import NodeReportSource, ReportedSource
from policyd.tick import FixedSource, observe
from tests.daemon.test_node_reports import (
    Answering,
    agent_tick,
    limits_as_one_snapshot,
    read_back_without,
    samples,
    vector,
)
from tests.daemon.test_node_reports_predictive import agent_runs_and_publishes
from tests.engine.test_deadline_reports import POLICY, placements, shipped


@cache
def mid_run() -> Snapshot:
    """deadline-insufficient under the shipped Deadline policy at 420 s: 11 jobs held, and jobs
    their worker cannot give the cores their deadline needs (the tick moves two, admits one)."""
    world = World(scenarios.build("deadline-insufficient"), policies=(shipped(),))
    world.run_until(420)
    return observe(world, shipped())


@dataclass(frozen=True)
class WithHeldJobs(FixedSource):
    """A source that also lists the held jobs alone (`policyd.sources.node_reports.HeldJobs`),
    counting how often it is asked."""

    asked: list[int]

    def held(self, policies: Sequence[PolicyDocument]) -> tuple[PendingJob, ...]:
        self.asked.append(len(policies))
        return self.fixed.pending


def manager_source(snap: Snapshot, registry: CollectorRegistry) -> tuple[ReportedSource,
                                                                          list[int]]:
    asked: list[int] = []
    return ReportedSource(WithHeldJobs(snap, asked), NodeReportSource(
        "http://prom", client=Answering(vector(registry)), clock=lambda: snap.time)), asked


def at_risk_node(snap: Snapshot) -> str:
    return next(r.node for r in node_reports(shipped(), snap) if r.at_risk)


def test_a_node_agent_sizes_its_nodes_jobs_and_reports_its_at_risk_ones() -> None:
    snap, p = mid_run(), shipped()
    node = at_risk_node(snap)
    registry, actuator = agent_tick(p, snap, node)
    # the agent's part: its node's limits, as one snapshot sets them there (without the held
    # jobs: one snapshot makes room for a job it admits at once, an agent at its next tick);
    # no move, no admission (the manager's). A job the manager moves may also get a limit from
    # its agent (one snapshot leaves a moving job's limit alone).
    assert actuator.applied and all(isinstance(a, SetCpu) and a.node == node
                                    for a in actuator.applied)
    whole = decide(p, replace(snap, pending=()))
    assert any(isinstance(a, Migrate) for a in whole.actions)
    limits_as_one_snapshot(actuator.applied, whole, node)
    (mine,) = [r for r in node_reports(p, snap) if r.node == node]
    found = samples(registry)
    at = (("node", node), ("policy", p.name))
    assert found[("policyd_node_report_spare_cores", at)] == mine.spare_cores
    assert found[("policyd_node_report_top_cores", at)] == mine.top_cores
    for j in mine.at_risk:
        key = (("container", j.container), *at)
        for figure in AT_RISK_FIGURES:
            assert found[(f"policyd_node_report_at_risk_{figure}", key)] == getattr(j, figure)


def test_the_manager_moves_and_admits_from_the_reports_what_one_snapshot_does() -> None:
    snap, p = mid_run(), shipped()
    registry = CollectorRegistry()
    DaemonMetrics(registry).node_reports.publish(p.name, node_reports(p, snap))
    source, asked = manager_source(snap, registry)
    manager = source.snapshot([p])
    assert source.reports.last_warnings == ()
    assert manager.containers == () and manager.node_reports == node_reports(p, snap)
    assert manager.pending == snap.pending and asked == [1]
    found = decide(p, manager)
    assert placements(found) == placements(decide(p, snap))
    assert any(isinstance(a, Migrate) for a in found.actions)
    assert any(isinstance(a, Admit) for a in found.actions)
    assert not any(isinstance(a, SetCpu) for a in found.actions)  # the agents' part


def test_an_at_risk_job_missing_a_figure_is_left_out_with_a_warning() -> None:
    snap, p = mid_run(), shipped()
    node = at_risk_node(snap)
    reports, warnings = read_back_without(p.name, node_reports(p, snap),
                                          "policyd_node_report_at_risk_cap_cores", node,
                                          now=snap.time)
    (kept,) = [r for r in reports if r.node == node]
    assert kept.at_risk == () and kept.selected > 0 and kept.top_cores > 0
    assert any(node in w and "at-risk" in w and "left out" in w for w in warnings)


def test_held_jobs_go_only_to_a_reported_policy_that_admits() -> None:
    snap, p = mid_run(), shipped()
    moves_only = p.model_copy(update={"spec": p.spec.model_copy(update={"admit": False})})
    registry = CollectorRegistry()
    DaemonMetrics(registry).node_reports.publish(p.name, node_reports(moves_only, snap))
    source, asked = manager_source(snap, registry)
    assert source.snapshot([moves_only]).pending == () and asked == []
    # a source that cannot list held jobs alone sees none in its snapshots either
    plain = ReportedSource(FixedSource(replace(snap, pending=())), source.reports)
    assert plain.snapshot([p]).pending == ()
    # sized on each node on its own: a node agent's policy, every container
    neither = p.model_copy(update={"spec": p.spec.model_copy(
        update={"admit": False, "migrate": False})})
    assert source.snapshot([neither]) is snap
    assert node_agent_policies([neither]) == [neither]
    assert node_agent_policies([p]) == [] and node_agent_policies([p], node_reports=True) == [p]


def test_policyd_run_a_node_agent_sizes_its_nodes_jobs_and_publishes_its_report(
        tmp_path: Path) -> None:
    """`policyd run --node` with `node_reports: true` and only the shipped Deadline policy (it
    moves and admits jobs, so it is cluster-wide): the agent starts, applies its node's limits
    and publishes its node's report."""
    snap = mid_run()
    node = at_risk_node(snap)
    agent_runs_and_publishes(tmp_path, POLICY, snap, node,
                             "policyd_node_report_at_risk_need_elsewhere_cores")
