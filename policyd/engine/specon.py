"""SpeCon: speculative migration of converged jobs (thesis section 5.2, Algorithms 3, 4, 5).

(The helper implementing this module replaces this docstring with the theory of operation.)
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from policyd.engine.spec import CommonSpec, PolicyDocument, Strict
from policyd.model import Decision, Snapshot


class Weights(Strict):
    """Algorithm 4's category weights; the thesis requires pc > wc > cc."""

    pc: float = Field(default=2.0, gt=0, description="Weight of a progressing container.")
    wc: float = Field(default=1.5, gt=0, description="Weight of a watching container.")
    cc: float = Field(default=1.0, gt=0, description="Weight of a converged container.")

    @model_validator(mode="after")
    def _ordered(self) -> Weights:
        if not self.pc > self.wc:
            raise ValueError(f"pc ({self.pc:g}) must be greater than wc ({self.wc:g})")
        if not self.wc > self.cc:
            raise ValueError(f"wc ({self.wc:g}) must be greater than cc ({self.cc:g})")
        return self


class SpeConSpec(CommonSpec):
    """SpeCon's arguments (thesis Table 5.1; section 6.2 for the values used)."""

    alpha: float = Field(
        default=0.01, gt=0,
        description="Categorization threshold on the gain g (relative: a fraction, 0.01 = 1%).",
    )
    interval_seconds: float = Field(
        default=30.0, ge=1, le=86400, description="Categorization interval t_m - t_m-1, seconds."
    )
    weights: Weights = Field(default_factory=Weights)
    balance_factor: Literal["auto"] | int = Field(
        default="auto",
        description="Algorithm 5's bf: auto = floor(active jobs / workers), or a whole number >= 1.",
    )
    rebalance: bool = Field(
        default=True, description="Run Algorithm 5 once every job has been reallocated."
    )
    migration_grace_seconds: float = Field(
        default=60.0, ge=0, le=3600,
        description="How long a job may take to checkpoint and exit after SIGTERM.",
    )

    @model_validator(mode="after")
    def _check(self) -> SpeConSpec:
        if isinstance(self.balance_factor, int) and self.balance_factor < 1:
            raise ValueError(
                f"balance_factor ({self.balance_factor}) must be 'auto' or a whole number >= 1"
            )
        if self.evaluation.normalization == "relative" and self.alpha >= 1:
            raise ValueError(
                f"alpha ({self.alpha:g}) must be below 1 with relative normalization: it is a "
                "fraction (0.01 = 1%)"
            )
        return self


class SpeConPolicy(PolicyDocument):
    kind: Literal["SpeCon"]
    spec: SpeConSpec


def plan(policy: PolicyDocument, snapshot: Snapshot) -> Decision:
    raise NotImplementedError
