"""Water-filling: spread an amount of cores over jobs in proportion to weights, none beyond
its cap. Pure; shared by the QoE allocation (`policyd.engine.qoe_allocation`) and the
simulator's QoE oracle (`policyd.sim.qoe_oracle`), which must share the same arithmetic."""

from __future__ import annotations

from collections.abc import Sequence

EPSILON = 1e-12
"""Amounts and room below this are nothing."""


def fill(cores: list[float], caps: Sequence[float], who: Sequence[int], amount: float,
         weights: Sequence[float] | None = None) -> float:
    """Give `amount` to the jobs `who` (indices into `cores` and `caps`, which `cores` gains
    in place) in proportion to `weights` (one per entry of `who`, equal by default), none
    beyond its cap; what could not be given is returned. Jobs of weight 0 get nothing."""
    weight = dict(zip(who, weights if weights is not None else [1.0] * len(who), strict=True))
    open_ = [i for i in who if caps[i] - cores[i] > EPSILON and weight[i] > 0]
    while amount > EPSILON and open_:
        total = sum(weight[i] for i in open_)
        given = 0.0
        for i in open_:
            extra = min(amount * weight[i] / total, caps[i] - cores[i])
            cores[i] += extra
            given += extra
        amount -= given
        open_ = [i for i in open_ if caps[i] - cores[i] > EPSILON]
        if given <= EPSILON:
            break
    return max(amount, 0.0)
