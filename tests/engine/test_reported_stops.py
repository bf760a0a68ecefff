"""A policy that may stop jobs, split across node agents and the manager: the agents decide and
report the jobs to stop, the manager stops them (`policyd.engine.reported_stops`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from policyd.engine import decide, report
from policyd.engine.registry import KINDS
from policyd.engine.reported_stops import take_stops
from policyd.engine.spec import PolicyDocument
from policyd.model import Decision, NodeReport, Snapshot, Stop, StopRequest
from policyd.model.codec import SnapshotError, snapshot_from_dict, snapshot_to_dict
from policyd.sim import scenarios
from policyd.sim.world import World
from policyd.tick import observe
from tests.engine.split_world import SplitWorld


def with_spec(p: PolicyDocument, **update: object) -> PolicyDocument:
    return p.model_copy(update={"spec": p.spec.model_copy(update=update)})


def scenario_policy(name: str, **update: object) -> PolicyDocument:
    (p,) = scenarios.build(name).policies
    return with_spec(p, **update)


def stopping(name: str) -> PolicyDocument:
    return scenario_policy(name, on_converged="stop", on_target="stop")


def test_a_node_policy_that_may_stop_jobs_is_split_and_others_are_not() -> None:
    flowcon = stopping("flowcon-random-10")
    kind = KINDS.of(flowcon)
    assert kind.scope_of(flowcon) == "cluster" and kind.stops_only(flowcon)
    assert kind.reports_of(flowcon) and kind.agent_part(flowcon) is flowcon
    notify = scenario_policy("flowcon-random-10")
    assert kind.scope_of(notify) == "node" and not kind.stops_only(notify)
    assert not kind.reports_of(notify)
    # SpeCon's agents decide nothing: with stop it reads every container
    specon = stopping("specon-random-20")
    assert not KINDS.of(specon).stops_only(specon) and not KINDS.of(specon).reports_of(specon)
    assert KINDS.of(specon).reports_of(scenario_policy("specon-random-20"))


def stops_of(world: World) -> list[tuple[float, str, str, str]]:
    return sorted((t, a.container, a.node, a.event) for t, o in world.outcomes
                  for a in o.decision.actions if isinstance(a, Stop))


@pytest.mark.parametrize("name", ["flowcon-random-10", "qoe-random-32-4w"])
def test_split_the_run_is_the_run_of_one_snapshot(name: str) -> None:
    """Whole scenarios played both ways: the agents' decision without its stops and the
    manager's stops from their reports are, at every tick, the one snapshot's decision, so the
    two runs are the same run: the same stops at the same times, the same completions."""
    p = stopping(name)
    scenario = replace(scenarios.build(name), policies=(p,))
    whole = World(scenario, policies=(p,))
    whole.run()
    split = SplitWorld(scenario, policies=(p,))
    split.run()
    managed = [a for _, d in split.managed for a in d.actions]
    assert all(isinstance(a, Stop) for a in managed)
    assert len(stops_of(split)) == len(managed)  # the agents' part stopped nothing itself
    assert stops_of(split) == stops_of(whole)
    assert len(stops_of(whole)) >= 3, "too few stops to compare"
    ours, theirs = split.result("policy"), whole.result("policy")
    assert [(j.id, j.finish, j.stopped) for j in ours.jobs] == \
        [(j.id, j.finish, j.stopped) for j in theirs.jobs]
    assert {q.event for r in split.reports for q in r.stops} <= {"target", "converged"}
    reason = next(a.reason for _, d in split.managed for a in d.actions)
    assert "reported by the node agent of" in reason


def test_the_agent_applies_everything_but_the_stops() -> None:
    p = stopping("flowcon-random-10")
    world = World(replace(scenarios.build("flowcon-random-10"), policies=(p,)), policies=(p,))
    for seconds in range(200, 1400, 20):
        world.run_until(seconds)
        snap = observe(world, p)
        whole = decide(p, snap)
        if any(isinstance(a, Stop) for a in whole.actions):
            break
    else:
        pytest.fail("no stop in the run")
    local, reports = report(p, snap)
    assert local is not None
    assert [a for a in local.actions] == [a for a in whole.actions if not isinstance(a, Stop)]
    listed = {(q.container, q.event) for r in reports for q in r.stops}
    assert listed == {(a.container, a.event) for a in whole.actions if isinstance(a, Stop)}
    assert sum(r.selected for r in reports) == len(whole.assessments)
    assert any("to stop reported to the manager" in n for n in local.notes)
    stopped = {a.container for a in whole.actions if isinstance(a, Stop)}
    said = [a for a in local.assessments if a.container in stopped]
    assert said and all(a.delivery is not None and a.delivery.response == "stop"
                        and "stop reported to the manager" in a.delivery.reason
                        and "checkpoint kept" not in a.delivery.reason + a.note for a in said)
    manager = decide(p, replace(snap, containers=(), node_reports=reports))
    assert [(a.container, a.node, a.event, a.grace_seconds) for a in manager.actions] == \
        [(a.container, a.node, a.event, a.grace_seconds) for a in whole.actions
         if isinstance(a, Stop)]
    assert manager.next_interval == KINDS.of(p).intervals(p).base_seconds


def test_a_kind_with_reports_of_its_own_lists_its_stops_too() -> None:
    """Predictive with `migrate` and `on_converged: stop`: its agents set the CPU and list the
    jobs to stop beside their waiting jobs; the manager moves and stops."""
    name = "specon-random-20"
    p = KINDS["Predictive"].document.model_validate({
        "apiVersion": "policyd.io/v1alpha1", "kind": "Predictive",
        "metadata": {"name": "predictive-stop"},
        "spec": {"migrate": True, "on_converged": "stop"}})
    kind = KINDS.of(p)
    assert kind.reports_of(p) and not kind.stops_only(p)
    part = kind.agent_part(p)
    assert part is not None and part.spec.migrate is False  # type: ignore[attr-defined]
    world = World(replace(scenarios.build(name), policies=(p,)), policies=(p,))
    for seconds in range(200, 1600, 20):
        world.run_until(seconds)
        snap = observe(world, p)
        local, reports = report(p, snap)
        if any(r.stops for r in reports):
            break
    else:
        pytest.fail("no stop in the run")
    assert local is not None and not any(isinstance(a, Stop) for a in local.actions)
    alone = decide(part, snap)
    assert local.actions == tuple(a for a in alone.actions if not isinstance(a, Stop))
    manager = decide(p, replace(snap, containers=(), node_reports=reports))
    stops = [a for a in manager.actions if isinstance(a, Stop)]
    assert {a.container for a in stops} == {q.container for r in reports for q in r.stops}


def reports_snapshot(stops: tuple[StopRequest, ...]) -> Snapshot:
    report_ = NodeReport(policy="p", node="w1", time=100.0, cpu_capacity_cores=2.0,
                         cpu_used_cores=1.0, selected=2, stops=stops)
    snap = snapshot_from_dict({"time": 100.0, "nodes": [
        {"name": "w1", "cpu_capacity": 2.0, "cpu_usage": 1.0}]})
    return replace(snap, node_reports=(report_,))


def test_stop_requests_survive_the_snapshot_json_and_bad_ones_are_named() -> None:
    stops = (StopRequest(container="a", event="target", figure=0.31),
             StopRequest(container="b", event="converged", figure=0.004))
    snap = reports_snapshot(stops)
    assert snapshot_from_dict(snapshot_to_dict(snap)).node_reports == snap.node_reports
    raw = snapshot_to_dict(snap)
    raw["node_reports"][0]["stops"][1]["event"] = "finished"
    raw["node_reports"][0]["stops"][0]["figure"] = "x"
    with pytest.raises(SnapshotError) as err:
        snapshot_from_dict(raw)
    text = str(err.value)
    assert "node_reports[0].stops[1].event" in text and "stops[0]" in text
    with pytest.raises(ValueError, match="finite"):
        StopRequest(container="a", event="target", figure=float("nan"))


def test_the_manager_stops_with_the_policy_grace_and_a_reason_with_the_figure() -> None:
    p = with_spec(stopping("flowcon-random-10"), stop_grace_seconds=45.0)
    p = p.model_copy(update={"metadata": p.metadata.model_copy(update={"name": "p"})})
    snap = reports_snapshot((StopRequest(container="a", event="target", figure=0.31),
                             StopRequest(container="b", event="converged", figure=0.004)))
    decision = decide(p, snap)
    assert [(a.container, a.node, a.event, a.grace_seconds) for a in decision.actions] == \
        [("a", "w1", "target", 45.0), ("b", "w1", "converged", 45.0)]
    a, b = (x.reason for x in decision.actions)
    assert "latest loss 0.31" in a and "w1" in a
    assert "0.40 % more" in b
    assert decision.assessments == () and "2 job(s) to stop" in decision.notes[0]
    dry = decide(with_spec(p, dry_run=True), snap)
    assert dry.dry_run


def test_a_job_two_reports_list_is_stopped_once_where_the_latest_found_it() -> None:
    """Moved from w1 to w2 after w1's last report: w1's older report and w2's both list it."""
    p = stopping("flowcon-random-10")
    p = p.model_copy(update={"metadata": p.metadata.model_copy(update={"name": "p"})})
    old = NodeReport(policy="p", node="w2", time=80.0, cpu_capacity_cores=2.0,
                     cpu_used_cores=1.0, selected=2,
                     stops=(StopRequest(container="a", event="target", figure=0.31),
                            StopRequest(container="c", event="target", figure=0.2)))
    new = NodeReport(policy="p", node="w1", time=100.0, cpu_capacity_cores=2.0,
                     cpu_used_cores=1.0, selected=1,
                     stops=(StopRequest(container="a", event="target", figure=0.29),))
    snap = replace(snapshot_from_dict({"time": 100.0, "nodes": [
        {"name": n, "cpu_capacity": 2.0, "cpu_usage": 1.0} for n in ("w1", "w2")]}),
        node_reports=(old, new))
    assert [(a.container, a.node) for a in decide(p, snap).actions] == [("a", "w1"), ("c", "w2")]


