"""The decision: what the engine wants done, and what it saw, for one policy and one snapshot.

Actions are frozen values; each names its policy and carries a human-readable `reason` with the
numbers behind it. Actuators dispatch on the concrete type (`match` + `assert_never`). An
`Assessment` per container records the category, the gain figure and the allocation the engine
settled on, or why it left the container alone; `policyd plan` prints them. Held jobs that a
policy does not admit yet are its `queue` (`policyd.model.pending`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Literal

from policyd.model import labels
from policyd.model.deadline import JobDeadline
from policyd.model.forecast import JobForecast
from policyd.model.pending import QueuedJob
from policyd.model.qoe import Delivery, DeliveryEvent, QoeStatus


def _check_common(policy: str, container: str, reason: str) -> None:
    if not policy:
        raise ValueError("an action must name its policy")
    if not container:
        raise ValueError("an action must name its container")
    if not reason:
        raise ValueError("an action must carry a reason")


@dataclass(frozen=True, kw_only=True)
class SetCpu:
    """Limit a container to `fraction` of its node's CPU (1.0 = unrestricted).

    `mode` says how: `shares` (soft, work-conserving weights: Docker cpu_shares, Kubernetes
    requests) or `quota` (hard caps: Docker cpu_quota, Kubernetes limits).
    """

    policy: str
    container: str
    node: str
    fraction: float
    mode: Literal["shares", "quota"]
    reason: str
    kind: Literal["set_cpu"] = "set_cpu"

    def __post_init__(self) -> None:
        _check_common(self.policy, self.container, self.reason)
        if not (0 < self.fraction <= 1):
            raise ValueError(f"fraction must be in (0, 1], got {self.fraction}")


@dataclass(frozen=True, kw_only=True)
class Migrate:
    """Move a container from one node to another by checkpoint and restore.

    `scores` are the worker scores of Algorithm 4 when the move came from it; `rebalance` is true
    for moves of Algorithm 5. The actuator writes the markers: migrated (and, for Algorithm 5,
    rebalanced) true, and converged_at when the action sets it (None: leave it unchanged).
    `grace_seconds` is how long the trainer may take to checkpoint and exit after SIGTERM (the
    policy's `migration_grace_seconds`, so a reloaded policy's value applies to its next move;
    None: the actuator's configured default).
    """

    policy: str
    container: str
    from_node: str
    to_node: str
    reason: str
    scores: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    rebalance: bool = False
    converged_at: float | None = None
    grace_seconds: float | None = None
    kind: Literal["migrate"] = "migrate"

    def __post_init__(self) -> None:
        _check_common(self.policy, self.container, self.reason)
        if self.from_node == self.to_node:
            raise ValueError("a migration must change the node")
        if self.grace_seconds is not None and not (0 <= self.grace_seconds < float("inf")):
            raise ValueError(f"grace_seconds must be finite and >= 0, got {self.grace_seconds}")
        object.__setattr__(self, "scores", MappingProxyType(dict(self.scores)))

    @property
    def node(self) -> str:
        return self.from_node


@dataclass(frozen=True, kw_only=True)
class MarkMigrated:
    """Algorithm 4, lines 8-10: the container stays where it is but counts as reallocated."""

    policy: str
    container: str
    node: str
    converged_at: float
    reason: str
    scores: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    kind: Literal["mark_migrated"] = "mark_migrated"

    def __post_init__(self) -> None:
        _check_common(self.policy, self.container, self.reason)
        object.__setattr__(self, "scores", MappingProxyType(dict(self.scores)))


@dataclass(frozen=True, kw_only=True)
class Stop:
    """Stop a job for good: it reached its declared target loss or converged (`event`), and its
    policy says `on_target` / `on_converged: stop`.

    The actuator uses the checkpoint protocol (SIGTERM; the job writes its checkpoint and
    exits), keeps the checkpoint, reports where it is, and marks the job delivered so that it is
    never restarted or migrated. `grace_seconds` is how long the job may take to checkpoint and
    exit (the policy's `stop_grace_seconds`; None: the actuator's configured default).
    """

    policy: str
    container: str
    node: str
    event: DeliveryEvent
    reason: str
    grace_seconds: float | None = None
    kind: Literal["stop"] = "stop"

    def __post_init__(self) -> None:
        _check_common(self.policy, self.container, self.reason)
        if self.grace_seconds is not None and not (0 <= self.grace_seconds < float("inf")):
            raise ValueError(f"grace_seconds must be finite and >= 0, got {self.grace_seconds}")


@dataclass(frozen=True, kw_only=True)
class Admit:
    """Start a held job (`policyd.model.pending`) on `node`.

    `held_on` is where the job is held now (a Docker host: the actuator starts it there, or
    re-creates it on `node` as a migration does; None: a suspended Kubernetes Job, pinned to
    `node` by node affinity, then unsuspended). `fraction` and `mode`, when set, are the CPU
    limit it starts with, as a `SetCpu` would set it (where the platform allows it before the
    start: Docker does; a Kubernetes pod starts with its Job's own resources).
    """

    policy: str
    container: str
    node: str
    reason: str
    held_on: str | None = None
    fraction: float | None = None
    mode: Literal["shares", "quota"] = "shares"
    kind: Literal["admit"] = "admit"

    def __post_init__(self) -> None:
        _check_common(self.policy, self.container, self.reason)
        if not self.node:
            raise ValueError("an admission must name its node")
        if self.fraction is not None and not (0 < self.fraction <= 1):
            raise ValueError(f"fraction must be in (0, 1] or None, got {self.fraction}")


Action = SetCpu | Migrate | MarkMigrated | Stop | Admit


@dataclass(frozen=True, kw_only=True)
class Assessment:
    """What the engine concluded about one container.

    `category` is None when the container was left alone (`note` says why). `gain` is the figure
    the category came from: FlowCon's growth efficiency G or SpeCon's gain g of the last interval
    (None when there is none yet). Allocations are fractions of the node.
    """

    container: str
    node: str
    category: str | None
    gain: float | None = None
    cpu_fraction_now: float | None = None
    cpu_fraction_next: float | None = None
    note: str = ""
    forecast: JobForecast | None = None
    """Where the job is going (`policyd.model.forecast`), or None with `forecast_note`."""
    forecast_note: str = ""
    deadline: JobDeadline | None = None
    """The job's deadline, its state, ETA and slack (`policyd.model.deadline`), for kinds
    that read deadlines; None otherwise."""
    qoe: QoeStatus | None = None
    """The job against its QoE target (`policyd.model.qoe`), when it declares one and the
    policy measures it."""
    delivery: Delivery | None = None
    """The job reached its target loss or converged, and what the policy does about it."""

    def but(self, **changes: Any) -> Assessment:
        """A copy with `changes`: what `dataclasses.replace` makes, without its walk of the
        class's fields and the frozen `__init__`'s one `object.__setattr__` per field on every
        call (a large decision copies 10,000 assessments twice). Assessment checks nothing in
        `__init__`, so the copy's fields are set at once; a name that is not a field is still
        refused (a subset test: no set is built for a copy that is fine)."""
        if not changes.keys() <= _ASSESSMENT_FIELDS:
            unknown = changes.keys() - _ASSESSMENT_FIELDS
            raise TypeError(f"Assessment has no field {', '.join(sorted(unknown))}")
        copy = object.__new__(Assessment)
        fields_ = copy.__dict__
        fields_.update(self.__dict__)
        fields_.update(changes)
        return copy


_ASSESSMENT_FIELDS = frozenset(f.name for f in fields(Assessment))


@dataclass(frozen=True, kw_only=True)
class Decision:
    """The engine's answer for one policy: actions, categories and the next interval."""

    policy: str
    kind: str
    time: float
    actions: tuple[Action, ...]
    assessments: tuple[Assessment, ...]
    next_interval: float
    dry_run: bool = False
    notes: tuple[str, ...] = ()
    queue: tuple[QueuedJob, ...] = ()
    """Held jobs this decision does not admit yet, in admission order (`Admit` actions take
    the ones it does)."""
    opt_out_key: str = labels.OPT_OUT
    """The label or annotation key that opts a workload out of the deciding policy (its
    `selector.opt_out_key`, set by `policyd.engine.decide`): actuators check it again on the
    workload before acting. Not in the decision's JSON (it is the policy's setting)."""

    @property
    def categories(self) -> dict[str, str]:
        return {a.container: a.category for a in self.assessments if a.category is not None}

    @property
    def skipped(self) -> dict[str, str]:
        return {a.container: a.note for a in self.assessments if a.category is None}
