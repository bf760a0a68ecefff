"""Predictive: CPU to the jobs predicted to finish soonest, from their forecasts; the floor,
hysteresis, the makespan's critical job, late jobs, free competition without forecasts, the
guards, and the optional move of a waiting job to a worker with cores to spare."""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

import numpy as np
import pytest

from policyd.engine import decide
from policyd.engine.flowcon import FlowConPolicy
from policyd.engine.forecast_output import Forecast
from policyd.engine.predictive import PredictivePolicy, plan
from policyd.engine.predictive_node import FLOOR, FREE, NEW, SERVED
from policyd.engine.registry import KINDS
from policyd.engine.spec import API_VERSION
from policyd.model import Container, Markers, Migrate, Node, Series, SetCpu, Snapshot

NOW = 1_700_001_000.0
SCRAPE = 5.0


def policy(**spec: Any) -> PredictivePolicy:
    return PredictivePolicy.model_validate({
        "apiVersion": API_VERSION, "kind": "Predictive", "metadata": {"name": "pred"},
        "spec": {"interval_seconds": 20, **spec}})


def job(cid: str, *, done: float, total: float | None, rate: float, node: str = "w1",
        cores: float = 1.0, allocation: float = 1.0, samples: int = 12,
        started_at: float | None = None) -> Container:
    """A job that made `rate` steps a second on `cores` cores over its last `samples` scrapes,
    now at `done` steps of `total`."""
    t = NOW - SCRAPE * np.arange(samples - 1, -1, -1)
    steps = done - rate * (NOW - t)
    loss = 2.0 * np.exp(-steps / 5000.0) + 0.1
    return Container(
        id=cid, name=cid, node=node,
        started_at=started_at if started_at is not None else float(t[0]) - 60.0,
        evaluation=Series.of(t, loss), cpu_usage=Series.of(t[1:], [cores] * (samples - 1)),
        cpu_allocation=allocation, labels={"app": "train"}, markers=Markers(),
        steps=Series.of(t, steps), total_steps=total)


def cluster(*containers: Container, nodes: dict[str, float] | None = None) -> Snapshot:
    nodes = nodes or {"w1": 2.0}
    return Snapshot(time=NOW, nodes=tuple(Node(name=n, cpu_capacity=c) for n, c in nodes.items()),
                    containers=containers)


def limits(decision: Any) -> dict[str, float]:
    return {a.container: round(a.fraction, 3) for a in decision.actions if isinstance(a, SetCpu)}


def categories(decision: Any) -> dict[str, str]:
    return {a.container: a.category for a in decision.assessments}


def test_the_shortest_jobs_get_the_first_cores_and_the_rest_the_floor() -> None:
    # Three jobs on two cores at 10 steps/s on one core: 500, 2000 and 2400 steps left.
    d = plan(policy(), cluster(job("short", done=1500, total=2000, rate=10),
                               job("mid", done=1000, total=3000, rate=10),
                               job("long", done=1000, total=3400, rate=10)))
    assert categories(d) == {"short": SERVED, "mid": SERVED, "long": FLOOR}
    floor = round(1 / (2 * 3), 3)
    assert limits(d) == {"long": floor}  # the two served stay at 1 (shares: full weight)
    reason = next(a.note for a in d.assessments if a.container == "short")
    assert reason.startswith("#1 of 3 by predicted remaining time") and "total steps" in reason


def test_quota_mode_caps_each_job_at_its_grant() -> None:
    d = plan(policy(mode="quota"), cluster(job("short", done=1500, total=2000, rate=10),
                                           job("long", done=1000, total=9000, rate=10)))
    # Two jobs on two cores: one core each, half the node each as a hard cap.
    assert limits(d) == {"short": 0.5, "long": 0.5}


def test_a_worker_without_forecasts_is_free_competition() -> None:
    unknown = job("a", done=100, total=None, rate=10, allocation=0.25)
    bare = Container(id="b", name="b", node="w1", started_at=NOW - 600,
                     evaluation=unknown.evaluation, cpu_usage=unknown.cpu_usage,
                     cpu_allocation=0.3)  # no steps at all
    d = plan(policy(), cluster(bare))
    assert categories(d) == {"b": FREE}
    assert limits(d) == {"b": 1.0}
    (a,) = d.assessments
    assert a.forecast is None and "no steps reported" in a.forecast_note


def test_a_new_job_ranks_after_the_forecast_ones_until_it_has_one() -> None:
    young = Container(id="new", name="new", node="w1", started_at=NOW - 3,
                      evaluation=Series.of([NOW], [2.0]), cpu_usage=Series.empty())
    d = plan(policy(), cluster(job("a", done=1000, total=3000, rate=10),
                               job("b", done=1000, total=4000, rate=10), young))
    assert categories(d)["new"] == NEW
    assert limits(d)["new"] == round(1 / 6, 3)


