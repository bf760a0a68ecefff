"""One worker's cores shared out so that as many QoE targets as possible are met.

Theory of operation. Each job on the worker comes with the cores it needs to meet its target
(`need`, from the speed model: `policyd.engine.qoe`), infinite when no allocation this worker
can give meets it, or no need at all (no target, or no measurement yet). Every job keeps at
least the floor, capacity / (beta * n), so none starves. Then:

1. Selection. The jobs with a finite need, smallest first, are satisfied while their needs (on
   top of every other job's floor) fit in the worker: for a single capacity, taking the
   smallest needs first satisfies the most jobs there can be (any set of k jobs that fits
   needs at least the k smallest needs). Hysteresis: a job satisfied now counts its need
   `hysteresis` smaller, so two jobs of nearly equal needs do not trade places every interval.
   The jobs left out keep the floor (and a part of what is left, below): the shortfall falls
   on as few jobs as possible rather than on everyone.
2. What is left goes first to the jobs without a target (equal shares, up to what each can
   use), then to the targeted jobs left out (they still progress), then to the satisfied ones
   in proportion to their needs (more headroom), each up to what it can use.

Pure arithmetic on plain numbers: no snapshot, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

EPSILON = 1e-12


@dataclass(frozen=True, kw_only=True)
class Claim:
    """One job's claim on its worker: `need` cores to meet its target (inf: infeasible; None:
    no target to meet now), `cap` the most it can use, `satisfied` whether it meets its target
    now (hysteresis), `key` a tie-breaker (its id)."""

    key: str
    need: float | None
    cap: float
    satisfied: bool = False


@dataclass(frozen=True, kw_only=True)
class Share:
    """The outcome: cores per job (in the claims' order) and which jobs are to be satisfied."""

    cores: tuple[float, ...]
    selected: tuple[bool, ...]
    floor_cores: float


def _fill(cores: list[float], caps: Sequence[float], who: Sequence[int], amount: float,
          weights: Sequence[float] | None = None) -> float:
    """Give `amount` to the jobs `who` in proportion to `weights` (equal by default), none
    beyond its cap; what could not be given is returned."""
    open_ = [i for i in who if caps[i] - cores[i] > EPSILON]
    while amount > EPSILON and open_:
        weight = {i: (weights[k] if weights is not None else 1.0)
                  for k, i in enumerate(who) if i in open_}
        total = sum(weight.values())
        if total <= 0:
            break
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


def share(claims: Sequence[Claim], capacity: float, *, beta: float,
          hysteresis: float) -> Share:
    """Cores per claim (module docstring)."""
    n = len(claims)
    if n == 0:
        return Share(cores=(), selected=(), floor_cores=0.0)
    floor = capacity / (beta * n)
    caps = [max(c.cap, floor) for c in claims]
    cores = [floor] * n
    used = floor * n
    selected = [False] * n

    def order(i: int) -> tuple[float, str]:
        need = claims[i].need
        assert need is not None
        return (need * (1.0 - hysteresis) if claims[i].satisfied else need, claims[i].key)

    candidates = sorted((i for i, c in enumerate(claims)
                         if c.need is not None and math.isfinite(c.need)), key=order)
    for i in candidates:
        need = claims[i].need
        assert need is not None
        wanted = min(max(need, floor), caps[i])
        if used + wanted - floor <= capacity + EPSILON:
            cores[i] = wanted
            used += wanted - floor
            selected[i] = True
    left = max(capacity - used, 0.0)
    free = [i for i, c in enumerate(claims) if c.need is None]
    left_out = [i for i, c in enumerate(claims) if c.need is not None and not selected[i]]
    chosen = [i for i in range(n) if selected[i]]
    left = _fill(cores, caps, free, left)
    left = _fill(cores, caps, left_out, left)
    _fill(cores, caps, chosen, left,
          weights=[cores[i] for i in chosen])
    return Share(cores=tuple(cores), selected=tuple(selected), floor_cores=floor)
