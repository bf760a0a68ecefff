"""The parts every policy kind shares: the document envelope, the evaluation function, the
workload selector and the safety limits.

These are frozen pydantic models that validate themselves (ranges, cross-field rules) so that an
engine receiving a policy never meets an impossible one. Messages are written for operators: they
say what was given and what is allowed. `policyd.policy` turns YAML into these models and adds
file, line and policy name to each message; this module does no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from policyd.model.labels import OPT_OUT, TARGET_LOSS, set_true

API_VERSION = "policyd.io/v1alpha1"


class Strict(BaseModel):
    """Base for policy models: frozen, unknown keys rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class Evaluation(Strict):
    """The job's evaluation function and how its change is read."""

    query: str = Field(
        default="policyd_training_loss",
        min_length=1,
        description="PromQL selecting one series per container (the exporter's loss by default).",
    )
    direction: Literal["minimize", "maximize"] = Field(
        default="minimize",
        description=(
            "Which way is better: minimize for a loss, maximize for accuracy-like functions. "
            "Read only with gain: improvement (with magnitude, the thesis's gain, a change "
            "either way counts)."
        ),
    )
    gain: Literal["magnitude", "improvement"] = Field(
        default="magnitude",
        description=(
            "magnitude: the gain is |E(t_m) - E(t_m-1)|, as in the thesis (Algorithm 3, line 5), "
            "so a loss that jumps up counts as growth; improvement: only a change in the better "
            "direction counts (a worsening is zero gain)."
        ),
    )
    normalization: Literal["relative", "absolute"] = Field(
        default="relative",
        description=(
            "relative: gain = |E(t_m) - E(t_m-1)| / |E(t_m-1)| (scale-free, alpha is a fraction); "
            "absolute: gain = |E(t_m) - E(t_m-1)| in the function's own units."
        ),
    )


class Workload(Protocol):
    """What a selector reads: a running container or a held job (`policyd.model`)."""

    @property
    def namespace(self) -> str: ...
    @property
    def labels(self) -> Mapping[str, str]: ...
    @property
    def annotations(self) -> Mapping[str, str]: ...


class Selector(Strict):
    """Which workloads the policy manages."""

    namespaces: tuple[str, ...] = Field(
        default=(), description="Namespaces to manage; empty means every namespace."
    )
    labels: dict[str, str] = Field(
        default_factory=dict, description="Labels a workload must carry (all of them)."
    )
    opt_out_key: str = Field(
        default=OPT_OUT,
        min_length=1,
        description=(
            'A workload whose label or annotation of this key is "true" is watched and '
            "categorised but never acted on."
        ),
    )

    def selects(self, container: Workload) -> bool:
        if self.namespaces and container.namespace not in self.namespaces:
            return False
        labels = container.labels
        # SIM110 waived: a loop, not all(...), makes no generator per call (10,000 a decide)
        for key, value in self.labels.items():  # noqa: SIM110
            if labels.get(key) != value:
                return False
        return True

    def opted_out(self, container: Workload) -> bool:
        return set_true(self.opt_out_key, container.labels, container.annotations)


class Safety(Strict):
    """Limits around every action, as in descheduler and VPA."""

    max_migrations_per_cycle: int = Field(
        default=5, ge=0, description="Migrations at most per evaluation cycle (0 = none)."
    )
    max_migrations_per_node: int = Field(
        default=2, ge=0,
        description="Migrations at most per cycle that leave or enter any one node (0 = none).",
    )
    cooldown_seconds: float = Field(
        default=0.0, ge=0,
        description="No action on a workload within this many seconds of policyd's last one.",
    )
    min_job_age_seconds: float = Field(
        default=0.0, ge=0,
        description=(
            "No action on a workload younger than this, counted from its latest (re)start: "
            "after a rolled-back move, the time the job needs to load its checkpoint and be "
            "ready to write one again."
        ),
    )
    move_backoff_seconds: float = Field(
        default=60.0, ge=0,
        description=(
            "After a failed move, no action on the workload for this long, doubled for each "
            "further failure in a row (at most 64 times; 0 = no back-off)."
        ),
    )


class Metadata(Strict):
    name: str = Field(
        min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        description="The policy's name: lowercase letters, digits and '-' (a DNS label).",
    )


