"""SpeCon: speculative migration of converged jobs (thesis section 5.2, Algorithms 3, 4, 5).

Theory of operation. SpeCon moves training jobs that have stopped improving off the workers
where they compete with fast-growing ones. Each call of `plan` rebuilds the whole picture from
the snapshot; nothing is remembered between calls except the markers the cluster keeps.

1. Algorithm 3 (container monitor) is replayed, not remembered. E is read at the window's
   interval boundaries (`series.sample_window`), the gains g_m come from `series.gains`, and
   `replay` folds the category rules over the steps for every container at once (numpy, one
   pass per step). A container whose last step began in CC and fell again *requests
   reallocation*, unless it was reallocated before (`markers.migrated`: at most once) or its
   worker has no more than one PC/WC job left to make room for.
2. Algorithm 4 (manager) answers the requests in container-id order: worker scores from the
   category counts, candidates with the minimum score; the job stays (MarkMigrated) when its
   worker is a candidate, otherwise it moves to the only candidate or to the least-used one.
   Each move updates the counts before the next request is scored.
3. Algorithm 5 (`policyd.engine.rebalance`) runs when every categorised job had already been
   reallocated at the start of the cycle.

Visibility: containers the selector does not select are invisible. Opted-out containers are
categorised and counted in scores but never acted on. Containers whose series has a problem
(NaN, gap, broken timestamps) get no category, no action and are not counted. Whether policyd
may act at all is the guards' business (`guards.action_blocked`, `guards.MigrationBudget`): a
blocked request yields no action and a note on the container's assessment.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
import numpy.typing as npt
from pydantic import Field, model_validator

from policyd.engine import guards, series
from policyd.engine.kind import Intervals, Kind
from policyd.engine.rebalance import rebalance_cluster
from policyd.engine.spec import (
    CommonSpec,
    MoveGrace,
    PolicyDocument,
    Strict,
    check_relative_alpha,
    of_kind,
)
from policyd.model import Action, Assessment, Container, Decision, MarkMigrated, Migrate, Snapshot
from policyd.model.snapshot import FloatArray

Int8Array = npt.NDArray[np.int8]
BoolArray = npt.NDArray[np.bool_]

PC, WC, CC = 0, 1, 2
CATEGORY_NAMES = ("PC", "WC", "CC")
SCORE_TOLERANCE = 1e-9
_LISTED_SCORES = 8  # reasons list every worker's score up to this many workers


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


class SpeConSpec(MoveGrace, CommonSpec):
    """SpeCon's arguments (thesis Table 5.1; section 6.2 for the values used)."""

    alpha: float = Field(
        default=0.01, gt=0,
        description="Categorization threshold on the gain g (relative: a fraction, 0.01 = 1%).",
    )
    interval_seconds: float = Field(
        default=30.0, ge=1, le=86400, description="Categorization interval t_m - t_m-1, seconds."
    )
    weights: Weights = Field(default_factory=Weights)
    balance_factor: Literal["auto"] | Annotated[int, Field(ge=1, strict=True)] = Field(
        default="auto",
        description=(
            "Algorithm 5's bf: auto = floor(active jobs / workers), or a whole number >= 1."
        ),
    )
    rebalance: bool = Field(
        default=True, description="Run Algorithm 5 once every job has been reallocated."
    )
    request_scope: Literal["node", "cluster"] = Field(
        default="node",
        description=(
            "Where Algorithm 3's condition |PC| + |WC| > 1 (line 15) is counted before a "
            "converged job requests reallocation: node = on the job's own worker (moving it "
            "frees room for the jobs still learning there); cluster = over every worker."
        ),
    )

    @model_validator(mode="after")
    def _check(self) -> SpeConSpec:
        check_relative_alpha(self.alpha, self.evaluation, "0.01 = 1%")
        return self


class SpeConPolicy(PolicyDocument):
    kind: Literal["SpeCon"]
    spec: SpeConSpec


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


# --- Algorithm 4: speculative scheduling on the manager -------------------------------------


