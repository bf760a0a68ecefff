"""The offline contract's JSON form: malformed snapshots are reported with their JSON path, and
a snapshot survives the round trip through its dict form."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from policyd.model import Decision, MarkMigrated, Migrate, SetCpu
from policyd.model.codec import (
    SnapshotError,
    decision_to_dict,
    snapshot_from_dict,
    snapshot_to_dict,
)
from policyd.model.decision import Assessment


def doc(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "time": 1700000300.0,
        "nodes": [{"name": "w1", "cpu_capacity": 16.0, "cpu_usage": 9.5}],
        "containers": [{
            "id": "c1", "name": "vae-1", "node": "w1", "started_at": 1700000000.0,
            "labels": {"app": "train"},
            "evaluation": [[1700000000.0, 2.31], [1700000030.0, 1.20]],
            "cpu_usage": [[1700000030.0, 0.98]],
            "cpu_allocation": 1.0,
            "markers": {"migrated": False, "rebalanced": False, "converged_at": None,
                        "last_action_at": None},
        }],
        "intervals": {"flowcon-default": 40.0},
    }
    base.update(changes)
    return base


def container(**changes: Any) -> dict[str, Any]:
    c: dict[str, Any] = doc()["containers"][0]
    c.update(changes)
    return c


def test_design_md_example_parses() -> None:
    snap = snapshot_from_dict(doc())
    assert snap.time == 1700000300.0
    assert snap.nodes[0].cpu_capacity == 16.0
    c = snap.containers[0]
    assert c.evaluation.values.tolist() == [2.31, 1.20]
    assert c.labels == {"app": "train"}
    assert snap.interval_seconds("flowcon-default", 20.0) == 40.0
    assert snap.interval_seconds("other", 20.0) == 20.0


def test_round_trip() -> None:
    original = doc()
    again = snapshot_to_dict(snapshot_from_dict(original))
    assert snapshot_to_dict(snapshot_from_dict(again)) == again
    assert again["containers"][0]["evaluation"] == original["containers"][0]["evaluation"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param([], ["$: expected a JSON object, got list"], id="not-an-object"),
        pytest.param(doc(time="soon"), ["$.time: expected a number, got str 'soon'"], id="time"),
        pytest.param(doc(nodes=[]), ["$.nodes: required non-empty list of nodes"], id="no-nodes"),
        pytest.param(doc(nodes=[{"name": "w1", "cpu_capacity": 0}]),
                     ["nodes[0]: cpu_capacity must be a positive number of cores, got 0.0"],
                     id="capacity"),
        pytest.param(doc(containers=[container(cpu_allocation=1.5)]),
                     ["containers[0]: cpu_allocation must be in (0, 1], got 1.5"],
                     id="allocation"),
        pytest.param(doc(containers=[container(node="w9")]),
                     ["$: container 'c1' is on node 'w9', which is not one of the nodes: w1"],
                     id="unknown-node"),
        pytest.param(doc(containers=[container(), container()]),
                     ["$: container ids must be unique; repeated: c1"], id="duplicate-id"),
        pytest.param(doc(containers=[container(evaluation=[[1, 2, 3]])]),
                     ["containers[0].evaluation: expected a list of [time_seconds, value] pairs"],
                     id="series-shape"),
        pytest.param(doc(containers=[container(evaluation=[["a", 1]])]),
                     ["containers[0].evaluation: could not convert string to float: 'a'"],
                     id="series-type"),
        pytest.param(doc(containers=[container(markers={"migrated": "yes"})]),
                     ["containers[0].markers.migrated: expected true or false, got 'yes'"],
                     id="marker"),
        pytest.param(doc(containers=[container(markers={"move_failures": -1})]),
                     ["containers[0].markers.move_failures: expected a whole number >= 0, got -1"],
                     id="move-failures"),
        pytest.param(doc(containers=[container(id="", started_at=None)]),
                     ["containers[0].id: required non-empty string, got ''",
                      "containers[0].started_at: required number is missing"],
                     id="several-at-once"),
        pytest.param(doc(intervals={"x": "fast"}),
                     ["$.intervals: expected an object of policy name -> seconds"],
                     id="intervals"),
    ],
)
def test_malformed_snapshots_name_the_place(raw: Any, expected: list[str]) -> None:
    with pytest.raises(SnapshotError) as caught:
        snapshot_from_dict(raw)
    assert caught.value.problems == expected


def test_failed_moves_survive_the_round_trip() -> None:
    raw = doc(containers=[container(markers={"move_failures": 2, "move_failed_at": 1700000200.0})])
    markers = snapshot_to_dict(snapshot_from_dict(raw))["containers"][0]["markers"]
    assert (markers["move_failures"], markers["move_failed_at"]) == (2, 1700000200.0)


def test_nan_in_a_series_is_not_a_load_error() -> None:
    raw = json.loads(json.dumps(doc(containers=[container(evaluation=[[1, float("nan")]])])))
    snap = snapshot_from_dict(raw)
    assert math.isnan(snap.containers[0].evaluation.values[0])


def test_decision_json_uses_design_md_keys() -> None:
    decision = Decision(
        policy="p", kind="SpeCon", time=10.0, next_interval=30.0,
        actions=(
            SetCpu(policy="p", container="c1", node="w1", fraction=0.25, mode="shares",
                   reason="CL"),
            Migrate(policy="p", container="c3", from_node="w4", to_node="w2", reason="converged",
                    scores={"w1": 6.0, "w2": 3.5}, converged_at=10.0),
            MarkMigrated(policy="p", container="c4", node="w2", converged_at=10.0,
                         reason="stays"),
        ),
        assessments=(Assessment(container="c1", node="w1", category="CL", gain=float("inf")),
                     Assessment(container="c2", node="w1", category=None, note="gap")),
    )
    out = decision_to_dict(decision)
    assert out["actions"][0] == {"kind": "set_cpu", "policy": "p", "container": "c1",
                                 "node": "w1", "fraction": 0.25, "mode": "shares",
                                 "reason": "CL"}
    assert out["actions"][1]["from"] == "w4" and out["actions"][1]["to"] == "w2"
    assert out["actions"][1]["scores"] == {"w1": 6.0, "w2": 3.5}
    assert out["categories"] == {"c1": "CL"}
    assert out["skipped"] == {"c2": "gap"}
    assert out["next_interval"] == 30.0
    assert out["containers"]["c1"]["gain"] is None  # infinite gains are not valid JSON
    json.dumps(out, allow_nan=False)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        pytest.param(lambda: SetCpu(policy="p", container="c", node="w", fraction=0.0,
                                    mode="shares", reason="r"),
                     "fraction must be in (0, 1], got 0.0", id="zero-fraction"),
        pytest.param(lambda: SetCpu(policy="p", container="c", node="w", fraction=0.5,
                                    mode="shares", reason=""),
                     "an action must carry a reason", id="no-reason"),
        pytest.param(lambda: Migrate(policy="p", container="c", from_node="w", to_node="w",
                                     reason="r"),
                     "a migration must change the node", id="same-node"),
        pytest.param(lambda: MarkMigrated(policy="", container="c", node="w", converged_at=1,
                                          reason="r"),
                     "an action must name its policy", id="no-policy"),
    ],
)
def test_actions_reject_impossible_values(make: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make()


def test_a_node_speed_round_trips_and_a_bad_one_is_named() -> None:
    raw = {"time": 0.0, "nodes": [{"name": "f", "cpu_capacity": 4, "speed": 1.5},
                                   {"name": "p", "cpu_capacity": 2}], "containers": []}
    snap = snapshot_from_dict(raw)
    assert [n.speed for n in snap.nodes] == [1.5, None]
    assert snapshot_from_dict(snapshot_to_dict(snap)).nodes == snap.nodes
    raw["nodes"][1]["speed"] = 0
    with pytest.raises(SnapshotError, match=r"nodes\[1\]: speed must be a positive number"):
        snapshot_from_dict(raw)
