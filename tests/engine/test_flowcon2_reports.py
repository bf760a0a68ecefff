"""FlowCon2 split across node agents and the manager: the reports, and whole scenarios played
both ways (`policyd.engine.flowcon2_reports`)."""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from typing import Any

import pytest

from policyd.engine import decide
from policyd.engine.flowcon2 import FlowCon2Policy, node_part, node_reports, plan
from policyd.engine.flowcon2_placement import drained, source_side
from policyd.engine.flowcon2_reports import (
    UNJUDGED,
    _forecast,
    reported_sides,
    worker_model,
)
from policyd.engine.node_speed import unjudged
from policyd.engine.registry import KINDS
from policyd.engine.schedule import Schedule
from policyd.model import (
    Migrate,
    NodeReport,
    PendingJob,
    ResidentJob,
    Snapshot,
)
from policyd.model.codec import SnapshotError, snapshot_from_dict, snapshot_to_dict
from policyd.sim import scenarios
from policyd.sim.run import run
from policyd.sim.world import World
from policyd.tick import Outcome, observe
from tests.engine.split_world import SplitWorld, reported
from tests.engine.test_deadline_reports import placements

HETERO = "flowcon2-8w-60-hetero"


def shipped(name: str = HETERO, **update: Any) -> FlowCon2Policy:
    """The scenario's FlowCon2 policy (policies/flowcon2.yaml's settings: `order: remaining`,
    moves on), with `update` to its spec."""
    (p,) = scenarios.build(name).policies
    assert isinstance(p, FlowCon2Policy) and p.spec.migrate
    return p.model_copy(update={"spec": p.spec.model_copy(update=update)})


@cache
def mid_run(order: str = "growth") -> Snapshot:
    """flowcon2-8w-60-hetero just before its tick at 267.4 s: converged jobs the tick moves
    (three that could gain enough on fast-2 under `order: growth`, more than a cycle may move
    off a worker)."""
    p = shipped(order=order)
    world = World(scenarios.build(HETERO), policies=(p,))
    world.run_until(267.3)
    return observe(world, p)


@pytest.mark.parametrize("order", ["growth", "remaining"])
def test_the_agent_sets_the_limits_and_the_manager_places(order: str) -> None:
    p = shipped(order=order)
    part = node_part(p)
    kind, theirs = KINDS.of(p), KINDS.of(part)
    assert part.name == p.name and part.kind == ("FlowCon" if order == "growth" else "Predictive")
    assert kind.scope_of(p) == "cluster" and theirs.scope_of(part) == "node"
    assert theirs.acts_on_of(part) == {"cpu"}
    assert kind.reports_of(p) and not theirs.reports_of(part)
    assert kind.agent_part(p) == part
    # FlowCon2 does not back off: nor does its agents' FlowCon part
    assert theirs.intervals(part) == kind.intervals(p)


def test_reports_carry_every_workers_jobs_as_the_model_sees_them() -> None:
    p, snap = shipped(order="growth"), mid_run("growth")
    reports = node_reports(p, snap)
    assert [r.node for r in reports] == [n.name for n in snap.nodes]
    for r, n in zip(reports, snap.nodes, strict=True):
        assert r.stated_speed == n.speed and r.selected == len(r.residents)
        assert [j.container for j in r.residents] == sorted(
            c.id for c in snap.containers if c.node == n.name)
        for j in r.residents:
            assert 0 < j.limit_fraction <= 1 and 0 < j.usable_cores <= r.cpu_capacity_cores
            assert not j.movable or (j.converged and j.forecast)
    movable = {r.node: sum(j.movable for j in r.residents) for r in reports}
    per_node = p.spec.safety.max_migrations_per_node
    assert max(movable.values()) > per_node, "no crowded source: pick another moment"
    assert placements(plan(p, reported(p, snap))) == placements(plan(p, snap))
    assert any(frm != "held" for _, frm, _ in placements(plan(p, snap))), "no move to compare"


def test_the_managers_decision_says_what_became_of_each_movable_job() -> None:
    p, snap = shipped(order="growth"), mid_run("growth")
    manager = plan(p, reported(p, snap))
    moved = {a.container for a in manager.actions if isinstance(a, Migrate)}
    flagged = {j.container for r in manager_reports(p, snap) for j in r.residents if j.movable}
    assert {a.container for a in manager.assessments} == flagged and moved <= flagged
    for a in manager.assessments:
        assert a.note.startswith("moves: " if a.container in moved else f"movable on {a.node}")
    assert manager.notes[0] == "from 8 node reports" and manager.next_interval == 20
    assert all(a.reason for a in manager.actions)


def manager_reports(p: FlowCon2Policy, snap: Snapshot) -> tuple[NodeReport, ...]:
    return reported(p, snap).node_reports