class _Board:
    """Category counts of every worker in the snapshot (empty ones score 0) and their scores."""

    def __init__(self, names: list[str], counts: FloatArray, weights: Weights,
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


def _schedule(board: _Board, container: Container, *, gain: float,
              alpha: float) -> tuple[int, str]:
    """Algorithm 4 for one request: the worker chosen (its own when it stays) and why."""
    here, scores = board.index[container.node], board.scores
    # Lines 4-7: candidates T = the workers with the minimum score (within a float tolerance).
    ceiling = scores.min() + SCORE_TOLERANCE
    candidates = np.flatnonzero(scores <= ceiling)
    first: list[int] = candidates[:5].tolist()  # named in reasons
    why = (f"converged (g={gain:.3g} < alpha={alpha:g}, falling); "
           f"scores {board.listing([here, *first])}")
    if scores[here] <= ceiling:
        # Lines 8-10: the current host is a candidate -> the job stays, counted as reallocated.
        return here, (f"{why}: stays on {container.node}: current host has the minimum score "
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


def _reallocate(requests: Sequence[tuple[Container, float]], board: _Board,
                budget: guards.MigrationBudget, notes: dict[str, str], *,
                policy: SpeConPolicy, now: float) -> list[Action]:
    """Algorithm 4 for each (container, last gain) request in turn, within the guards.

    A blocked request gets a note instead of an action. A stay is not a migration: it spends no
    budget, but the guards still apply (it writes markers on the workload).
    """
    actions: list[Action] = []
    for c, gain in requests:
        blocked = guards.action_blocked(c, policy.spec, now, disrupts=True)
        if blocked is not None:
            notes[c.id] = f"requests reallocation, no action: {blocked}"
            continue
        target, reason = _schedule(board, c, gain=gain, alpha=policy.spec.alpha)
        to_node = board.names[target]
        if to_node == c.node:
            actions.append(MarkMigrated(policy=policy.name, container=c.id, node=c.node,
                                        converged_at=now, reason=reason, scores=board.by_name))
            notes[c.id] = f"reallocated: stays on {c.node} (Algorithm 4, lines 8-10)"
            continue
        refusal = budget.refusal(c.node, to_node)
        if refusal is not None:
            notes[c.id] = f"requests reallocation to {to_node}, no action: {refusal}"
            continue
        actions.append(Migrate(policy=policy.name, container=c.id, from_node=c.node,
                               to_node=to_node, reason=reason, scores=board.by_name,
                               rebalance=False, converged_at=now,
                               grace_seconds=policy.spec.migration_grace_seconds))
        budget.spend(c.node, to_node)
        board.move_converged(board.index[c.node], target)
        notes[c.id] = f"reallocated: moves to {to_node} (Algorithm 4)"
    return actions


# --- The planner ------------------------------------------------------------------------------


def plan(policy: PolicyDocument, snapshot: Snapshot) -> Decision:
    """Algorithms 3, 4 and 5 for the containers `policy` selects in `snapshot`."""
    policy = _specon(policy)
    spec, now = policy.spec, snapshot.time
    itval = snapshot.interval_seconds(policy.name, spec.interval_seconds)
    chosen = tuple(c for c in snapshot.containers if spec.selector.selects(c))
    n = len(chosen)
    window = series.sample_window(chosen, now=now, interval_seconds=itval,
                                  intervals=spec.window_intervals,
                                  max_sample_age_seconds=2 * itval)
    ev = spec.evaluation
    gains = series.gains(window, ev.normalization, gain=ev.gain, direction=ev.direction)
    state = replay(Replay.initial(n), gains, alpha=spec.alpha)

    ok = np.fromiter((p is None for p in window.problems), dtype=np.bool_, count=n)
    names = [node.name for node in snapshot.nodes]
    node_of = {name: w for w, name in enumerate(names)}
    where = np.fromiter((node_of[c.node] for c in chosen), dtype=np.int64, count=n)
    counts = np.bincount(where[ok] * 3 + state.category[ok], minlength=3 * len(names))
    board = _Board(names, counts.reshape(len(names), 3).astype(np.float64), spec.weights,
                   [node.cpu_usage for node in snapshot.nodes])
    migrated = np.fromiter((c.markers.migrated for c in chosen), dtype=np.bool_, count=n)
    # Algorithm 3, line 15: a request only while |PC| + |WC| > 1, counted on the container's
    # worker (request_scope node) or over the cluster (cluster); line 3 and "reallocated at
    # most once": never for a container already marked migrated.
    open_jobs = board.counts[:, PC] + board.counts[:, WC]
    if spec.request_scope == "cluster":
        open_jobs = np.full_like(open_jobs, open_jobs.sum())
    where_open = "the cluster" if spec.request_scope == "cluster" else None
    requesting = ok & state.requesting & ~migrated & (open_jobs[where] > 1)
    # Algorithm 5's precondition is read from the snapshot, before Algorithm 4 acts.
    all_reallocated = bool(ok.any() and migrated[ok].all())
    last_gain = gains[:, -1].tolist() if n else []

    notes: dict[str, str] = {}
    for i in np.flatnonzero(ok & migrated).tolist():
        notes[chosen[i].id] = "reallocated earlier (markers.migrated): never requests again"
    for i in np.flatnonzero(ok & state.requesting & ~migrated & ~requesting).tolist():
        c = chosen[i]
        notes[c.id] = (f"converged; {where_open or c.node} has |PC|+|WC| = "
                       f"{open_jobs[where[i]]:g}: no request (Algorithm 3, line 15)")
    for i in np.flatnonzero(ok & ~np.isfinite(gains[:, -1])).tolist():
        notes[chosen[i].id] = "no gain yet (fewer than two readings): PC (Algorithm 3, line 2)"

    decision_notes = [board.summary()]
    budget = guards.MigrationBudget.of(spec)
    requests = sorted(((chosen[i], last_gain[i]) for i in np.flatnonzero(requesting).tolist()),
                      key=lambda request: request[0].id)
    actions = _reallocate(requests, board, budget, notes, policy=policy, now=now)

    totals = np.bincount(state.category[ok], minlength=3).tolist()
    if any(isinstance(a, Migrate) for a in actions):
        decision_notes.append(f"after the moves, {board.summary()}")
    decision_notes.append(
        f"categories: PC {totals[PC]}, WC {totals[WC]}, CC {totals[CC]}; "
        f"{n - int(ok.sum())} without category; {int(requesting.sum())} request(s)")
    if spec.rebalance and all_reallocated:
        load = np.bincount(where, minlength=len(names)).tolist()
        outcome = rebalance_cluster(
            policy=policy.name, spec=spec, now=now, load=dict(zip(names, load, strict=True)),
            active=[chosen[i] for i in np.flatnonzero(ok).tolist()],
            balance_factor=spec.balance_factor, budget=budget,
            grace_seconds=spec.migration_grace_seconds)
        actions.extend(outcome.actions)
        notes.update(outcome.container_notes)
        decision_notes.extend(outcome.notes)

    assessments = []
    for c, problem, category, gain in zip(chosen, window.problems, state.category.tolist(),
                                          last_gain, strict=True):
        if problem is not None:
            assessments.append(Assessment(container=c.id, node=c.node, category=None,
                                          note=f"no category, no action: {problem}"))
        else:
            assessments.append(Assessment(
                container=c.id, node=c.node, category=CATEGORY_NAMES[category],
                gain=gain if math.isfinite(gain) else None, note=notes.get(c.id, "")))
    assessments.sort(key=lambda a: (a.node, a.container))
    return Decision(policy=policy.name, kind="SpeCon", time=now, actions=tuple(actions),
                    assessments=tuple(assessments), next_interval=itval, dry_run=spec.dry_run,
                    notes=tuple(decision_notes))


def _specon(policy: PolicyDocument) -> SpeConPolicy:
    return of_kind(policy, SpeConPolicy, "SpeCon")


def _intervals(policy: PolicyDocument) -> Intervals:
    return Intervals.fixed(_specon(policy).spec.interval_seconds)


def _summary(policy: PolicyDocument) -> str:
    spec = _specon(policy).spec
    w = spec.weights
    return (f"alpha {spec.alpha:g}, interval {spec.interval_seconds:g} s, weights "
            f"{w.pc:g}/{w.wc:g}/{w.cc:g}")


KIND = Kind(
    name="SpeCon", document=SpeConPolicy, plan=plan,
    scope="cluster",  # Algorithm 4 scores every worker; Algorithm 5 balances them all
    intervals=_intervals,  # the categorization interval, no back-off
    inputs=frozenset({"evaluation", "cpu"}),  # cpu: R(w, t), Algorithm 4's tie-break
    acts_on=frozenset({"placement"}),
    convergence_alpha=lambda p: _specon(p).spec.alpha,
    summary=_summary, gain_label="g (gain)",
)
"""SpeCon's registration entry (`policyd.engine.registry`)."""