def test_hysteresis_keeps_a_served_job_ahead_of_a_barely_shorter_one() -> None:
    # c is served (full weight), d at the floor and 5 % shorter: within the 10 % hysteresis.
    served = job("c", done=1000, total=3000, rate=10)
    waiting = job("d", done=1100, total=3000, rate=1.7, allocation=1 / 6, cores=0.17)
    third = job("e", done=0, total=1000, rate=10)  # the shortest: always first
    d = plan(policy(), cluster(served, waiting, third))
    assert categories(d)["c"] == SERVED and categories(d)["d"] == FLOOR
    without = plan(policy(hysteresis=0), cluster(served, waiting, third))
    assert categories(without)["d"] == SERVED and categories(without)["c"] == FLOOR


def test_a_job_seen_only_at_the_floor_is_ranked_by_its_time_on_a_core() -> None:
    # d ran at the floor (0.17 core) on a worker with cores to spare, so its speed model caps
    # it there (held back, as if by its own threads); any job can use a core, so its key is
    # its time on one: 1000 steps at 0.1 s = 100 s (at 0.17 core it would be 588 s, last).
    served = job("c", done=1000, total=3000, rate=10)  # 2000 steps: 200 s on a core
    waiting = job("d", done=2000, total=3000, rate=1.7, allocation=1 / 6, cores=0.17)
    d = plan(policy(hysteresis=0), cluster(served, waiting))
    gains = {a.container: a.gain for a in d.assessments}
    assert gains["d"] == pytest.approx(100.0) and gains["c"] == pytest.approx(200.0)
    note = next(a.note for a in d.assessments if a.container == "d")
    assert note.startswith("#1 of 2 by predicted remaining time: 100 s at its best (1 cores)")


def test_the_job_that_bounds_the_makespan_keeps_a_core() -> None:
    # One long job holds more work than the two cores can clear of everything else together:
    # every interval it waits adds to the worker's makespan, so it is served before its turn.
    jobs = (job("a", done=0, total=500, rate=10), job("b", done=0, total=600, rate=10),
            job("long", done=0, total=20_000, rate=10))
    d = plan(policy(), cluster(*jobs))
    assert categories(d) == {"a": SERVED, "long": SERVED, "b": FLOOR}
    assert "b" in limits(d)
    # the reason says why the last in the order was served before its turn, with the figures
    notes = {a.container: a.note for a in d.assessments}
    assert notes["long"].startswith("#3 of 3 by predicted remaining time")
    assert ("served before its turn: it bounds the worker's makespan (2000 s of work on one "
            "core, the worker's 1055 s over its 2 cores)") in notes["long"]
    assert "before its turn" not in notes["a"] + notes["b"]


def test_a_job_waiting_too_long_is_served_before_its_turn() -> None:
    # d has waited 4000 s for a run of 1500 s at an equal share: served now, it still ends
    # past 1 + max_slowdown of that; the shorter c waits instead.
    late = job("d", done=500, total=3000, rate=1.7, allocation=0.17, cores=0.17,
               started_at=NOW - 4000)
    others = (job("b", done=0, total=1500, rate=10), job("c", done=0, total=1800, rate=10))
    d = plan(policy(), cluster(*others, late))
    assert categories(d)["d"] == SERVED and categories(d)["c"] == FLOOR
    note = next(a.note for a in d.assessments if a.container == "d")
    assert ("served before its turn: waiting longer would make it end over 1.2x as late as an "
            "equal share of the worker (served from now on, ") in note
    patient = plan(policy(max_slowdown=100), cluster(*others, late))
    assert categories(patient)["d"] == FLOOR
    assert all("before its turn" not in a.note for a in patient.assessments)


def test_guards_and_small_changes_leave_limits_alone() -> None:
    jobs = (job("a", done=1500, total=2000, rate=10),
            job("b", done=1000, total=3500, rate=2, allocation=0.2, cores=0.2),
            job("c", done=1000, total=3400, rate=10))
    assert "b" not in limits(plan(policy(), cluster(*jobs)))  # 0.167 is within 0.05 of 0.2
    opted = Container(**{**jobs[2].__dict__, "labels": {"policyd.io/opt-out": "true"},
                         "cpu_allocation": 0.5})
    d = plan(policy(), cluster(jobs[0], jobs[1], opted))
    assert "c" not in limits(d)  # it should go to 1, but it opted out
    assert next(a.note for a in d.assessments if a.container == "c").startswith(
        "no action (opted out")


def test_every_assessment_carries_the_forecast_behind_it() -> None:
    d = decide(policy(), cluster(job("a", done=1500, total=2000, rate=10)))
    (a,) = d.assessments
    assert a.forecast is not None and a.forecast.total_steps == 2000
    assert a.forecast.remaining_steps == pytest.approx(500)
    assert a.forecast.remaining_seconds == pytest.approx(50, rel=0.05)  # 10 steps/s


def test_a_malformed_target_is_said_in_the_forecast_as_under_every_kind() -> None:
    bad = replace(job("a", done=1500, total=2000, rate=10),
                  labels={"app": "train", "policyd.io/target-loss": "low"})
    for chosen in (policy(), flowcon_policy()):
        (a,) = decide(chosen, cluster(bad)).assessments
        assert a.forecast is not None and a.forecast.total_steps == 2000, chosen.kind
        assert "policyd.io/target-loss='low' is not a positive number" in a.forecast.note, (
            chosen.kind, a.forecast.note)


