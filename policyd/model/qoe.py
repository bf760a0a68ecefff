"""What a decision says about a job's declared targets: its QoE standing and its delivery.

Two plain frozen values the engine computes (`policyd.engine.qoe`, `policyd.engine.delivery`)
and every reader shows (`plan`, the daemon's metrics, the alerter):

* `QoeStatus`: a job's quality-of-experience target (`policyd.io/qoe-target`, e.g.
  `steps_per_second>=40`), what was measured against it and where it stands: satisfied, short
  (by `shortfall`, a fraction of the target), or infeasible (no allocation this node can give
  meets it). `short_seconds` is how long the measurements in the policy's window have been
  short without a break; `alerting` says the policy's alert threshold is passed.
* `Delivery`: the job has reached its declared target loss or converged, and what the policy
  does about it (`on_target` / `on_converged`: notify, deprioritize or stop).

No I/O, no clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

QoeState = Literal["satisfied", "short", "infeasible"]
Comparison = Literal[">=", "<="]
DeliveryEvent = Literal["target", "converged"]
Response = Literal["notify", "deprioritize", "stop"]

RESPONSES: tuple[Response, ...] = ("notify", "deprioritize", "stop")


@dataclass(frozen=True, kw_only=True)
class QoeStatus:
    """One job measured against its QoE target (see the module docstring)."""

    target: str
    """The declaration as the job wrote it (`steps_per_second>=40`)."""
    metric: str
    comparison: Comparison
    target_value: float
    measured: float
    state: QoeState
    shortfall: float = 0.0
    """How far short, as a fraction of the target (0 when satisfied)."""
    short_seconds: float = 0.0
    alerting: bool = False
    cores_needed: float | None = None
    """The cores the speed model says meet the target (None: not known)."""

    def __post_init__(self) -> None:
        for name in ("target_value", "measured", "shortfall", "short_seconds"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")

    @property
    def ratio(self) -> float:
        """Measured over target in the better direction: >= 1 meets it (a `<=` target reads
        target / measured)."""
        if self.comparison == ">=":
            return self.measured / self.target_value
        return self.target_value / self.measured if self.measured > 0 else math.inf


@dataclass(frozen=True, kw_only=True)
class Delivery:
    """The job reached its target loss (`target`) or converged, and the policy's response."""

    event: DeliveryEvent
    response: Response
    reason: str

    def __post_init__(self) -> None:
        if not self.reason:
            raise ValueError("a delivery must carry a reason")
