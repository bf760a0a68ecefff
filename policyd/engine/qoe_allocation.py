"""One worker's cores shared out so that as many QoE targets as possible are met.

Theory of operation. Each job on the worker comes with the cores it needs to meet its target
(`need`, from the speed model: `policyd.engine.qoe`), infinite when no allocation this worker
can give meets it, or no need at all (no target, or no measurement yet). Every job keeps at
least the floor, capacity / (beta * n), so none starves. Then:

1. Selection. For a single capacity, taking the smallest needs first satisfies the most jobs
   there can be (any set of k jobs that fits needs at least the k smallest needs). But a job
   already served (an incumbent: it meets its target, or holds its need) is on track, and
   trading it for a newcomer of a slightly smaller need gains nothing and costs both a change
   of limit: so incumbents are kept first, smallest needs first, while they fit (with every
   other job's floor); then the other jobs, smallest needs first, while they fit; and an
   incumbent is given up only when that lets at least two more jobs in (the count goes up).
   Hysteresis: an incumbent's need counts `hysteresis` smaller when it is weighed against
   others. The jobs left out keep the floor (and a part of what is left, below): the
   shortfall falls on as few jobs as possible rather than on everyone.
2. The chosen jobs get their needs, then, while there is room, up to what they `want` (a job
   on track keeps the cores it holds within its settling band, `policyd.engine.qoe`): the
   selection counts needs only, so a job holding more than it needs never keeps another job
   out; when the room is short, each chosen job gets the same share of its extra.
3. What is left goes first to the jobs without a target (equal shares, up to what each can
   use), then to the targeted jobs left out (they still progress), then to the satisfied ones
   in proportion to their needs (more headroom), each up to what it can use. With soft limits
   (`soft`: CPU shares, work-conserving) what is left goes to the jobs without a target only,
   and a job left out keeps exactly the floor: shares are weights, and the kernel hands the
   cores nobody was given to every busy job in proportion to its weight anyway. Were the
   left-out jobs to share what is left, their limits would follow every small move of the
   chosen jobs' needs, down and up, and never settle.
4. Settling under hard limits (`held`: the cores each job's cap gives it now). Caps are not
   work-conserving, so what is left must be handed out, but not anew every interval: a chosen
   job whose cores are within `min_change` of its cap keeps its cap (its limit would not move
   anyway, and the room must not be counted as given to it); after the jobs without a
   target, the left-out jobs and then the chosen ones keep the caps they hold while those
   fit, in that order (a shortfall falls on as few jobs as possible: the last); only what is
   still left is spread as in 3. So a limit grows into cores nobody holds and falls only
   when a target's need, a floor or a newcomer takes them back. A need that flips in and out
   of reach takes lent cores back for nothing, a reversal for each lender: keeping reach
   steady is the speed model's part (`policyd.engine.qoe._speed`), not this module's.

Pure arithmetic on plain numbers: no snapshot, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from policyd.engine.waterfill import EPSILON, fill


@dataclass(frozen=True, kw_only=True)
class Claim:
    """One job's claim on its worker: `need` cores to meet its target (inf: infeasible; None:
    no target to meet now), `cap` the most it can use, `incumbent` whether it is served now
    (it meets its target or holds its need), `key` a tie-breaker (its id), `want` the cores
    it keeps when chosen and there is room (None: its need; never less than its need), `held`
    the cores its current limit gives it (None: unlimited or not known; hard limits only)."""

    key: str
    need: float | None
    cap: float
    incumbent: bool = False
    want: float | None = None
    held: float | None = None


@dataclass(frozen=True, kw_only=True)
class Share:
    """The outcome: cores per job (in the claims' order) and which jobs are to be satisfied."""

    cores: tuple[float, ...]
    selected: tuple[bool, ...]
    floor_cores: float


def _fit(order: Sequence[int], wanted: Callable[[int], float], room: float, floor: float,
         chosen: Sequence[int] = ()) -> list[int]:
    """`chosen` plus the jobs of `order` (in that order) whose extra over the floor still fits
    in `room` (the capacity left over every job's floor)."""
    out = list(chosen)
    used = sum(wanted(i) - floor for i in out)
    for i in order:
        if i in out:
            continue
        extra = wanted(i) - floor
        if used + extra <= room + EPSILON:
            out.append(i)
            used += extra
    return out


def _top_up(cores: list[float], claims: Sequence[Claim], caps: Sequence[float],
            chosen: Sequence[int], capacity: float) -> None:
    """The chosen jobs' cores raised from their needs towards what they want (module
    docstring, 2): all of it when it fits, else the same share of each one's extra."""
    extra = {i: max(min(claims[i].want or 0.0, caps[i]) - cores[i], 0.0) for i in chosen}
    total = sum(extra.values())
    room = capacity - sum(cores)
    if total <= EPSILON or room <= EPSILON:
        return
    given = min(1.0, room / total)
    for i, more in extra.items():
        cores[i] += more * given


def share(claims: Sequence[Claim], capacity: float, *, beta: float,
          hysteresis: float, soft: bool = False, min_change: float = 0.0) -> Share:
    """Cores per claim (module docstring)."""
    n = len(claims)
    if n == 0:
        return Share(cores=(), selected=(), floor_cores=0.0)
    floor = capacity / (beta * n)
    caps = [max(c.cap, floor) for c in claims]
    cores = [floor] * n
    selected = [False] * n

    def wanted(i: int) -> float:
        need = claims[i].need
        assert need is not None
        return min(max(need, floor), caps[i])

    def order(i: int) -> tuple[float, str]:
        need = wanted(i)
        return (need * (1.0 - hysteresis) if claims[i].incumbent else need, claims[i].key)

    finite = [i for i, c in enumerate(claims) if c.need is not None and math.isfinite(c.need)]
    incumbents = sorted((i for i in finite if claims[i].incumbent), key=order)
    others = sorted((i for i in finite if not claims[i].incumbent), key=order)
    chosen = _fit(incumbents, wanted, capacity - floor * n, floor)
    chosen = _fit(others, wanted, capacity - floor * n, floor, chosen)
    while True:  # give up the largest incumbent only when two or more others get in for it
        kept = [i for i in chosen if claims[i].incumbent]
        if not kept:
            break
        largest = max(kept, key=order)
        trial = _fit(others, wanted, capacity - floor * n, floor,
                     [i for i in chosen if i != largest and claims[i].incumbent])
        if len(trial) < len(chosen) + 1:
            break
        chosen = trial
    for i in chosen:
        cores[i] = wanted(i)
        selected[i] = True
    _top_up(cores, claims, caps, chosen, capacity)
    left = max(capacity - sum(cores), 0.0)
    free = [i for i, c in enumerate(claims) if c.need is None]
    left_out = [i for i, c in enumerate(claims) if c.need is not None and not selected[i]]
    chosen = [i for i in range(n) if selected[i]]
    if soft:
        fill(cores, [math.inf] * n, free, left)
        return Share(cores=tuple(cores), selected=tuple(selected), floor_cores=floor)
    for i in chosen:  # a limit within min_change of its cores stays (`policyd.engine.qoe`)
        held = claims[i].held
        if held is not None and abs(held - cores[i]) <= min_change * held and \
                held - cores[i] <= left:
            left -= held - cores[i]
            cores[i] = held
    left = fill(cores, caps, free, left)
    left = _keep(cores, claims, [*left_out, *chosen], left)
    left = fill(cores, caps, left_out, left)
    fill(cores, caps, chosen, left, weights=[cores[i] for i in chosen])
    return Share(cores=tuple(cores), selected=tuple(selected), floor_cores=floor)


def _keep(cores: list[float], claims: Sequence[Claim], order: Sequence[int],
          left: float) -> float:
    """Hard limits (module docstring, 4): the jobs of `order`, in that order, keep what their
    limits give them now while it fits in `left` (so a shortfall falls on the last); what is
    still left is returned."""
    for i in order:
        held = claims[i].held
        if held is None or not math.isfinite(held):
            continue
        more = min(max(held - cores[i], 0.0), left)
        cores[i] += more
        left -= more
    return left
