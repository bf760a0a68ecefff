"""What a listener reports (FlowCon's Algorithm 2): a container started or stopped on a node,
or a job submitted held (created, not started) for a policy to admit.

Docker events and Kubernetes pod watches both become these values; the daemon reacts by
resetting the interval of every policy whose kind wakes on the event and running a tick at once
(`Kind.wakes_on`: FlowCon on starts and stops, the admitting kinds on submissions too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

EventKind = Literal["started", "stopped", "submitted"]


@dataclass(frozen=True, kw_only=True)
class ContainerEvent:
    """`container` (an id as in the snapshot) on `node` started, stopped or was submitted held
    at `time` (epoch s)."""

    kind: EventKind
    container: str
    node: str
    time: float
