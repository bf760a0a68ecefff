"""Predictive with `migrate` split across node agents and the manager: the reports, and the
moves of whole scenarios played both ways (`policyd.engine.predictive_reports`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from policyd.engine.predictive import PredictivePolicy, plan
from policyd.engine.predictive_reports import node_part, node_reports
from policyd.engine.registry import KINDS
from policyd.model import Decision, Migrate, NodeReport, Snapshot, WaitingJob
from policyd.model.codec import SnapshotError, snapshot_from_dict, snapshot_to_dict
from policyd.policy.loader import load_policies
from policyd.sim import scenarios
from policyd.sim.run import run
from policyd.sim.world import World
from policyd.tick import observe
from tests.engine.split_world import SplitWorld, reported

POLICY = Path(__file__).resolve().parents[2] / "policies" / "predictive.yaml"


def shipped(**safety: int) -> PredictivePolicy:
    """The shipped Predictive policy (it moves jobs), with `safety` limits changed."""
    (p,) = load_policies(POLICY)
    assert isinstance(p, PredictivePolicy) and p.spec.migrate
    return p.model_copy(update={"spec": p.spec.model_copy(update={
        "safety": p.spec.safety.model_copy(update=safety)})})


def moves(decision: Decision) -> list[tuple[str, str, str]]:
    return sorted((a.container, a.from_node, a.to_node) for a in decision.actions
                  if isinstance(a, Migrate))


def test_the_agent_sets_cpu_and_the_manager_only_moves() -> None:
    p = shipped()
    part = node_part(p)
    assert (part.name, part.spec.migrate, p.spec.migrate) == (p.name, False, True)
    assert KINDS.of(p).scope_of(p) == "cluster" and KINDS.of(part).scope_of(part) == "node"
    assert KINDS.of(p).reports_of(p) and not KINDS.of(part).reports_of(part)


def snapshot_mid_run(name: str, at_seconds: float) -> tuple[World, Snapshot]:
    scenario = scenarios.build(name)
    world = World(scenario, policies=(shipped(),))
    world.run_until(at_seconds)
    return world, observe(world, shipped())


def test_reports_carry_spare_cores_and_the_waiting_jobs_that_could_gain() -> None:
    p = shipped()
    _, snap = snapshot_mid_run("specon-random-50-8w", 600)
    reports = node_reports(p, snap)
    assert [r.node for r in reports] == [n.name for n in snap.nodes]
    per_node = min(p.spec.safety.max_migrations_per_node, p.spec.safety.max_migrations_per_cycle)
    cost = p.spec.migration_cost_seconds * (1 + p.spec.migration_margin)
    for r in reports:
        assert r.selected == sum(1 for c in snap.containers if c.node == r.node)
        assert len(r.waiting) <= per_node
        assert 0 <= r.spare_cores <= r.cpu_capacity_cores + 1e-9
        for w in r.waiting:
            assert w.ahead_seconds - w.remaining_seconds_at(w.best_cores) > cost
    assert any(r.waiting for r in reports), "no waiting job at 600 s: pick another moment"
    assert moves(plan(p, reported(p, snap))) == moves(plan(p, snap))


def test_a_snapshot_of_reports_survives_its_json() -> None:
    p = shipped()
    _, snap = snapshot_mid_run("specon-random-50-8w", 600)
    manager = reported(p, snap)
    again = snapshot_from_dict(snapshot_to_dict(manager))
    assert again.node_reports == manager.node_reports
    assert moves(plan(p, again)) == moves(plan(p, manager))


def test_a_waiting_job_prices_cores_as_its_forecast_does() -> None:
    w = WaitingJob(container="a", ahead_seconds=900, best_cores=2, remaining_steps=1000,
                   serial_seconds=0.2, parallel_seconds=0.8, cap_cores=2)
    assert w.remaining_seconds_at(1) == pytest.approx(1000.0)
    assert w.remaining_seconds_at(2) == pytest.approx(600.0)
    assert w.remaining_seconds_at(4) == w.remaining_seconds_at(2)  # capped
    assert w.remaining_seconds_at(0.5) == pytest.approx(2000.0)
    with pytest.raises(ValueError, match="remaining_steps"):
        replace(w, remaining_steps=float("nan"))
    with pytest.raises(ValueError, match="spare_cores"):
        NodeReport(policy="p", node="w1", time=0, cpu_capacity_cores=2, cpu_used_cores=1,
                   selected=0, spare_cores=float("inf"))


def test_a_waiting_job_a_guard_holds_back_is_not_reported() -> None:
    p = shipped(min_job_age_seconds=10**6)
    _, snap = snapshot_mid_run("specon-random-50-8w", 600)
    assert not any(r.waiting for r in node_reports(p, snap))


@pytest.mark.parametrize("name", ["specon-random-50-8w", "flowcon2-8w-60-hetero"])
def test_the_manager_makes_the_moves_one_snapshot_makes(name: str) -> None:
    """Whole scenarios with the shipped Predictive policy, every tick split as with
    `node_reports`: the same moves, the same job completion times, as one snapshot."""
    scenario = scenarios.build(name)
    whole = run(scenario, "policy", policies=(shipped(),))
    world = SplitWorld(scenario, policies=(shipped(),))
    world.run()
    split = world.result("policy")
    assert whole.migrations > 0
    assert split.migrations == whole.migrations
    assert [(j.id, j.jct) for j in split.jobs] == [(j.id, j.jct) for j in whole.jobs]


def test_a_waiting_job_missing_a_figure_in_a_snapshot_file_is_named() -> None:
    p = shipped()
    _, snap = snapshot_mid_run("specon-random-50-8w", 600)
    raw = snapshot_to_dict(reported(p, snap))
    report = next(r for r in raw["node_reports"] if r.get("waiting"))
    del report["waiting"][0]["best_cores"]
    with pytest.raises(SnapshotError, match=r"waiting\[0\]\.best_cores"):
        snapshot_from_dict(raw)
