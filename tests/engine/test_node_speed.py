"""A node's speed: stated; judged from the step times of jobs of one workload on several nodes;
or treated as average and said so."""

from __future__ import annotations

import math

import numpy as np
import pytest

from policyd.engine.forecast_output import Forecast
from policyd.engine.node_speed import node_speeds
from policyd.model import Container, Node, Series, Snapshot
from policyd.model import labels as keys


def snapshot(*nodes: Node, containers: tuple[Container, ...] = ()) -> Snapshot:
    return Snapshot(time=0.0, nodes=nodes, containers=containers)


def node(name: str, speed: float | None = None) -> Node:
    return Node(name=name, cpu_capacity=4, speed=speed)


def forecast(one_core_seconds: float) -> Forecast:
    """A forecast whose speed model takes `one_core_seconds` a step on one core."""
    return Forecast(steps_done=100.0, total_steps=None, remaining_steps=100.0,
                    remaining_seconds=100.0 * one_core_seconds, finish_at=0.0, low_seconds=0.0,
                    high_seconds=0.0, target_loss=None, target_eta_seconds=None, basis="",
                    steps_per_second=1 / one_core_seconds, parallel_fraction=0.5,
                    serial_seconds=one_core_seconds / 2, parallel_seconds=one_core_seconds / 2,
                    cap_cores=4.0)


def jobs(*rows: tuple[str, str, str | None, float],
         ) -> tuple[tuple[Container, ...], dict[str, Forecast | None]]:
    """(id, node, workload, seconds a step on one core) -> containers and their forecasts."""
    containers = tuple(Container(
        id=cid, name=cid, node=on, started_at=0.0, evaluation=Series.empty(),
        cpu_usage=Series.empty(), labels={keys.WORKLOAD: w} if w else {})
        for cid, on, w, _ in rows)
    return containers, {cid: forecast(t) for cid, _, w, t in rows}


def test_stated_speeds_are_used_and_an_unstated_node_is_average_with_a_note() -> None:
    speeds = node_speeds(snapshot(node("f", 1.5), node("s", 0.5), node("new")))
    assert speeds.by_node == {"f": 1.5, "s": 0.5, "new": 1.0}
    assert set(speeds.notes) == {"new"} and "treated as average (1)" in speeds.notes["new"]
    assert "no job there shares a workload (policyd.io/workload)" in speeds.notes["new"]
    assert speeds.effective_cores("f", 2.0) == 3.0


def test_with_no_speed_stated_every_node_is_average() -> None:
    speeds = node_speeds(snapshot(node("a"), node("b")))
    assert speeds.by_node == {"a": 1.0, "b": 1.0} and set(speeds.notes) == {"a", "b"}


def test_an_unstated_node_is_judged_against_stated_ones_through_a_shared_workload() -> None:
    # resnet costs 2.0 s a step on an average core, lstm 0.5 s; "old" trains at 0.6.
    containers, found = jobs(
        ("r1", "avg", "resnet", 2.0), ("r2", "fast", "resnet", 2.0 / 1.5),
        ("r3", "old", "resnet", 2.0 / 0.6), ("l1", "avg", "lstm", 0.5),
        ("l2", "old", "lstm", 0.5 / 0.6), ("l3", "old", "lstm", 0.5 / 0.6))
    speeds = node_speeds(snapshot(node("avg", 1.0), node("fast", 1.5), node("old"),
                                  containers=containers), found)
    assert speeds.of("avg") == 1.0 and speeds.of("fast") == 1.5
    assert speeds.of("old") == pytest.approx(0.6)
    assert "not stated: judged 0.6 (+-" in speeds.notes["old"]
    assert "3 job(s) of 2 workload(s) (policyd.io/workload: lstm, resnet) against stated" \
        in speeds.notes["old"]


def test_with_none_stated_the_judged_speeds_keep_their_ratios_around_the_average() -> None:
    truth = {"a": 2.0, "b": 1.0, "c": 0.5}
    rows = [(f"{w}-{n}-{k}", n, w, cost / truth[n] * (1 + 0.01 * k))
            for w, cost in (("x", 1.0), ("y", 3.0)) for n in truth for k in range(2)]
    containers, found = jobs(*rows)
    speeds = node_speeds(snapshot(*(node(n) for n in truth), containers=containers), found)
    mean_log = sum(math.log(s) for s in truth.values()) / 3
    for n, s in truth.items():
        assert speeds.of(n) == pytest.approx(s / math.exp(mean_log), rel=0.02)
    assert "against the other unstated nodes" in speeds.notes["a"]


def test_a_node_whose_workloads_run_nowhere_else_is_average() -> None:
    containers, found = jobs(("r1", "avg", "resnet", 2.0), ("r2", "old", "resnet", 4.0),
                             ("u1", "lone", "unique", 9.0), ("n1", "lone", None, 9.0))
    speeds = node_speeds(snapshot(node("avg", 1.0), node("old"), node("lone"),
                                  containers=containers), found)
    assert speeds.of("lone") == 1.0 and "not judged" in speeds.notes["lone"]
    assert speeds.of("old") == pytest.approx(0.5)


