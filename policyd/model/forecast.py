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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt


def seconds_per_step(cores: float, *, cap_cores: float, serial_seconds: float,
                     parallel_seconds: float) -> float:
    """A job's seconds per step on `cores` (capped at `cap_cores`, what it can use), from its
    fitted speed model: Amdahl from one core up (`serial + parallel / cores`), time-sliced
    below one (the one-core time over the fraction). Infinite on no cores."""
    c = min(cores, cap_cores)
    if c <= 0:
        return float("inf")
    if c < 1:
        return (serial_seconds + parallel_seconds) / c
    return serial_seconds + parallel_seconds / c


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
        for name in CHECKED:
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")
        if not self.low_seconds <= self.remaining_seconds <= self.high_seconds + 1e-9:
            raise ValueError(f"the range [{self.low_seconds}, {self.high_seconds}] must hold "
                             f"remaining_seconds {self.remaining_seconds}")

    @classmethod
    def checked(cls, fields: dict[str, Any]) -> JobForecast:
        """A forecast of `fields` that the caller has checked as `__post_init__` would
        (`valid`: the engine checks 10,000 at once), built without the check and the frozen
        `__init__`'s one `object.__setattr__` per field. Every field must be given."""
        made = object.__new__(cls)
        made.__dict__.update(fields)
        return made


CHECKED = ("steps_done", "remaining_steps", "remaining_seconds", "finish_at", "low_seconds",
           "high_seconds", "steps_per_second")
"""The fields that must be finite and >= 0."""


def valid(columns: Mapping[str, npt.NDArray[np.float64]]) -> npt.NDArray[np.bool_]:
    """Per row of `columns` (each field of `CHECKED` as an array), whether `JobForecast`'s
    check passes: every one finite and >= 0, and the range holding the remaining seconds."""
    ok = np.ones(len(columns["remaining_seconds"]), dtype=np.bool_)
    for name in CHECKED:
        value = columns[name]
        ok &= np.isfinite(value) & (value >= 0)
    ok &= ((columns["low_seconds"] <= columns["remaining_seconds"])
           & (columns["remaining_seconds"] <= columns["high_seconds"] + 1e-9))
    return ok