def test_a_job_whose_gain_cannot_beat_the_move_is_not_flagged() -> None:
    snap = mid_run("growth")
    dear = shipped(order="growth", migration_cost_seconds=10**6)
    assert not any(j.movable for r in node_reports(dear, snap) for j in r.residents)
    assert not any(j.movable for r in node_reports(shipped(order="growth", migrate=False), snap)
                   for j in r.residents)


def test_a_snapshot_of_reports_survives_its_json() -> None:
    p, snap = shipped(order="growth"), mid_run("growth")
    manager = reported(p, snap)
    again = snapshot_from_dict(snapshot_to_dict(manager))
    assert again.node_reports == manager.node_reports
    assert any(r.stated_speed for r in again.node_reports)
    assert placements(plan(p, again)) == placements(plan(p, manager))


def test_a_resident_job_missing_a_figure_in_a_snapshot_file_is_named() -> None:
    p, snap = shipped(order="growth"), mid_run("growth")
    raw = snapshot_to_dict(reported(p, snap))
    report = next(r for r in raw["node_reports"] if r.get("residents"))
    del report["residents"][0]["usable_cores"]
    with pytest.raises(SnapshotError, match=r"residents\[0\]\.usable_cores"):
        snapshot_from_dict(raw)


def test_a_resident_job_needs_its_figures_in_range_and_its_flags_one_or_zero() -> None:
    job = ResidentJob(container="a", limit_fraction=0.25, usable_cores=2.0, converged=1.0,
                      movable=0.0, forecast=True, steps_done=10, remaining_steps=90,
                      serial_seconds=0.1, parallel_seconds=0.4, cap_cores=2,
                      allocation_fraction=1.0, started_at_seconds=-3.0)  # type: ignore[arg-type]
    assert (job.converged, job.movable, job.forecast) == (True, False, True)
    with pytest.raises(ValueError, match="converged"):
        replace(job, converged=0.5)
    with pytest.raises(ValueError, match="remaining_steps"):
        replace(job, remaining_steps=float("nan"))
    with pytest.raises(ValueError, match="limit_fraction"):
        replace(job, limit_fraction=0.0)
    with pytest.raises(ValueError, match="stated_speed"):
        NodeReport(policy="p", node="w1", time=0, cpu_capacity_cores=2, cpu_used_cores=1,
                   selected=0, stated_speed=-1.0)


def test_unstated_speeds_are_the_average_of_the_stated_ones_and_say_so() -> None:
    p, snap = shipped(order="growth"), mid_run("growth")
    reports = manager_reports(p, snap)
    unstated = {reports[0].node, reports[-1].node}
    manager = reported(p, snap)
    manager = replace(manager, node_reports=tuple(
        replace(r, stated_speed=0.0) if r.node in unstated else r for r in reports))
    decision = plan(p, manager)
    speeds = [r.stated_speed for r in manager.node_reports if r.stated_speed]
    average = sum(speeds) / len(speeds)
    for node in sorted(unstated):
        assert (f"speed of {node} not stated and not judged ({UNJUDGED}): treated as average "
                f"({average:g})") in decision.notes