def test_a_speed_within_the_noise_of_the_step_times_is_taken_as_average() -> None:
    containers, found = jobs(("r1", "avg", "resnet", 2.0), ("r2", "near", "resnet", 1.96))
    speeds = node_speeds(snapshot(node("avg", 1.0), node("near"), containers=containers), found)
    assert speeds.of("near") == 1.0 and speeds.not_used == {"near"}
    assert speeds.judged["near"] == pytest.approx(2.0 / 1.96)
    assert "judged 1.02" in speeds.notes["near"] and "within the noise" in speeds.notes["near"]


def test_one_odd_job_does_not_move_a_judged_speed() -> None:
    rows = [(f"a{k}", "avg", "w", 1.0) for k in range(4)] + \
           [(f"s{k}", "slow", "w", 2.0) for k in range(4)] + [("odd", "slow", "w", 50.0)]
    containers, found = jobs(*rows)
    speeds = node_speeds(snapshot(node("avg", 1.0), node("slow"), containers=containers), found)
    assert speeds.of("slow") == pytest.approx(0.5)


def test_an_annotation_names_the_workload_over_a_label_and_a_job_without_forecast_is_skipped(
        ) -> None:
    containers, found = jobs(("r1", "avg", "resnet", 2.0), ("r2", "old", "other", 4.0),
                             ("r3", "old", "resnet", 1.0))
    relabelled = (containers[0], Container(**{**containers[1].__dict__,
                                              "annotations": {keys.WORKLOAD: " resnet "}}),
                  containers[2])
    found["r3"] = None
    speeds = node_speeds(snapshot(node("avg", 1.0), node("old"), containers=relabelled), found)
    assert speeds.of("old") == pytest.approx(0.5)


@pytest.mark.parametrize("speed", [0.0, -1.0, float("nan"), float("inf")])
def test_an_impossible_speed_is_refused(speed: float) -> None:
    with pytest.raises(ValueError, match="speed must be a positive number"):
        Node(name="a", cpu_capacity=2, speed=speed)


@pytest.mark.parametrize("seed", range(3))
def test_any_mix_of_jobs_gives_every_node_a_finite_positive_speed(seed: int) -> None:
    """Seeded mixes: stated and unstated nodes, shared and lone workloads, step times from a
    nanosecond to a day, jobs that moved: never an exception, every speed a positive number,
    the stated ones as stated, every unstated node noted."""
    rng = np.random.default_rng(seed)
    for _ in range(200):
        names = [f"n{i}" for i in range(int(rng.integers(1, 7)))]
        nodes = tuple(node(n, float(rng.choice([0.3, 1.0, 2.5])) if rng.random() < 0.4
                           else None) for n in names)
        rows = [(f"c{k}", str(rng.choice(names)), str(rng.choice(["a", "b", "c"])),
                 float(10.0 ** rng.uniform(-9, 5))) for k in range(int(rng.integers(0, 25)))]
        containers, found = jobs(*rows)
        moved = tuple(Container(**{**c.__dict__, "started_at": 50.0,
                                   "steps": Series.of([0.0, 100.0], [0.0, 10.0])})
                      if rng.random() < 0.2 else c for c in containers)
        speeds = node_speeds(snapshot(*nodes, containers=moved), found)
        for n in nodes:
            speed = speeds.of(n.name)
            assert math.isfinite(speed) and speed > 0
            assert speed == n.speed if n.speed is not None else n.name in speeds.notes


def test_a_reason_shows_whether_a_speed_is_stated_judged_or_average() -> None:
    containers, found = jobs(("r1", "avg", "resnet", 2.0), ("r2", "old", "resnet", 4.0),
                             ("r3", "old", "resnet", 4.0), ("r4", "old", "resnet", 4.0),
                             ("r5", "near", "resnet", 1.96))
    speeds = node_speeds(snapshot(node("avg", 1.0), node("old"), node("near"), node("none"),
                                  containers=containers), found)
    assert [speeds.shown(n) for n in ("avg", "old", "near", "none")] == [
        "1", "0.5 judged", "1 average", "1 average"]


def test_a_speed_judged_beyond_ten_times_the_average_is_not_believed() -> None:
    rows = [(f"a{k}", "avg", "w", 1.0) for k in range(3)] + \
           [(f"s{k}", "odd", "w", 1e-3) for k in range(3)]
    containers, found = jobs(*rows)
    speeds = node_speeds(snapshot(node("avg", 1.0), node("odd"), containers=containers), found)
    assert speeds.of("odd") == 1.0 and speeds.judged["odd"] == pytest.approx(1000.0)
    assert "judged 1e+03" in speeds.notes["odd"]
    assert "more than 10x off the average, not believed: treated as average (1)" \
        in speeds.notes["odd"]
