"""What a listener reports (FlowCon's Algorithm 2): a container started or stopped on a node.

Docker events and Kubernetes pod watches both become these values; the daemon reacts by
resetting FlowCon's interval and running a tick at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, kw_only=True)
class ContainerEvent:
    """`container` (an id as in the snapshot) on `node` started or stopped at `time` (epoch s)."""

    kind: Literal["started", "stopped"]
    container: str
    node: str
    time: float
