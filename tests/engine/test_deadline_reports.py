"""Deadline split across node agents and the manager: the reports, and whole scenarios played
both ways (`policyd.engine.deadline_reports`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from policyd.engine import decide
from policyd.engine.deadline import DeadlinePolicy, node_reports, plan
from policyd.engine.deadline_reports import node_part
from policyd.engine.registry import KINDS
from policyd.engine.schedule import Schedule
from policyd.model import Admit, AtRiskJob, Decision, Migrate, NodeReport, Snapshot
from policyd.model.codec import SnapshotError, snapshot_from_dict, snapshot_to_dict
from policyd.policy.loader import load_policies
from policyd.sim import scenarios
from policyd.sim.world import World
from policyd.tick import Outcome, observe
from tests.engine.split_world import SplitWorld, reported

POLICY = Path(__file__).resolve().parents[2] / "policies" / "deadline.yaml"


def shipped(**update: object) -> DeadlinePolicy:
    """The shipped Deadline policy (it moves and admits jobs), with `update` to its spec."""
    (p,) = load_policies(POLICY)
    assert isinstance(p, DeadlinePolicy) and p.spec.migrate and p.spec.admit
    return p.model_copy(update={"spec": p.spec.model_copy(update=update)})


def placements(decision: Decision) -> list[tuple[str, str, str]]:
    """The decision's moves and admissions: (container, from or "held", to)."""
    found = [(a.container, a.from_node, a.to_node) for a in decision.actions
             if isinstance(a, Migrate)]
    found += [(a.container, "held", a.node) for a in decision.actions if isinstance(a, Admit)]
    return sorted(found)


class WholeWorld(World):
    """The cluster deciding from one snapshot, its placements kept (`placed`)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.placed: list[tuple[float, str, str, str]] = []

    def _tick(self, schedule: Schedule) -> Schedule:
        p = schedule.policy
        decision = decide(p, observe(self, p, schedule.interval_seconds), peers=self.policies,
                          forecasts=False)
        self.placed += [(self.now, *x) for x in placements(decision)]
        for action in decision.actions:
            self.apply(action, decision)
        self.outcomes.append((self.now, Outcome(decision=decision)))
        return schedule.ran(decision, self.now)


def test_the_agent_sizes_and_the_manager_places() -> None:
    p = shipped()
    part = node_part(p)
    assert (part.name, part.spec.migrate, part.spec.admit) == (p.name, False, False)
    kind = KINDS.of(p)
    assert kind.scope_of(p) == "cluster" and kind.scope_of(part) == "node"
    assert kind.acts_on_of(part) == {"cpu"}
    assert kind.reports_of(p) and not kind.reports_of(part)
    assert kind.scope_of(shipped(migrate=False)) == "cluster"  # it still admits
    assert kind.scope_of(shipped(admit=False)) == "cluster"  # it still moves


def snapshot_mid_run(name: str, at_seconds: float, p: DeadlinePolicy) -> Snapshot:
    world = World(scenarios.build(name), policies=(p,))
    world.run_until(at_seconds)
    return observe(world, p)


def test_reports_carry_spare_cores_and_the_jobs_a_move_could_save() -> None:
    p = shipped()
    snap = snapshot_mid_run("deadline-insufficient", 300, p)
    reports = node_reports(p, snap)
    assert [r.node for r in reports] == [n.name for n in snap.nodes]
    per_node = min(p.spec.safety.max_migrations_per_node, p.spec.safety.max_migrations_per_cycle)
    for r in reports:
        assert r.selected == sum(1 for c in snap.containers if c.node == r.node)
        assert len(r.at_risk) <= per_node
        assert r.spare_cores <= r.cpu_capacity_cores + 1e-9
        assert 0 < r.top_cores <= r.cpu_capacity_cores + 1e-9 or not r.selected
        for j in r.at_risk:
            assert j.granted_cores < j.need_here_cores <= j.need_elsewhere_cores <= j.cap_cores
    assert placements(plan(p, reported(p, snap))) == placements(plan(p, snap))


def test_a_snapshot_of_reports_survives_its_json() -> None:
    p = shipped()
    manager = reported(p, snapshot_mid_run("deadline-insufficient", 300, p))
    again = snapshot_from_dict(snapshot_to_dict(manager))
    assert again.node_reports == manager.node_reports
    assert [j.id for j in again.pending] == [j.id for j in manager.pending]
    assert placements(plan(p, again)) == placements(plan(p, manager))


def test_an_at_risk_job_needs_finite_figures() -> None:
    job = AtRiskJob(container="a", deadline_seconds=-5.0, need_elsewhere_cores=1.5,
                    cap_cores=2, reserved_cores=1, granted_cores=0.5, need_here_cores=1.2)
    with pytest.raises(ValueError, match="need_elsewhere_cores"):
        replace(job, need_elsewhere_cores=float("inf"))
    with pytest.raises(ValueError, match="granted_cores"):
        replace(job, granted_cores=-1.0)
    with pytest.raises(ValueError, match="top_cores"):
        NodeReport(policy="p", node="w1", time=0, cpu_capacity_cores=2, cpu_used_cores=1,
                   selected=0, top_cores=float("nan"))


def test_without_migrate_nothing_at_risk_is_reported() -> None:
    p = shipped(migrate=False)
    snap = snapshot_mid_run("deadline-insufficient", 300, p)
    assert not any(r.at_risk for r in node_reports(p, snap))


class CheckedWorld(WholeWorld):
    """Deciding from one snapshot, and at every tick also from the reports of that snapshot:
    the placements of the two are kept side by side."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.from_reports: list[tuple[float, str, str, str]] = []

    def _tick(self, schedule: Schedule) -> Schedule:
        p = schedule.policy
        snap = observe(self, p, schedule.interval_seconds)
        manager = decide(p, reported(p, snap), peers=self.policies, forecasts=False)
        self.from_reports += [(self.now, *x) for x in placements(manager)]
        return super()._tick(schedule)


