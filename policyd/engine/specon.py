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
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, model_validator

from policyd.engine import guards
from policyd.engine.kind import Intervals, Kind
from policyd.engine.rebalance import candidates_of, rebalance_cluster
from policyd.engine.spec import (
    CommonSpec,
    MoveGrace,
    PolicyDocument,
    Strict,
    check_relative_alpha,
    of_kind,
)
from policyd.engine.specon_algorithms import (
    CATEGORY_NAMES,
    Board,
    Request,
    cycle_notes,
    monitor,
    no_request_note,
    open_jobs,
    reallocate,
)
from policyd.engine.specon_reports import node_reports, plan_from_reports
from policyd.model import Assessment, Decision, Snapshot


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


# --- The planner ------------------------------------------------------------------------------


def plan(policy: PolicyDocument, snapshot: Snapshot) -> Decision:
    """Algorithms 3, 4 and 5 for the containers `policy` selects in `snapshot`; from the node
    agents' reports when the snapshot carries them (`policyd.engine.specon_reports`)."""
    policy = _specon(policy)
    if snapshot.node_reports:
        return plan_from_reports(policy, snapshot)
    spec, now = policy.spec, snapshot.time
    itval = snapshot.interval_seconds(policy.name, spec.interval_seconds)
    chosen = tuple(c for c in snapshot.containers if spec.selector.selects(c))
    n = len(chosen)
    watched = monitor(chosen, spec, now=now, interval_seconds=itval)
    gains, state, ok, migrated = watched.gains, watched.state, watched.ok, watched.migrated

    names = [node.name for node in snapshot.nodes]
    node_of = {name: w for w, name in enumerate(names)}
    where = np.fromiter((node_of[c.node] for c in chosen), dtype=np.int64, count=n)
    counts = np.bincount(where[ok] * 3 + state.category[ok], minlength=3 * len(names))
    board = Board(names, counts.reshape(len(names), 3).astype(np.float64), spec.weights,
                  [node.cpu_usage for node in snapshot.nodes])
    # Algorithm 3, line 15: a request only while |PC| + |WC| > 1, counted on the container's
    # worker (request_scope node) or over the cluster (cluster); line 3 and "reallocated at
    # most once": never for a container already marked migrated.
    open_ = open_jobs(board, spec.request_scope)
    where_open = "the cluster" if spec.request_scope == "cluster" else None
    requesting = ok & state.requesting & ~migrated & (open_[where] > 1)
    # Algorithm 5's precondition is read from the snapshot, before Algorithm 4 acts.
    all_reallocated = bool(ok.any() and migrated[ok].all())
    last_gain = watched.last_gain

    notes: dict[str, str] = {}
    for i in np.flatnonzero(ok & migrated).tolist():
        notes[chosen[i].id] = "reallocated earlier (markers.migrated): never requests again"
    for i in np.flatnonzero(ok & state.requesting & ~migrated & ~requesting).tolist():
        c = chosen[i]
        notes[c.id] = no_request_note(where_open or c.node, open_[where[i]])
    for i in np.flatnonzero(ok & ~np.isfinite(gains[:, -1])).tolist():
        notes[chosen[i].id] = "no gain yet (fewer than two readings): PC (Algorithm 3, line 2)"

    decision_notes = [board.summary()]
    budget = guards.MigrationBudget.of(spec)
    requests = sorted((Request(container=chosen[i].id, node=chosen[i].node,
                               gain=last_gain[i],
                               blocked=guards.action_blocked(chosen[i], spec, now,
                                                             disrupts=True))
                       for i in np.flatnonzero(requesting).tolist()),
                      key=lambda request: request.container)
    actions = reallocate(requests, board, budget, notes, policy=policy.name, alpha=spec.alpha,
                         now=now, grace_seconds=spec.migration_grace_seconds)

    totals = np.bincount(state.category[ok], minlength=3).tolist()
    decision_notes.extend(cycle_notes(board, actions, totals, without=n - int(ok.sum()),
                                      requests=int(requesting.sum())))
    if spec.rebalance and all_reallocated:
        load = np.bincount(where, minlength=len(names)).tolist()
        outcome = rebalance_cluster(
            policy=policy.name, now=now, load=dict(zip(names, load, strict=True)),
            candidates=candidates_of([chosen[i] for i in np.flatnonzero(ok).tolist()],
                                     spec, now),
            balance_factor=spec.balance_factor, budget=budget,
            grace_seconds=spec.migration_grace_seconds)
        actions.extend(outcome.actions)
        notes.update(outcome.container_notes)
        decision_notes.extend(outcome.notes)

    assessments = []
    for c, problem, category, gain in zip(chosen, watched.problems, state.category.tolist(),
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
    node_reports=lambda p, snapshot: node_reports(_specon(p), snapshot),
    summary=_summary, gain_label="g (gain)",
)
"""SpeCon's registration entry (`policyd.engine.registry`)."""