class MoveGrace(Strict):
    """The field of every kind that moves jobs: how long a move waits for the checkpoint."""

    migration_grace_seconds: float = Field(
        default=60.0, ge=0, le=3600,
        description="How long a job may take to checkpoint and exit after SIGTERM.",
    )


class MoveCost(MoveGrace):
    """The fields of a kind that weighs a move against what it costs the job."""

    migration_cost_seconds: float = Field(
        default=30.0, ge=0, le=3600,
        description="What a move costs a job: checkpoint, restart and restore, seconds.",
    )


class MoveGain(MoveCost):
    """The fields of a kind that moves a job only when the forecast's gain beats the cost."""

    migration_margin: float = Field(
        default=1.0, ge=0, le=100,
        description="A move is made when its predicted gain exceeds its cost x (1 + this).",
    )

    @property
    def move_threshold_seconds(self) -> float:
        """The predicted gain a move must exceed: its cost x (1 + margin)."""
        return self.migration_cost_seconds * (1.0 + self.migration_margin)


class CommonSpec(Strict):
    """Fields every kind's spec has."""

    evaluation: Evaluation = Field(default_factory=Evaluation)
    selector: Selector = Field(default_factory=Selector)
    dry_run: bool = Field(default=False, description="Decide and report, never act.")
    safety: Safety = Field(default_factory=Safety)
    window_intervals: int = Field(
        default=20, ge=2, le=1000,
        description="How many intervals of history are replayed to recompute categories.",
    )
    priority: int = Field(
        default=0, ge=-1_000_000, le=1_000_000,
        description=(
            "When several policies select one container for the same class of action (CPU "
            "limits, placement), the one with the highest priority owns it (equal priorities: "
            "the name first in alphabetical order); the others leave it alone."
        ),
    )
    on_target: Literal["notify", "deprioritize", "stop"] = Field(
        default="notify",
        description=(
            f"When a job reaches the loss it declares ({TARGET_LOSS}): notify (an alert, the "
            "decision says so), deprioritize (its CPU drops to the kind's floor) or stop (the "
            "checkpoint protocol: SIGTERM, the job checkpoints and exits; it is marked "
            "delivered, never restarted or migrated, and its checkpoint is kept)."),
    )
    on_converged: Literal["notify", "deprioritize", "stop"] = Field(
        default="notify",
        description=(
            "When the forecast says a job's loss will improve by less than converged_below "
            "(relative) over the rest of its run: notify, deprioritize or stop, as on_target."),
    )
    converged_below: float = Field(
        default=0.01, gt=0, lt=1,
        description=(
            "A job is converged when its fitted loss curve says the loss will still fall by "
            "less than this fraction of today's loss: to the end of its run when it reports "
            "its total steps, else to the curve's floor. Not one slow interval: the whole "
            "rest of the run."),
    )
    stop_grace_seconds: float | None = Field(
        default=None, ge=0, le=3600,
        description=(
            "How long a stopped job may take to write its checkpoint and exit after SIGTERM "
            "(default: the backend's grace_seconds)."),
    )


def check_relative_alpha(alpha: float, evaluation: Evaluation, example: str) -> None:
    """With relative normalization alpha is a fraction of the previous value: below 1."""
    if evaluation.normalization == "relative" and alpha >= 1:
        raise ValueError(
            f"alpha ({alpha:g}) must be below 1 with relative normalization: it is a "
            f"fraction ({example})"
        )


class PolicyDocument(Strict):
    """The envelope of every policy document; each kind narrows `kind` and `spec`."""

    api_version: Literal["policyd.io/v1alpha1"] = Field(alias="apiVersion")
    kind: str
    metadata: Metadata
    spec: CommonSpec

    @property
    def name(self) -> str:
        return self.metadata.name


_D = TypeVar("_D", bound=PolicyDocument)


def of_kind(policy: PolicyDocument, document: type[_D], kind: str) -> _D:
    """`policy` as its kind's document model; a TypeError when a planner is handed a policy of
    another kind (the registry routes each policy to its own kind's planner)."""
    if not isinstance(policy, document):
        raise TypeError(f"{kind} cannot plan policy {policy.name!r} of kind {policy.kind!r}")
    return policy
