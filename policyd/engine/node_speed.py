"""How fast each node's cores train, relative to an average core: what placement compares.

A node's speed is what the operator states (`Node.speed`, the `policyd.io/speed` label). A node
whose speed is not stated is treated as average: the mean of the stated speeds, or 1.0 when
none is stated, and the reason says so (`notes`), so that a placement resting on a guess is
never silent. (Judging an unstated node from the step rates per core of jobs that ran on it is
not done yet: a step's cost differs from job to job, so only the same job seen on two nodes
could tell, and no source reports that yet.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from policyd.model import Snapshot

AVERAGE_SPEED = 1.0
"""The speed of an average core, when no node's speed is stated."""


@dataclass(frozen=True, kw_only=True)
class NodeSpeeds:
    """Per node its relative speed, and for those treated as average, why."""

    by_node: Mapping[str, float]
    notes: Mapping[str, str]

    def of(self, node: str) -> float:
        return self.by_node[node]

    def effective_cores(self, node: str, cores: float) -> float:
        """`cores` of `node` as average cores: what they train at."""
        return cores * self.by_node[node]


def node_speeds(snapshot: Snapshot) -> NodeSpeeds:
    """Every node's speed: stated, or the average of the stated ones (1.0 if none), noted."""
    stated = {n.name: n.speed for n in snapshot.nodes if n.speed is not None}
    average = sum(stated.values()) / len(stated) if stated else AVERAGE_SPEED
    by_node: dict[str, float] = {}
    notes: dict[str, str] = {}
    for node in snapshot.nodes:
        speed = stated.get(node.name)
        if speed is None:
            speed = average
            notes[node.name] = (f"speed of {node.name} not stated and not judged (no job's "
                                f"rate there to compare): treated as average ({average:g})")
        by_node[node.name] = speed
    return NodeSpeeds(by_node=by_node, notes=notes)
