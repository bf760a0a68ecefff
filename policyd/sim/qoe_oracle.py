"""The QoE oracle: each node's cores shared so that the most jobs meet their targets.

A reference point for the qoe-* scenarios, as SRPT is for the others (`policyd.sim.oracle`):
it knows what no policy knows, every job's true speed at any number of cores (its profile)
and the work it has left. A job's steps-per-second target R over its whole run is a deadline:
it meets R when it finishes by submit + iterations / R. So at every event (the world shares
CPU again at each), per node:

1. each targeted job's need: the cores at which it finishes exactly by its deadline from now
   on (its remaining iterations over the time left, turned into cores by inverting its speed
   curve); infinite when even all the cores it can use are too few, or the deadline passed;
2. the search: the largest set of jobs whose needs fit in the node. With one capacity, the
   smallest needs first give it (any k jobs that fit need at least the k smallest needs,
   so k of those fit too); `most_met` is that search, and the tests check it against trying
   every subset;
3. the chosen jobs get their needs; what is left goes to the jobs without a target (equal
   shares up to what each can use), then to the targeted jobs not chosen, then to the chosen
   ones (in proportion to their needs), each up to what it can use.

No floors, no measurement delay, no model error: a policy can only approach it. It is a
per-node reference (placement is the baseline's, nothing migrates) and greedy in time (each
event meets the most targets from then on; no lookahead over future arrivals).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from policyd.engine.waterfill import EPSILON, fill
from policyd.sim.types import JobSpec


def cores_for(spec: JobSpec, rate: float) -> float:
    """The fewest cores at which `spec` makes `rate` iterations per second (inf: none up to
    its maximum parallelism); the inverse of `JobSpec.rate_at`."""
    if rate <= 0:
        return 0.0
    profile = spec.profile
    per = 1.0 / (rate * spec.work_scale)  # seconds per iteration wanted, in 1-core units
    t1, p = profile.iteration_seconds_1core, profile.parallel_fraction
    if per >= t1:
        cores = t1 / per  # time slicing below one core
    elif per > t1 * (1.0 - p) and p > 0:
        cores = t1 * p / (per - t1 * (1.0 - p))  # Amdahl: t1 ((1 - p) + p / c) = per
    else:
        return math.inf
    return cores if cores <= profile.max_parallelism + 1e-9 else math.inf


@dataclass(frozen=True, kw_only=True)
class OracleJob:
    """One running job as the oracle sees it: the most cores it can use, and its need (None:
    no target)."""

    demand: float
    need: float | None


def deadline_need(spec: JobSpec, rate: float, *, progress: float, now: float,
                  capacity: float) -> float:
    """Cores that finish `spec` by its target's deadline from `now` (inf when impossible)."""
    remaining = spec.profile.iterations - progress
    if remaining <= 0:
        return 0.0
    left = spec.submit_seconds + spec.profile.iterations / rate - now
    if left <= 0:
        return math.inf
    need = cores_for(spec, remaining / left)
    return need if need <= min(capacity, spec.profile.max_parallelism) + 1e-9 else math.inf


def most_met(needs: Sequence[float | None], capacity: float) -> list[bool]:
    """Which jobs to satisfy: the largest set of finite needs that fits in `capacity`
    (smallest needs first; ties in list order)."""
    chosen = [False] * len(needs)
    order = sorted((i for i, n in enumerate(needs) if n is not None and math.isfinite(n)),
                   key=lambda i: (needs[i], i))
    used = 0.0
    for i in order:
        need = needs[i]
        assert need is not None
        if used + need > capacity + 1e-9:
            break
        used += need
        chosen[i] = True
    return chosen


def qoe_share(capacity: float, jobs: Sequence[OracleJob]) -> list[float]:
    """Cores per job (module docstring, 2-3)."""
    chosen = most_met([j.need for j in jobs], capacity)
    caps = [min(j.demand, capacity) for j in jobs]
    cores = [min(j.need, caps[i]) if chosen[i] and j.need is not None else 0.0
             for i, j in enumerate(jobs)]
    left = max(capacity - sum(cores), 0.0)
    free = [i for i, j in enumerate(jobs) if j.need is None]
    missed = [i for i, j in enumerate(jobs) if j.need is not None and not chosen[i]]
    met = [i for i in range(len(jobs)) if chosen[i]]
    left = fill(cores, caps, free, left)
    left = fill(cores, caps, missed, left)
    fill(cores, caps, met, left, weights=[max(cores[i], EPSILON) for i in met])
    return cores
