"""CPU sharing on one node, as Linux's CFS shares it between containers: pure functions.

Theory of operation. Every running job asks for `demand` cores (its maximum parallelism: more
threads than that do not help it). The kernel hands out the node's `capacity` by weighted
max-min fairness, "water-filling": a water level λ rises, job i receives min(limit_i, λ·w_i)
where limit_i = min(demand_i, cap_i), and λ stops where the capacity is used up or every job is
satisfied. Hence

* capacity is split in proportion to the weights among the jobs not yet satisfied;
* what a satisfied job (demand or cap reached) does not use flows to the others: CFS is
  work-conserving, except that a hard cap (quota) is never exceeded even when the node is idle.

How FlowCon's fraction f of the node (a `SetCpu`) becomes weights and caps, as Docker does it
(docs/design.md, "Limit semantics"):

* `shares`: Docker cpu_shares = f * 1024 against the default 1024 of an unlimited container, so
  the weight is f (relative, soft) and there is no cap;
* `quota`: Docker cpu_quota / cpu_period = f * capacity cores, a hard cap; weights stay equal;
* no policy (NA, the thesis's plain Docker): every job has f = 1, equal weights, no caps.

This module owns the arithmetic only: it knows nothing of jobs, time or policies.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

from policyd.model.snapshot import FloatArray

CpuMode = Literal["shares", "quota"]


def share_cpu(
    capacity_cores: float,
    demands: Sequence[float] | FloatArray,
    weights: Sequence[float] | FloatArray,
    caps: Sequence[float] | FloatArray | None = None,
) -> FloatArray:
    """Cores each job receives: weighted max-min fair, capped by demand and cap.

    `weights` must be positive; `caps` (cores, inf = none) default to none. The allocations
    never exceed the capacity, and they use all of it unless every job is satisfied.

    A node holds a handful of jobs and the simulator calls this at every event, so the loop
    works on Python floats (numpy's per-call overhead would dominate); the arithmetic is the
    same float64 arithmetic, operation for operation.
    """
    if not (math.isfinite(capacity_cores) and capacity_cores >= 0):
        raise ValueError(f"capacity must be a non-negative number of cores, got {capacity_cores}")
    demand, weight = _floats(demands), _floats(weights)
    if demand is None or weight is None or len(demand) != len(weight):
        raise ValueError("demands and weights must be one-dimensional and of equal length")
    if not all(d >= 0 and math.isfinite(d) for d in demand):
        raise ValueError("demands must be finite and non-negative")
    if not all(w > 0 and math.isfinite(w) for w in weight):
        raise ValueError("weights must be positive and finite")
    limit = demand
    if caps is not None:
        cap = _floats(caps)
        if cap is None or len(cap) != len(demand) or any(c < 0 or math.isnan(c) for c in cap):
            raise ValueError("caps must be non-negative (inf for none), one per job")
        limit = [d if d < c else c for d, c in zip(demand, cap, strict=True)]  # np.minimum

    allocation = [0.0] * len(demand)
    # Jobs in the order in which the rising level satisfies them: limit_i / w_i ascending
    # (stable, so equal jobs keep their order and the result is deterministic).
    order = sorted(range(len(demand)), key=lambda i: limit[i] / weight[i])
    remaining = float(capacity_cores)
    weight_left = _numpy_sum(weight)
    for k, i in enumerate(order):
        level = remaining / weight_left  # cores per unit of weight if nobody else were satisfied
        if limit[i] <= level * weight[i]:
            # Satisfied below the level: takes its limit, the rest rise further.
            allocation[i] = limit[i]
            remaining = max(remaining - limit[i], 0.0)
            weight_left -= weight[i]
        else:
            # Nobody after i is satisfied either: they share what is left by weight.
            for j in order[k:]:
                allocation[j] = level * weight[j]
            break
    return np.array(allocation, dtype=np.float64)


def _floats(values: Sequence[float] | FloatArray) -> list[float] | None:
    """`values` as a list of Python floats, or None when they are not one-dimensional."""
    if type(values) is list and all(type(v) is float for v in values):
        return values  # the simulator's case, as it is
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        return None
    listed: list[float] = array.tolist()
    return listed


def _numpy_sum(values: list[float]) -> float:
    """`np.sum(values)` to the last bit, without numpy for the few values of one node: numpy
    adds fewer than 8 values in order (its pairwise summation starts at 8)."""
    if len(values) >= 8:
        return float(np.sum(np.array(values, dtype=np.float64)))
    total = 0.0
    for value in values:
        total += value
    return total


def weight_and_cap(fraction: float, mode: CpuMode, capacity_cores: float) -> tuple[float, float]:
    """The CFS weight and cap (cores, inf = none) of a job limited to `fraction` of the node.

    shares: cpu_shares = fraction * 1024 -> weight `fraction`, no cap.
    quota: cpu_quota = fraction * capacity cores -> weight 1, cap fraction * capacity.
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    if mode == "shares":
        return fraction, float("inf")
    return 1.0, fraction * capacity_cores


def share_node(
    capacity_cores: float,
    demands: Sequence[float],
    fractions: Sequence[float],
    modes: Sequence[CpuMode],
) -> FloatArray:
    """Cores per job on one node from each job's demand, FlowCon fraction and limit mode."""
    terms = [weight_and_cap(f, m, capacity_cores) for f, m in zip(fractions, modes, strict=True)]
    weights = [w for w, _ in terms]
    caps = [c for _, c in terms]
    return share_cpu(capacity_cores, demands, weights, caps)
