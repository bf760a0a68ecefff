"""SpeCon's Algorithm 5: rebalance the cluster once every job has been reallocated.

Theory of operation. After Algorithm 4 has reallocated every job (each is `markers.migrated`),
placements are frozen, and jobs that finish early leave workers idle (thesis section 5.2.3). The
finishing times are unknown, so the thesis uses the *converged duration* d_c = now - t_c, with
t_c = `markers.converged_at` (when Algorithm 4 marked c, whether it moved or stayed): the job
that converged most recently is assumed to have the longest to run, and it is the one moved.

* |w| is the number of selected containers on w (every worker in the snapshot) and the balance
  factor bf = floor(sum |w| / |W|) (line 9), unless the policy fixes bf.
* Idle workers exist (line 10): each idle worker, by name, if |w| < bf, takes the container
  with the smallest d_c from any other worker (lines 11-18), once per cycle.
* None idle (line 19): the workers with |w| < bf - 1 form T; each of them, by name, takes once
  the smallest-d_c container from a worker outside T (lines 20-31), so no job is moved between
  two workers that are both short of work.

A moved job is marked rebalanced (the actuator writes the marker) and is never chosen again:
without that, the job just moved has the smallest d_c of all and the next cycle could move it
back (ping-pong). Jobs without `converged_at` have no d_c and are never chosen. Ties in d_c go
to the smaller container id. The guards apply: a candidate that policyd may not act on (opt-out,
minimum age, cooldown) or whose worker is out of migration budget is passed over for the next
smallest d_c, and its note says why.

This module decides only; it is pure like the rest of the engine.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from policyd.engine import guards
from policyd.engine.spec import CommonSpec
from policyd.model import Container, Migrate

_LISTED_WORKERS = 8


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """A reallocated job Algorithm 5 may choose: its converged duration d_c, id and worker, and
    why policyd may not move it now (the guards; None: it may)."""

    converged_seconds: float
    container: str
    node: str
    blocked: str | None = None


def candidates_of(active: Sequence[Container], spec: CommonSpec, now: float) -> list[Candidate]:
    """The jobs of `active` (the categorised ones) that Algorithm 5 may choose: marked converged
    (`converged_at`), not rebalanced before; with the guards' verdict on each."""
    return [Candidate(converged_seconds=now - c.markers.converged_at, container=c.id,
                      node=c.node, blocked=guards.action_blocked(c, spec, now, disrupts=True))
            for c in active
            if c.markers.converged_at is not None and not c.markers.rebalanced]


@dataclass(frozen=True, kw_only=True)
class Rebalancing:
    """Algorithm 5's outcome: migrations, per-container notes (by id) and notes for the run."""

    actions: tuple[Migrate, ...]
    container_notes: Mapping[str, str]
    notes: tuple[str, ...]


def balance_factor_of(setting: Literal["auto"] | int, load: Mapping[str, int]) -> int:
    """bf: line 9, floor(sum |w| / |W|) over every worker, or the policy's fixed number."""
    if setting != "auto":
        return setting
    return sum(load.values()) // max(len(load), 1)


def _listed(workers: Sequence[str]) -> str:
    shown = ", ".join(workers[:_LISTED_WORKERS])
    more = len(workers) - _LISTED_WORKERS
    return f"{shown} and {more} more" if more > 0 else shown


def rebalance_cluster(
    *,
    policy: str,
    now: float,
    load: Mapping[str, int],
    candidates: Sequence[Candidate],
    balance_factor: Literal["auto"] | int,
    budget: guards.MigrationBudget,
    grace_seconds: float | None = None,
) -> Rebalancing:
    """Algorithm 5 on the cluster's state.

    `load` is |w| for every worker; `candidates` the jobs that may be chosen (`candidates_of`
    the categorised containers, or the node agents' reports: as many per worker as the budget
    may move off it are enough, since every candidate of a worker past those is refused);
    `budget` is shared with Algorithm 4 of the same cycle; `grace_seconds` goes on every move
    (the policy's `migration_grace_seconds`).
    """
    load = dict(load)
    bf = balance_factor_of(balance_factor, load)
    idle = sorted(w for w, jobs in load.items() if jobs == 0)
    if idle:
        # Lines 10-18: each idle worker takes one job if |w| < bf, from any other worker.
        targets, ceiling, sources_excluded = idle, bf, frozenset[str]()
        head = f"rebalance: bf={bf}, idle workers: {_listed(idle)}"
    else:
        # Lines 19-31: workers with |w| < bf - 1 take one job each, from workers outside T.
        targets = sorted(w for w, jobs in load.items() if jobs < bf - 1)
        ceiling, sources_excluded = bf - 1, frozenset(targets)
        head = (f"rebalance: bf={bf}, no idle worker; below bf-1={bf - 1}: "
                f"{_listed(targets) or 'none'}")

    # D (lines 2-6): converged durations of the jobs that may still be chosen, smallest first.
    pool = sorted((c for c in candidates if c.node not in sources_excluded),
                  key=lambda c: (c.converged_seconds, c.container))
    actions: list[Migrate] = []
    notes: dict[str, str] = {}
    run_notes = [head]
    # Every reason to pass a candidate over lasts for the whole cycle (taken, blocked, or its
    # worker out of budget), so one walk over D serves all the targets.
    remaining: Iterator[Candidate] = iter(pool)
    for target in targets:
        if load[target] >= ceiling:
            continue
        refusal = budget.refusal(target, target)
        if refusal is not None:
            run_notes.append(f"rebalance: nothing moved to {target}: {refusal}")
            continue
        for c in remaining:
            d = c.converged_seconds
            why_not = c.blocked or budget.refusal(c.node, target)
            if why_not is not None:
                notes.setdefault(c.container,
                                 f"rebalance candidate (d={d:.0f} s), no action: {why_not}")
                continue
            state = "idle" if not load[target] else f"holds {load[target]} < bf-1={bf - 1}"
            reason = (f"rebalance: {target} {state}, bf={bf}; smallest converged duration "
                      f"d={d:.0f} s (from {c.node}, {load[c.node]} jobs)")
            actions.append(Migrate(policy=policy, container=c.container, from_node=c.node,
                                   to_node=target, reason=reason, rebalance=True,
                                   converged_at=None, grace_seconds=grace_seconds))
            budget.spend(c.node, target)
            load[c.node] -= 1
            load[target] += 1
            notes[c.container] = f"rebalanced: moves to {target} (Algorithm 5)"
            break
        else:
            run_notes.append(f"rebalance: no movable container left for {target}")
    return Rebalancing(actions=tuple(actions), container_notes=notes, notes=tuple(run_notes))
