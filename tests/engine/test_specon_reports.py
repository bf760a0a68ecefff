"""SpeCon split across node agents and the manager: the reports, and the same moves as the
one-snapshot planner (`policyd.engine.specon_reports`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import pytest

from policyd.engine.registry import KINDS
from policyd.engine.spec import PolicyDocument
from policyd.engine.specon import plan
from policyd.engine.specon_reports import node_reports
from policyd.model import Decision, MarkMigrated, Migrate, NodeReport, Snapshot
from policyd.model.codec import snapshot_from_dict, snapshot_to_dict
from policyd.sim import scenarios
from policyd.sim.run import run
from policyd.sim.world import World
from tests.engine.specon_builders import (
    CC_GAINS,
    NOW,
    PC_GAINS,
    REQUEST_GAINS,
    WC_GAINS,
    cluster,
    job,
    policy,
)


def moves(decision: Decision) -> list[tuple[object, ...]]:
    """What a decision does, without its reasons' wording."""
    out: list[tuple[object, ...]] = []
    for a in decision.actions:
        if isinstance(a, Migrate):
            out.append(("migrate", a.container, a.from_node, a.to_node, a.rebalance,
                        dict(a.scores) if a.scores is not None else None))
        elif isinstance(a, MarkMigrated):
            out.append(("stay", a.container, a.node, dict(a.scores)))
        else:
            out.append((type(a).__name__, a.container))
    return out


def reported(p: PolicyDocument, snap: Snapshot) -> Snapshot:
    """The manager's snapshot: no containers, every node's report."""
    return replace(snap, containers=(), node_reports=node_reports(p, snap))


def test_a_node_reports_its_counts_requests_and_load() -> None:
    p = policy()
    snap = cluster(*[job("a", "w1", PC_GAINS), job("b", "w1", WC_GAINS),
                     job("c", "w1", REQUEST_GAINS), job("d", "w2", CC_GAINS, migrated=True,
                                                        converged_at=NOW - 100)],
                    nodes=("w1", "w2"))
    w1, w2 = node_reports(p, snap)
    assert (w1.node, w1.pc, w1.wc, w1.cc, w1.selected, w1.unreallocated) == ("w1", 1, 1, 1, 3, 3)
    assert [r.container for r in w1.requests] == ["c"]
    assert w1.requests[0].gain == pytest.approx(0.004)
    assert (w2.cc, w2.unreallocated, w2.requests) == (1, 0, ())
    assert [(c.container, c.converged_seconds) for c in w2.candidates] == [("d", 100.0)]


def test_an_opted_out_job_is_counted_by_its_agent_never_requested() -> None:
    p = policy()
    opted_out = {"app": "train", "policyd.io/opt-out": "true"}
    snap = cluster(*[job("a", "w1", PC_GAINS), job("b", "w1", PC_GAINS),
                     job("c", "w1", REQUEST_GAINS, labels=opted_out)], nodes=("w1", "w2"))
    (w1, _) = node_reports(p, snap)
    assert (w1.cc, w1.requests) == (1, ())  # counted, never requested


def test_rebalance_candidates_are_as_many_as_a_cycle_may_move_off_a_worker() -> None:
    p = policy()
    per_node = p.spec.safety.max_migrations_per_node
    jobs = [job(f"j{i}", "w1", CC_GAINS, migrated=True, converged_at=NOW - 10 * (i + 1))
            for i in range(per_node + 3)]
    (w1, _) = node_reports(p, cluster(*jobs, nodes=("w1", "w2")))
    assert [c.container for c in w1.candidates] == [f"j{i}" for i in range(per_node)]


def test_line_15_is_read_from_the_reported_counts() -> None:
    """A converged job on a worker without two learning jobs asks nothing (node scope); over
    the cluster the other workers' learning jobs count (cluster scope)."""
    jobs = [job("c", "w1", REQUEST_GAINS), job("p1", "w2", PC_GAINS), job("p2", "w2", PC_GAINS),
            job("p3", "w3", PC_GAINS)]
    snap = cluster(*jobs, nodes=("w1", "w2", "w3"))
    for scope in ("node", "cluster"):
        p = policy(request_scope=scope)
        assert moves(plan(p, reported(p, snap))) == moves(plan(p, snap))
    assert moves(plan(policy(request_scope="node"), reported(policy(), snap))) == []


def test_a_snapshot_of_reports_survives_its_json() -> None:
    p = policy()
    snap = reported(p, cluster(job("c", "w1", REQUEST_GAINS), job("a", "w1", PC_GAINS),
                               job("b", "w1", PC_GAINS), nodes=("w1", "w2")))
    again = snapshot_from_dict(snapshot_to_dict(snap))
    assert again.node_reports == snap.node_reports
    assert moves(plan(p, again)) == moves(plan(p, snap))


def test_a_report_checks_itself() -> None:
    with pytest.raises(ValueError, match="more categorised jobs"):
        NodeReport(policy="s", node="w1", time=NOW, cpu_capacity_cores=2, cpu_used_cores=1,
                   pc=2, wc=0, cc=0, selected=1, unreallocated=0)
    with pytest.raises(ValueError, match="names no node"):
        Snapshot(time=NOW, nodes=(), containers=(), node_reports=(NodeReport(
            policy="s", node="w9", time=NOW, cpu_capacity_cores=2, cpu_used_cores=1, pc=0,
            wc=0, cc=0, selected=0, unreallocated=0),))


class ReportedWorld(World):
    """A simulated cluster whose SpeCon manager sees only its agents' reports."""

    def snapshot(self, policies: Sequence[PolicyDocument], *,
                 intervals: Mapping[str, float] | None = None) -> Snapshot:
        snap = super().snapshot(policies, intervals=intervals)
        reports = tuple(r for p in policies if (make := KINDS.of(p).node_reports) is not None
                        for r in make(p, snap))
        return replace(snap, containers=(), node_reports=reports) if reports else snap


@pytest.mark.parametrize("name", ["specon-fixed-20", "specon-random-20", "specon-random-50-8w"])
def test_the_manager_makes_the_moves_one_snapshot_makes(name: str) -> None:
    """Whole thesis scenarios, every tick decided from the reports: the same moves at the same
    times, the same job completion times, as deciding from every container's series."""
    scenario = scenarios.build(name)
    whole = run(scenario, "policy")
    world = ReportedWorld(scenario, policies=scenario.policies)
    world.run()
    split = world.result("policy")
    assert whole.migrations > 0
    assert split.migrations == whole.migrations
    assert [(j.id, j.jct) for j in split.jobs] == [(j.id, j.jct) for j in whole.jobs]
