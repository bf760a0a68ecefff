"""A node's speed: stated, or treated as average and said so."""

from __future__ import annotations

import pytest

from policyd.engine.node_speed import node_speeds
from policyd.model import Node, Snapshot


def snapshot(*nodes: Node) -> Snapshot:
    return Snapshot(time=0.0, nodes=nodes, containers=())


def test_stated_speeds_are_used_and_an_unstated_node_is_average_with_a_note() -> None:
    speeds = node_speeds(snapshot(Node(name="f", cpu_capacity=4, speed=1.5),
                                  Node(name="s", cpu_capacity=2, speed=0.5),
                                  Node(name="new", cpu_capacity=2)))
    assert speeds.by_node == {"f": 1.5, "s": 0.5, "new": 1.0}
    assert set(speeds.notes) == {"new"} and "treated as average (1)" in speeds.notes["new"]
    assert speeds.effective_cores("f", 2.0) == 3.0


def test_with_no_speed_stated_every_node_is_average() -> None:
    speeds = node_speeds(snapshot(Node(name="a", cpu_capacity=2), Node(name="b", cpu_capacity=2)))
    assert speeds.by_node == {"a": 1.0, "b": 1.0} and set(speeds.notes) == {"a", "b"}


@pytest.mark.parametrize("speed", [0.0, -1.0, float("nan"), float("inf")])
def test_an_impossible_speed_is_refused(speed: float) -> None:
    with pytest.raises(ValueError, match="speed must be a positive number"):
        Node(name="a", cpu_capacity=2, speed=speed)
