"""Plain values shared by every layer: the snapshot the engine reads and the decision it returns.

This package owns the offline contract (docs/design.md, "The offline contract": snapshot
JSON in, decision JSON out). It does no I/O, reads no clock and imports nothing from policyd's
other layers.
"""

from policyd.model.deadline import JobDeadline
from policyd.model.decision import (
    Action,
    Admit,
    Assessment,
    Decision,
    MarkMigrated,
    Migrate,
    SetCpu,
    Stop,
)
from policyd.model.forecast import JobForecast
from policyd.model.node_report import (
    AtRiskJob,
    NodeReport,
    ReallocationRequest,
    RebalanceCandidate,
    ResidentJob,
    StopRequest,
    WaitingJob,
)
from policyd.model.pending import PendingJob, QueuedJob
from policyd.model.qoe import Delivery, QoeStatus
from policyd.model.snapshot import Container, Markers, Node, Series, Snapshot

__all__ = [
    "Action",
    "Admit",
    "Assessment",
    "AtRiskJob",
    "Container",
    "Decision",
    "Delivery",
    "JobDeadline",
    "JobForecast",
    "MarkMigrated",
    "Markers",
    "Migrate",
    "Node",
    "NodeReport",
    "PendingJob",
    "QoeStatus",
    "QueuedJob",
    "ReallocationRequest",
    "RebalanceCandidate",
    "ResidentJob",
    "Series",
    "SetCpu",
    "Snapshot",
    "Stop",
    "StopRequest",
    "WaitingJob",
]
