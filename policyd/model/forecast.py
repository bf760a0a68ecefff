"""Where a job is going, as a decision reports it: the forecast beside each assessment.

A plain frozen value (the engine computes it, `policyd.engine.forecasting`): the steps done and
the run's total when known, the steps and seconds left at the job's current allocation, when
that is (`finish_at`, epoch seconds), a range [low, high] the truth is expected to fall in, and,
when the job declares a target loss, the seconds until it reaches it. `basis` says what the
remaining steps come from: the job's declared total, or the step at which its fitted loss curve
would turn converged under the policy's alpha. No I/O, no clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class JobForecast:
    """One job's forecast at the decision's time (seconds count from `Decision.time`)."""

    steps_done: float
    total_steps: float | None
    remaining_steps: float
    remaining_seconds: float
    finish_at: float
    low_seconds: float
    high_seconds: float
    steps_per_second: float
    basis: str
    target_loss: float | None = None
    target_eta_seconds: float | None = None
    note: str = ""
    remaining_improvement: float | None = None
    """How much better the loss is still expected to get, as a fraction of the loss now (to the
    end of the run when its total steps are known, else to the curve's floor); None when the
    policy did not ask (only `on_converged` reads it)."""

    def __post_init__(self) -> None:
        for name in ("steps_done", "remaining_steps", "remaining_seconds", "finish_at",
                     "low_seconds", "high_seconds", "steps_per_second"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")
        if not self.low_seconds <= self.remaining_seconds <= self.high_seconds + 1e-9:
            raise ValueError(f"the range [{self.low_seconds}, {self.high_seconds}] must hold "
                             f"remaining_seconds {self.remaining_seconds}")