@pytest.mark.parametrize("name", ["deadline-sufficient", "deadline-insufficient"])
def test_from_the_reports_of_a_snapshot_the_manager_places_as_the_snapshot_does(
        name: str) -> None:
    """Whole scenarios with the shipped Deadline policy: at every tick, the moves and
    admissions decided from the node reports of the tick's snapshot (and its held jobs) are
    those decided from the snapshot itself."""
    world = CheckedWorld(scenarios.build(name), policies=(shipped(),))
    world.run()
    assert len([x for x in world.placed if x[2] == "held"]) == len(world.scenario.jobs)
    assert world.from_reports == world.placed
    if name == "deadline-insufficient":
        assert any(frm != "held" for _, _, frm, _ in world.placed), "no move to compare"


@pytest.mark.parametrize("name", ["deadline-sufficient", "deadline-insufficient"])
def test_split_across_agents_and_manager_the_deadlines_are_met_as_often(name: str) -> None:
    """The same scenarios with every tick split as with `node_reports` (the agents size, the
    manager moves and admits). The one difference in kind, an admitted job's worker making
    room at the agents' next tick rather than at once, changes the run from there on; what it
    must not change is the outcome: every job admitted, moves where one snapshot moves, the
    deadlines met as often (one either way) and the average completion time within 5 %."""
    scenario = scenarios.build(name)
    whole = WholeWorld(scenario, policies=(shipped(),))
    whole.run()
    split = SplitWorld(scenario, policies=(shipped(),))
    split.run()
    ours, theirs = split.result("policy"), whole.result("policy")
    admitted = [x for _, d in split.managed for x in placements(d) if x[1] == "held"]
    assert len(admitted) == len(scenario.jobs)
    assert ours.migrations > 0 or not theirs.migrations
    assert abs(ours.deadlines_met - theirs.deadlines_met) <= 1
    assert ours.avg_jct == pytest.approx(theirs.avg_jct, rel=0.05)


def test_an_at_risk_job_missing_a_figure_in_a_snapshot_file_is_named() -> None:
    p = shipped()
    raw = snapshot_to_dict(reported(p, snapshot_mid_run("deadline-insufficient", 300, p)))
    report = next((r for r in raw["node_reports"] if r.get("at_risk")), None)
    assert report is not None, "no at-risk job at 300 s: pick another moment"
    del report["at_risk"][0]["cap_cores"]
    with pytest.raises(SnapshotError, match=r"at_risk\[0\]\.cap_cores"):
        snapshot_from_dict(raw)
