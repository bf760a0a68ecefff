"""SpeCon's Algorithms 3 and 4 as plain functions, for either place they run (thesis 5.2).

Theory of operation. `policyd.engine.specon` decides from one snapshot of every container; with
node reports (`policyd.model.node_report`) each node agent runs the container monitor over its
own node and the manager decides from the reports alone (`policyd.engine.specon_reports`).
Both use what is here, so that both make the same moves from the same cluster:

* `monitor`: Algorithm 3 replayed over the window for some containers at once (`replay`, a
  numpy fold over the window's steps): each one's category PC/WC/CC, its last gain, and
  whether it requests reallocation (it began its last step in CC and fell again).
* `Board`: Algorithm 4's scores of every worker from its category counts, and its tie-break
  by the CPU in use; `reallocate` answers the requests in container-id order within the
  migration budget, each move updating the counts before the next request is scored.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
import numpy.typing as npt

from policyd.engine import guards, series
from policyd.engine.spec import Evaluation
from policyd.model import Action, Container, MarkMigrated, Migrate
from policyd.model.snapshot import FloatArray

Int8Array = npt.NDArray[np.int8]
BoolArray = npt.NDArray[np.bool_]

PC, WC, CC = 0, 1, 2
CATEGORY_NAMES = ("PC", "WC", "CC")
SCORE_TOLERANCE = 1e-9
_LISTED_SCORES = 8  # reasons list every worker's score up to this many workers


class CategoryWeights(Protocol):
    """Algorithm 4's weights (`specon.Weights`)."""

    @property
    def pc(self) -> float: ...
    @property
    def wc(self) -> float: ...
    @property
    def cc(self) -> float: ...


class MonitorSpec(Protocol):
    """What Algorithm 3 reads of a policy's spec (`specon.SpeConSpec`)."""

    @property
    def alpha(self) -> float: ...
    @property
    def window_intervals(self) -> int: ...
    @property
    def evaluation(self) -> Evaluation: ...


# --- Algorithm 3: the container monitor, as a fold over the window's steps --------------------


@dataclass(frozen=True, kw_only=True, eq=False)
class Replay:
    """Algorithm 3's state for N containers after some steps.

    `category` holds PC/WC/CC (0/1/2); `previous` the last valid gain g_{m-1} (+inf before the
    first: any first gain counts as lower); `requesting` whether the last step began in CC and
    fell again below alpha (lines 13-16, before the worker and marker checks).
    """

    category: Int8Array
    previous: FloatArray
    requesting: BoolArray

    @classmethod
    def initial(cls, n: int) -> Replay:
        """Line 2: every container starts in PC, with no previous gain."""
        return cls(category=np.full(n, PC, dtype=np.int8), previous=np.full(n, np.inf),
                   requesting=np.zeros(n, dtype=np.bool_))


def replay(state: Replay, gains: FloatArray, *, alpha: float) -> Replay:
    """Fold Algorithm 3 over `gains` (shape (N, steps); NaN = no reading, the step is skipped).

    A pure fold: replaying the steps in two pieces gives the state of replaying them at once.
    """
    category, previous, requesting = state.category, state.previous, state.requesting
    for g in gains.T:
        valid = np.isfinite(g)
        # Line 6: g_m < g_{m-1} and g_m < alpha. One move per step, as the prose describes
        # (the listing's sequential ifs would cascade PC -> WC -> CC in a single step).
        falling = valid & (g < previous) & (g < alpha)
        # Lines 13-16: already converged and still falling -> ask for reallocation.
        requesting = falling & (category == CC)
        # Lines 7-12: PC -> WC, WC -> CC (the listing repeats PC -> WC; the prose says WC -> CC);
        # CC stays. Lines 17-18 (g_m >= g_{m-1}, g_m < alpha) and g_m == alpha: unchanged.
        category = np.where(falling, np.minimum(category + 1, CC), category).astype(np.int8)
        # Lines 19-22: g_m > alpha -> back to PC.
        category = np.where(valid & (g > alpha), np.int8(PC), category).astype(np.int8)
        previous = np.where(valid, g, previous)
    return Replay(category=category, previous=previous, requesting=requesting)


