"""Node agents that set FlowCon2's CPU limits on their node and report its jobs as FlowCon2's
model sees them (`node_reports: true`, a FlowCon2 policy): what an agent applies and publishes,
and the moves and admissions the manager decides from what its source reads back
(`policyd.sources.node_reports`)."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CollectorRegistry

from policyd.daemon.metrics import DaemonMetrics
from policyd.daemon.roles import scope_to_node
from policyd.engine import decide
from policyd.engine.flowcon2 import node_reports
from policyd.model import Migrate, SetCpu
from policyd.model.node_report import RESIDENT_FIGURES, RESIDENT_SIDE_FIGURES
from policyd.policy.loader import load_policies
from tests.daemon.test_node_reports import (
    agent_tick,
    limits_as_one_snapshot,
    read_back_without,
    samples,
)
from tests.daemon.test_node_reports_deadline import manager_source
from tests.daemon.test_node_reports_predictive import agent_runs_and_publishes, unlimited
from tests.engine.test_flowcon2_reports import mid_run, placements, shipped

POLICY = Path(__file__).resolve().parents[2] / "policies" / "flowcon2.yaml"


def movable_node() -> str:
    """A node with a job its agent flags movable, whose limits the tick changes."""
    p, snap = shipped(order="growth"), mid_run("growth")
    limited = {a.node for a in decide(p, snap).actions if isinstance(a, SetCpu)}
    return next(r.node for r in node_reports(p, snap)
                if r.node in limited and any(j.movable for j in r.residents))


def test_a_node_agent_sets_its_nodes_limits_and_reports_its_jobs() -> None:
    snap, p = mid_run("growth"), shipped(order="growth")
    node = movable_node()
    registry, actuator = agent_tick(p, snap, node)
    # the agent's part: its node's limits as one snapshot sets them there, no move, no
    # admission (the manager's); a job the manager moves may also get a limit from its agent
    assert actuator.applied and all(isinstance(a, SetCpu) and a.node == node
                                    for a in actuator.applied)
    limits_as_one_snapshot(actuator.applied, decide(p, snap), node)
    # its report as it makes it, from its node's snapshot (forecasts fitted on its node's jobs
    # alone may differ from the whole snapshot's in the last digits)
    (mine,) = node_reports(p, scope_to_node(snap, node))
    found = samples(registry)
    at = (("node", node), ("policy", p.name))
    assert found[("policyd_node_report_stated_speed", at)] == mine.stated_speed > 0
    assert mine.residents and any(j.movable for j in mine.residents)
    for j in mine.residents:
        key = (("container", j.container), *at)
        for figure in RESIDENT_FIGURES:
            assert found[(f"policyd_node_report_resident_{figure}", key)] == getattr(j, figure)
        for figure in RESIDENT_SIDE_FIGURES:  # a movable job's side of a move, only
            assert found.get((f"policyd_node_report_resident_{figure}", key)) == getattr(j, figure)
            assert (getattr(j, figure) is not None) == j.movable


def test_the_manager_moves_and_admits_from_the_reports_what_one_snapshot_does() -> None:
    snap, p = mid_run("growth"), shipped(order="growth")
    registry = CollectorRegistry()
    DaemonMetrics(registry).node_reports.publish(p.name, node_reports(p, snap))
    source, _ = manager_source(snap, registry)
    manager = source.snapshot([p])
    assert source.reports.last_warnings == ()
    assert manager.containers == () and manager.node_reports == node_reports(p, snap)
    found = decide(p, manager)
    assert placements(found) == placements(decide(p, snap))
    assert any(isinstance(a, Migrate) for a in found.actions)
    assert not any(isinstance(a, SetCpu) for a in found.actions)  # the agents' part


def test_a_resident_job_missing_a_figure_leaves_its_nodes_report_out_with_a_warning() -> None:
    snap, p = mid_run("growth"), shipped(order="growth")
    node = movable_node()
    reports, warnings = read_back_without(p.name, node_reports(p, snap),
                                          "policyd_node_report_resident_remaining_steps", node,
                                          now=snap.time)
    assert node not in {r.node for r in reports} and len(reports) == len(snap.nodes) - 1
    assert any(node in w and "resident job" in w and "left out" in w for w in warnings)


def test_policyd_run_a_node_agent_sets_its_nodes_limits_and_publishes_its_report(
        tmp_path: Path) -> None:
    """`policyd run --node` with `node_reports: true` and only the shipped FlowCon2 policy (it
    moves and admits jobs, so it is cluster-wide): the agent starts, applies its node's limits
    and publishes its node's report."""
    (p,) = load_policies(POLICY)
    snap = unlimited(mid_run("remaining"))
    node = next(a.node for a in decide(p, snap).actions if isinstance(a, SetCpu))
    agent_runs_and_publishes(tmp_path, POLICY, snap, node,
                             "policyd_node_report_resident_limit_fraction")