def test_a_stop_without_a_finite_figure_is_named_not_dropped_silently() -> None:
    stop = Stop(policy="p", container="a", node="w1", event="converged", reason="converged")
    decision = Decision(policy="p", kind="FlowCon", time=100.0, actions=(stop,),
                        assessments=(), next_interval=20.0)  # no forecast behind it
    kept, stops = take_stops(decision, reports_snapshot(()))
    assert kept.actions == () and stops == {}
    assert any("not reported" in n and "a" in n for n in kept.notes)


def test_a_job_the_reports_stop_is_not_moved_too() -> None:
    """Predictive with `migrate` and `on_target: stop`, a waiting job that reached its target:
    one snapshot stops it and drops its move (the delivery step drops every other action of
    the policy on a job it stops); the manager from the reports must not move it and stop it
    in one decision either."""
    from policyd.model import Migrate  # noqa: PLC0415
    from policyd.model import labels as keys  # noqa: PLC0415
    from tests.engine.test_predictive_reports import shipped  # noqa: PLC0415

    p = with_spec(shipped(), on_target="stop")
    world = World(scenarios.build("specon-random-50-8w"), policies=(shipped(),))
    world.run_until(239.09)
    snap = observe(world, p)
    moved = [a.container for a in decide(p, snap).actions if isinstance(a, Migrate)]
    assert moved, "no move at 239 s: pick another moment"
    x = moved[0]
    snap = replace(snap, containers=tuple(
        replace(c, annotations={**c.annotations,
                                keys.TARGET_LOSS: f"{2 * float(c.evaluation.values[-1]):g}"})
        if c.id == x else c for c in snap.containers))
    whole = decide(p, snap)
    assert [type(a).__name__ for a in whole.actions if a.container == x] == ["Stop"]
    _, reports = report(p, snap)
    manager = decide(p, replace(snap, containers=(), node_reports=reports))
    assert [type(a).__name__ for a in manager.actions if a.container == x] == ["Stop"]