@dataclass(frozen=True, kw_only=True, eq=False)
class Monitored:
    """Algorithm 3 for some containers (in their order): the window's per-container problems
    (None: fine), every step's gains, the state after the window, `ok` where a container has
    a category (no problem), and `migrated` its marker."""

    problems: Sequence[str | None]
    gains: FloatArray
    state: Replay
    ok: BoolArray
    migrated: BoolArray

    @property
    def last_gain(self) -> list[float]:
        return self.gains[:, -1].tolist() if self.gains.shape[0] else []


def monitor(chosen: Sequence[Container], spec: MonitorSpec, *, now: float,
            interval_seconds: float) -> Monitored:
    """Algorithm 3 replayed over the window for `chosen` under `spec` (module docstring)."""
    n = len(chosen)
    window = series.sample_window(chosen, now=now, interval_seconds=interval_seconds,
                                  intervals=spec.window_intervals,
                                  max_sample_age_seconds=2 * interval_seconds)
    ev = spec.evaluation
    gains = series.gains(window, ev.normalization, gain=ev.gain, direction=ev.direction)
    state = replay(Replay.initial(n), gains, alpha=spec.alpha)
    ok = np.fromiter((p is None for p in window.problems), dtype=np.bool_, count=n)
    migrated = np.fromiter((c.markers.migrated for c in chosen), dtype=np.bool_, count=n)
    return Monitored(problems=window.problems, gains=gains, state=state, ok=ok,
                     migrated=migrated)


# --- Algorithm 4: speculative scheduling on the manager -------------------------------------


class Board:
    """Category counts of every worker (empty ones score 0) and their scores."""

    def __init__(self, names: list[str], counts: FloatArray, weights: CategoryWeights,
                 usage: list[float]) -> None:
        self.names = names
        self.index = {name: w for w, name in enumerate(names)}
        self.counts = counts  # shape (W, 3): |PC_w|, |WC_w|, |CC_w|
        self.weights = np.array([weights.pc, weights.wc, weights.cc])
        self.usage = usage  # R(w, t): cores in use on each worker
        # Each worker's place in the order (R(w, t), name): Algorithm 4's tie-break, line 18.
        by_usage = sorted(range(len(names)), key=lambda w: (usage[w], names[w]))
        self.usage_rank = np.empty(len(names), dtype=np.int64)
        self.usage_rank[by_usage] = np.arange(len(names))
        self._score()

    def _score(self) -> None:
        # Algorithm 4, lines 2-3: S_w = |PC_w| * w_pc + |WC_w| * w_wc + |CC_w| * w_cc.
        self.scores: FloatArray = self.counts @ self.weights
        self.by_name = dict(zip(self.names, self.scores.tolist(), strict=True))

    def move_converged(self, source: int, target: int) -> None:
        """A CC job moved: later requests of the same cycle see the new counts.

        Only the two rows change; actions copy `by_name`, so it is safe to update in place.
        """
        for w, change in ((source, -1.0), (target, 1.0)):
            self.counts[w, CC] += change
            self.scores[w] = self.counts[w] @ self.weights
            self.by_name[self.names[w]] = float(self.scores[w])

    def listing(self, focus: Sequence[int]) -> str:
        """The scores for a reason: every worker in a small cluster, else only `focus`."""
        if len(self.names) <= _LISTED_SCORES:
            return " ".join(f"{n}={s:g}" for n, s in self.by_name.items())
        shown = " ".join(f"{self.names[w]}={self.scores[w]:g}" for w in sorted(set(focus)))
        return f"{shown} (of {len(self.names)} workers)"

    def summary(self) -> str:
        if len(self.names) <= _LISTED_SCORES or not self.names:
            return f"scores: {self.listing(())}"
        low, high = float(self.scores.min()), float(self.scores.max())
        at_min = int(np.count_nonzero(self.scores <= low + SCORE_TOLERANCE))
        return (f"scores: minimum {low:g} on {at_min} of {len(self.names)} workers, "
                f"maximum {high:g}")


@dataclass(frozen=True, kw_only=True)
class Request:
    """A reallocation request: the job, its worker, the gain of its last step, and why policyd
    may not act on it now (the guards; None: it may)."""

    container: str
    node: str
    gain: float
    blocked: str | None = None


