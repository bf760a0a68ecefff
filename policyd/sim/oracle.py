"""The oracle: shortest remaining processing time (SRPT) per node, a reference point.

No real scheduler knows how much work a training job has left; the oracle does, and serves the
jobs with the least remaining work first. Our jobs speed up sub-linearly with cores (Amdahl,
p = 0.3-0.7 recorded), so a job's first core is worth more than its second: the oracle gives
one core to each job in SRPT order, and only then the cores left over, again in SRPT order, up
to each job's maximum parallelism. (Plain SRPT, all cores to the shortest job, was measured
worse than fair sharing on our curves: 386.8 s against 314.1 s average JCT on
specon-fixed-20.) It shows how far a policy is from what knowing the future allows. It is
a *per-node* bound: placement is the same as the baseline's and nothing ever migrates, so a
policy that moves jobs between nodes (SpeCon) can beat it; and with parallelism limits and
sub-core speeds it is a good reference, not a proof of optimality.

Remaining work is measured in seconds at the job's own best speed on this node (its remaining
iterations times the iteration time at min(max parallelism, capacity) cores), so jobs of
different profiles compare fairly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from policyd.model.snapshot import FloatArray


def srpt_share(
    capacity_cores: float,
    demands: Sequence[float],
    remaining_seconds: Sequence[float],
) -> FloatArray:
    """Cores per job: one core each in SRPT order, then the rest in SRPT order up to each job's
    demand (ties: list order)."""
    demand_array = np.asarray(demands, dtype=np.float64)
    remaining_array = np.asarray(remaining_seconds, dtype=np.float64)
    if demand_array.shape != remaining_array.shape or demand_array.ndim != 1:
        raise ValueError("demands and remaining_seconds must be one-dimensional, one per job")
    # Python floats: a node holds a handful of jobs, and numpy's per-call overhead would
    # dominate (the same float64 arithmetic either way).
    demand: list[float] = demand_array.tolist()
    remaining: list[float] = remaining_array.tolist()
    allocation = [0.0] * len(demand)
    left = float(capacity_cores)
    order = sorted(range(len(remaining)), key=remaining.__getitem__)  # stable: ties keep order
    first_cores = [d if d < 1.0 else 1.0 for d in demand]  # np.minimum(demand, 1.0)
    for limit in (first_cores, demand):  # first cores, then the extra ones
        for i in order:
            if left <= 0:
                break
            extra = min(limit[i] - allocation[i], left)
            allocation[i] += extra
            left -= extra
    return np.array(allocation, dtype=np.float64)
