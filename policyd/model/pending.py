"""Jobs that wait for policyd to admit them, as a snapshot shows them and a decision ranks them.

A workload can be handed to policyd *held*: on Kubernetes a Job created with `suspend: true`
and policyd's label, on Docker a container created but not started with policyd's label, in
the simulator a job submitted to a world that admits. It does not run until a policy that
admits (`Kind.acts_on` holds "admission") emits an `Admit` for it: which node, and when, is
then the policy's choice. `PendingJob` is what the engine knows of one; `QueuedJob` is where a
decision puts one that it does not admit yet (its position in the queue, and why).

Values are frozen and check themselves. No I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from policyd.model.deadline import JobDeadline


@dataclass(frozen=True, kw_only=True, eq=False)
class PendingJob:
    """One held job. `id` is what an `Admit` names (Docker: the container's name; Kubernetes:
    `namespace/job`); `node` is where it is held now (a Docker host; None: nowhere yet, as a
    suspended Kubernetes Job); `submitted_at` when it was created (epoch seconds)."""

    id: str
    name: str
    submitted_at: float
    node: str | None = None
    namespace: str = ""
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    annotations: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("a pending job's id must not be empty")
        if not math.isfinite(self.submitted_at):
            raise ValueError("submitted_at must be a finite time in seconds")
        if self.node is not None and not self.node:
            raise ValueError("node must be a node name or None")
        object.__setattr__(self, "labels", MappingProxyType(dict(self.labels)))
        object.__setattr__(self, "annotations", MappingProxyType(dict(self.annotations)))


Why = Literal["no_fit", "hopeless", "invalid", "owned", "blocked"]
"""Why a job still waits: no node has the cores it needs now; it cannot meet its deadline
anywhere (admitted when nothing else waits); a declaration cannot be read; another policy owns
its admission; a safety guard (opt-out, minimum age) holds it."""
WHYS: tuple[Why, ...] = ("no_fit", "hopeless", "invalid", "owned", "blocked")


@dataclass(frozen=True, kw_only=True)
class QueuedJob:
    """A held job the decision does not admit now: its `position` in the policy's admission
    order (1 = next), `why` it waits (a code for metrics) and `reason` (for people)."""

    container: str
    position: int
    why: Why
    reason: str
    deadline: JobDeadline | None = None

    def __post_init__(self) -> None:
        if not self.container:
            raise ValueError("a queued job must name its container")
        if self.position < 1:
            raise ValueError(f"position must be >= 1, got {self.position}")
        if self.why not in WHYS:
            raise ValueError(f"why must be one of {', '.join(WHYS)}, got {self.why!r}")
        if not self.reason:
            raise ValueError("a queued job needs a reason")