def _schedule(board: Board, request: Request, *, alpha: float) -> tuple[int, str]:
    """Algorithm 4 for one request: the worker chosen (its own when it stays) and why."""
    here, scores = board.index[request.node], board.scores
    # Lines 4-7: candidates T = the workers with the minimum score (within a float tolerance).
    ceiling = scores.min() + SCORE_TOLERANCE
    candidates = np.flatnonzero(scores <= ceiling)
    first: list[int] = candidates[:5].tolist()  # named in reasons
    why = (f"converged (g={request.gain:.3g} < alpha={alpha:g}, falling); "
           f"scores {board.listing([here, *first])}")
    if scores[here] <= ceiling:
        # Lines 8-10: the current host is a candidate -> the job stays, counted as reallocated.
        return here, (f"{why}: stays on {request.node}: current host has the minimum score "
                      f"{scores[here]:g}")
    if candidates.size == 1:
        # Lines 12-16: a single candidate -> move there.
        target = first[0]
        return target, f"{why}: {board.names[target]} is the only minimum"
    # Lines 17-21: several -> the one with the lowest resource usage R(w, t); ties by name.
    target = int(candidates[np.argmin(board.usage_rank[candidates])])
    listed = ", ".join(board.names[w] for w in first)
    more = f" and {candidates.size - 5} more" if candidates.size > 5 else ""
    return target, (f"{why}: minimum {scores[target]:g} on {listed}{more}; "
                    f"{board.names[target]} has the lowest usage {board.usage[target]:g} cores")


def reallocate(requests: Sequence[Request], board: Board, budget: guards.MigrationBudget,
               notes: dict[str, str], *, policy: str, alpha: float, now: float,
               grace_seconds: float | None) -> list[Action]:
    """Algorithm 4 for each request in turn, within the guards.

    A blocked request gets a note instead of an action. A stay is not a migration: it spends no
    budget, but the guards still apply (it writes markers on the workload).
    """
    actions: list[Action] = []
    for r in requests:
        if r.blocked is not None:
            notes[r.container] = f"requests reallocation, no action: {r.blocked}"
            continue
        target, reason = _schedule(board, r, alpha=alpha)
        to_node = board.names[target]
        if to_node == r.node:
            actions.append(MarkMigrated(policy=policy, container=r.container, node=r.node,
                                        converged_at=now, reason=reason, scores=board.by_name))
            notes[r.container] = f"reallocated: stays on {r.node} (Algorithm 4, lines 8-10)"
            continue
        refusal = budget.refusal(r.node, to_node)
        if refusal is not None:
            notes[r.container] = f"requests reallocation to {to_node}, no action: {refusal}"
            continue
        actions.append(Migrate(policy=policy, container=r.container, from_node=r.node,
                               to_node=to_node, reason=reason, scores=board.by_name,
                               rebalance=False, converged_at=now,
                               grace_seconds=grace_seconds))
        budget.spend(r.node, to_node)
        board.move_converged(board.index[r.node], target)
        notes[r.container] = f"reallocated: moves to {to_node} (Algorithm 4)"
    return actions


def no_request_note(where: str, open_count: float) -> str:
    """Why a converged, falling job asks nothing: too few learning jobs where it is counted."""
    return (f"converged; {where} has |PC|+|WC| = {open_count:g}: no request "
            "(Algorithm 3, line 15)")


def cycle_notes(board: Board, actions: Sequence[Action], totals: Sequence[int], *,
                without: int, requests: int) -> list[str]:
    """The decision's notes after Algorithm 4: the board after any move, and the counts."""
    after = ([f"after the moves, {board.summary()}"]
             if any(isinstance(a, Migrate) for a in actions) else [])
    return [*after, f"categories: PC {totals[PC]}, WC {totals[WC]}, CC {totals[CC]}; "
                    f"{without} without category; {requests} request(s)"]


def open_jobs(board: Board, scope: Literal["node", "cluster"]) -> FloatArray:
    """Algorithm 3, line 15's |PC| + |WC| per worker: counted on the worker (`node`) or over
    the cluster (every worker the cluster's sum)."""
    counted = board.counts[:, PC] + board.counts[:, WC]
    return np.full_like(counted, counted.sum()) if scope == "cluster" else counted