def flowcon_policy() -> FlowConPolicy:
    return FlowConPolicy.model_validate({
        "apiVersion": API_VERSION, "kind": "FlowCon", "metadata": {"name": "fc"},
        "spec": {"interval_seconds": 20}})


def test_with_migrate_a_waiting_job_moves_to_a_worker_with_cores_to_spare() -> None:
    busy = (job("a", done=0, total=2000, rate=10), job("b", done=0, total=2500, rate=10),
            job("w", done=0, total=3000, rate=1.7, allocation=0.17, cores=0.17))
    nodes = {"w1": 2.0, "w2": 2.0}
    stay = plan(policy(), cluster(*busy, nodes=nodes))
    assert not any(isinstance(a, Migrate) for a in stay.actions)  # migrate is off by default
    d = plan(policy(migrate=True), cluster(*busy, nodes=nodes))
    (move,) = [a for a in d.actions if isinstance(a, Migrate)]
    assert (move.container, move.from_node, move.to_node) == ("w", "w1", "w2")
    assert "gain" in move.reason and "move cost 30 s" in move.reason
    assert "w" not in limits(d)  # a moved job gets no limit on the worker it leaves
    kind = KINDS["Predictive"]
    assert kind.scope_of(policy(migrate=True)) == "cluster" and kind.scope_of(policy()) == "node"
    assert kind.acts_on_of(policy(migrate=True)) == {"cpu", "placement"}


@pytest.mark.parametrize("from_reports", [False, True], ids=["one snapshot", "node reports"])
@pytest.mark.parametrize(("speeds", "cost_seconds", "moves", "priced"), [
    ((None, None), 30, True, "225 s on 2 cores; gain 150 s"),
    ((1.5, 0.6), 30, False, ""),  # 225 s x 1.5 / 0.6 = 562 s there: longer than waiting
    ((1.0, 0.6), 30, False, ""),  # 375 s there
    ((0.6, 1.5), 30, True, "90 s on 2 cores at speed 1.5 against 0.6 on w1 (225 s at the "
                           "speed of w1); gain 285 s"),
    ((0.6, 1.5), 100, True, "gain 285 s > move cost 100 s"),  # 150 s at w1's speed would not
], ids=["equal", "to-a-slower-worker", "to-a-slower-worker-from-an-average-one",
        "to-a-faster-worker", "worth-it-only-at-the-faster-speed"])
def test_a_move_is_priced_at_the_targets_speed(speeds: tuple[float | None, float | None],
                                               cost_seconds: float, moves: bool, priced: str,
                                               from_reports: bool) -> None:
    """The waiting job's model was measured on w1: on w2 a step takes speed(w1) / speed(w2)
    times as long (stated speeds; from node reports, as the agents report them)."""
    busy = (job("a", done=0, total=2000, rate=10), job("b", done=0, total=2500, rate=10),
            job("w", done=0, total=3000, rate=1.7, allocation=0.17, cores=0.17))
    snap = Snapshot(time=NOW, containers=busy, nodes=tuple(
        Node(name=n, cpu_capacity=2.0, speed=s) for n, s in zip(("w1", "w2"), speeds,
                                                                strict=True)))
    p = policy(migrate=True, migration_cost_seconds=cost_seconds)
    if from_reports:
        snap = replace(snap, containers=(), node_reports=KINDS.of(p).node_reports(p, snap))
    found = [a for a in plan(p, snap).actions if isinstance(a, Migrate)]
    assert [(m.container, m.to_node) for m in found] == ([("w", "w2")] if moves else [])
    assert all(priced in m.reason for m in found)


def test_a_move_is_made_only_when_it_gains_more_than_it_costs() -> None:
    busy = (job("a", done=0, total=2000, rate=10), job("b", done=0, total=2500, rate=10),
            job("w", done=0, total=3000, rate=1.7, allocation=0.17, cores=0.17))
    # Waiting on w1 costs w a few hundred seconds; a move that costs an hour is not worth it.
    d = plan(policy(migrate=True, migration_cost_seconds=3600),
             cluster(*busy, nodes={"w1": 2.0, "w2": 2.0}))
    assert not any(isinstance(a, Migrate) for a in d.actions)


def test_a_forecast_on_a_whole_core_differs_only_in_its_cap() -> None:
    f = Forecast(steps_done=10.0, total_steps=100.0, remaining_steps=90.0,
                 remaining_seconds=45.0, finish_at=45.0, low_seconds=40.0, high_seconds=50.0,
                 target_loss=None, target_eta_seconds=None, basis="total steps",
                 steps_per_second=2.0, parallel_fraction=0.5, serial_seconds=0.25,
                 parallel_seconds=0.25, cap_cores=0.17)
    lifted = f.on_a_whole_core()
    assert asdict(lifted) == asdict(replace(f, cap_cores=1.0)) and f.cap_cores == 0.17
    assert lifted.remaining_seconds_at(1.0) == pytest.approx(45.0)
    whole = replace(f, cap_cores=2.0)
    assert whole.on_a_whole_core() is whole
