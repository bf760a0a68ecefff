"""FlowCon: growth-efficiency CPU limits per worker (thesis section 5.1, Algorithms 1 and 2).

(The helper implementing this module replaces this docstring with the theory of operation.)
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from policyd.engine.spec import CommonSpec, PolicyDocument
from policyd.model import Decision, Snapshot


class FlowConSpec(CommonSpec):
    """FlowCon's arguments (thesis Algorithm 1, line 1; section 6.1 for the values used)."""

    alpha: float = Field(
        default=0.05, gt=0,
        description=(
            "Growth-efficiency threshold: below it a job moves NL -> WL -> CL. With relative "
            "normalization a fraction (0.05 = improved by under 5% per interval per core)."
        ),
    )
    interval_seconds: float = Field(
        default=20.0, ge=1, le=86400, description="Base evaluation interval itval_0, seconds."
    )
    max_interval_seconds: float = Field(
        default=320.0, ge=1, le=86400,
        description="Cap of the exponential back-off while every job is in CL, seconds.",
    )
    beta: float = Field(
        default=2.0, ge=1, le=100,
        description="CL floor: a CL job keeps at least 1 / (beta * n) of the node (n jobs).",
    )
    mode: Literal["shares", "quota"] = Field(
        default="shares",
        description="shares: soft, work-conserving limits; quota: hard caps.",
    )

    @model_validator(mode="after")
    def _check(self) -> FlowConSpec:
        if self.max_interval_seconds < self.interval_seconds:
            raise ValueError(
                f"max_interval_seconds ({self.max_interval_seconds:g}) must be at least "
                f"interval_seconds ({self.interval_seconds:g})"
            )
        if self.evaluation.normalization == "relative" and self.alpha >= 1:
            raise ValueError(
                f"alpha ({self.alpha:g}) must be below 1 with relative normalization: it is a "
                "fraction (0.05 = 5%)"
            )
        return self


class FlowConPolicy(PolicyDocument):
    kind: Literal["FlowCon"]
    spec: FlowConSpec


def plan(policy: PolicyDocument, snapshot: Snapshot) -> Decision:
    raise NotImplementedError