class CheckedWorld(World):
    """Deciding from one snapshot, and at every tick also from the reports of that snapshot:
    the placements of the two are kept side by side."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.placed: list[tuple[float, str, str, str]] = []
        self.from_reports: list[tuple[float, str, str, str]] = []

    def _tick(self, schedule: Schedule) -> Schedule:
        p = schedule.policy
        snap = observe(self, p, schedule.interval_seconds)
        manager = decide(p, reported(p, snap), peers=self.policies, forecasts=False)
        self.from_reports += [(self.now, *x) for x in placements(manager)]
        decision = decide(p, snap, peers=self.policies, forecasts=False)
        self.placed += [(self.now, *x) for x in placements(decision)]
        for action in decision.actions:
            self.apply(action, decision)
        self.outcomes.append((self.now, Outcome(decision=decision)))
        return schedule.ran(decision, self.now)


@pytest.mark.parametrize(("name", "update"), [
    ("flowcon2-4w-20", {}),
    ("flowcon2-4w-20", {"order": "growth"}),
    (HETERO, {}),
    (HETERO, {"order": "growth"}),
    (HETERO, {"order": "growth", "mode": "quota", "admission": "forecast"}),
])
def test_from_the_reports_of_a_snapshot_the_manager_places_as_the_snapshot_does(
        name: str, update: dict[str, Any]) -> None:
    """Whole scenarios (the workers' speeds stated): at every tick, the moves and admissions
    decided from the node reports of the tick's snapshot (and its held jobs) are those decided
    from the snapshot itself, tick for tick."""
    p = shipped(name, **update)
    world = CheckedWorld(replace(scenarios.build(name), policies=(p,)), policies=(p,))
    world.run()
    assert len([x for x in world.placed if x[2] == "held"]) == len(world.scenario.jobs)
    assert world.from_reports == world.placed
    if name == HETERO or update:
        assert any(frm != "held" for _, _, frm, _ in world.placed), "no move to compare"


@pytest.mark.parametrize("name", ["flowcon2-4w-20", HETERO])
def test_split_across_agents_and_manager_the_jobs_end_as_soon(name: str) -> None:
    """The scenarios with every tick split as with `node_reports` (the agents set the limits,
    the manager moves and admits). The one difference in kind, a job the manager moves getting
    a limit from its agent in the same tick, changes the run from there on; what it must not
    change is the outcome: every job admitted, moves where one snapshot moves, the average
    completion time within 3 %."""
    scenario = scenarios.build(name)
    whole = run(scenario, "policy")
    split = SplitWorld(scenario, policies=scenario.policies)
    split.run()
    ours = split.result("policy")
    admitted = [x for _, d in split.managed for x in placements(d) if x[1] == "held"]
    assert len(admitted) == len(scenario.jobs)
    assert (ours.migrations > 0) == (whole.migrations > 0)
    assert ours.avg_jct == pytest.approx(whole.avg_jct, rel=0.03)


def test_with_no_report_at_all_held_jobs_wait() -> None:
    """A manager that reads no node report (no agent publishes one) has no worker: the held
    jobs wait, the tick does not fail."""
    p, snap = shipped(order="growth"), mid_run("growth")
    held = PendingJob(id="held-1", name="held-1", submitted_at=snap.time - 5,
                      labels={"app": "train"})
    empty = Snapshot(time=snap.time, nodes=(), containers=(), pending=(held,))
    decision = plan(shipped(order="growth", selector=p.spec.selector.model_copy(
        update={"labels": {}})), empty)
    assert [q.container for q in decision.queue] == ["held-1"] and not decision.actions


def without_sides(snap: Snapshot) -> Snapshot:
    """`snap`'s reports as an agent from before the sides of a move would send them."""
    return replace(snap, node_reports=tuple(
        replace(r, residents=tuple(replace(j, finish_seconds=None, freed_seconds=None)
                                   for j in r.residents)) for r in snap.node_reports))


@pytest.mark.parametrize("order", ["growth", "remaining"])
def test_the_sides_agents_report_are_the_managers_own(order: str) -> None:
    """Each movable job's side of a move as its agent reports it is what the manager works out
    on its own model of the worker, to the last digit: the manager places as it does without
    them (reasons and their figures included), draining only the workers a move touches."""
    p = shipped(order=order)
    manager = reported(p, mid_run(order))
    reports = manager.node_reports
    speeds = unjudged({r.node: r.stated_speed or None for r in reports}, UNJUDGED)
    flagged = 0
    for r in reports:
        forecasts = {j.container: _forecast(j) for j in r.residents}
        jobs = worker_model(r.residents, forecasts, speed=speeds.of(r.node), hard=False)
        ends, total = drained(jobs, r.cpu_capacity_cores, speeds.of(r.node))
        for i, j in enumerate(r.residents):
            if j.movable:
                flagged += 1
                assert (j.finish_seconds, j.freed_seconds) == source_side(
                    i, jobs, r.cpu_capacity_cores, speeds.of(r.node), ends=ends, total=total)
            else:
                assert j.finish_seconds is None and j.freed_seconds is None
    assert flagged and reported_sides(reports, speeds, assumed=False).keys() == {
        j.container for r in reports for j in r.residents if j.movable}
    assert plan(p, manager) == plan(p, without_sides(manager))


def test_the_manager_trusts_a_side_only_where_it_prices_the_worker_alike() -> None:
    """A side worked out at another speed (a node whose speed is not stated, priced at the
    average of the stated ones) or on other jobs (a job without a forecast, taken to be the
    typical job under `admission: forecast`) is worked out again by the manager."""
    p = shipped(order="growth")
    reports = reported(p, mid_run("growth")).node_reports
    movable = {r.node: {j.container for j in r.residents if j.movable} for r in reports}
    source = next(node for node, ids in movable.items() if ids)
    unstated = tuple(replace(r, stated_speed=0.0) if r.node == source else r for r in reports)
    speeds = unjudged({r.node: r.stated_speed or None for r in unstated}, UNJUDGED)
    assert speeds.of(source) != 1.0  # the average of the others' stated speeds
    assert not movable[source] & reported_sides(unstated, speeds, assumed=False).keys()
    stated = unjudged({r.node: r.stated_speed or None for r in reports}, UNJUDGED)
    assert movable[source] <= reported_sides(reports, stated, assumed=True).keys()
    # a job there not movable without its forecast
    (there,) = (r for r in reports if r.node == source)
    blinded = next(j.container for j in there.residents if not j.movable)
    blind = tuple(replace(r, residents=tuple(
        replace(j, forecast=False, steps_done=0.0, remaining_steps=0.0, serial_seconds=0.0,
                parallel_seconds=0.0, cap_cores=0.0) if j.container == blinded else j
        for j in r.residents)) if r.node == source else r for r in reports)
    assert movable[source] <= reported_sides(blind, stated, assumed=False).keys()
    assert not movable[source] & reported_sides(blind, stated, assumed=True).keys()
