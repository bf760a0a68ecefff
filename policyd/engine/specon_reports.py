"""SpeCon split the way the thesis runs it: the container monitor on each worker, the scheduler
on the manager, joined by node reports (`policyd.model.node_report`).

Theory of operation. `node_reports` is what a node agent computes for its node each interval:
Algorithm 3 replayed over its selected containers (`specon_algorithms.monitor`, as the
one-snapshot planner replays it), and from it the worker's category counts, the CPU in use, its
selected jobs, its categorised jobs not reallocated yet, the requests (converged and still
falling, never reallocated, and not held back by the guards), and as many rebalance candidates
(marked converged, not rebalanced, smallest converged duration first) as a cycle may move off
one worker. `plan_from_reports` is what the manager does with every worker's report: Algorithm
3's line 15 with the reported counts (on the worker, or over the cluster), Algorithm 4 in
container-id order on a board of the reported counts and usage, and Algorithm 5 when every
categorised job of every worker has been reallocated. The moves are those of the one-snapshot
planner on the same cluster (tests/engine/test_specon_reports.py holds both to it), with two
differences that come from the split itself: an agent judges the guards at its own snapshot's
time, and a worker whose report is missing is not in the manager's picture (the source says so).

The manager's decision has one assessment per request and per candidate it answered; the
containers' own categories are in their agents' metrics. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

import numpy as np

from policyd.engine import guards
from policyd.engine.rebalance import Candidate, candidates_of, rebalance_cluster
from policyd.engine.specon_algorithms import (
    CC,
    PC,
    WC,
    Board,
    Request,
    cycle_notes,
    monitor,
    no_request_note,
    open_jobs,
    reallocate,
)
from policyd.model import (
    Assessment,
    Decision,
    NodeReport,
    ReallocationRequest,
    RebalanceCandidate,
    Snapshot,
)

if TYPE_CHECKING:  # the kind's module imports this one
    from policyd.engine.specon import SpeConPolicy


def node_reports(policy: SpeConPolicy, snapshot: Snapshot) -> tuple[NodeReport, ...]:
    """Every worker's report of `snapshot` under `policy` (module docstring), one per node."""
    spec, now = policy.spec, snapshot.time
    itval = snapshot.interval_seconds(policy.name, spec.interval_seconds)
    chosen = tuple(c for c in snapshot.containers if spec.selector.selects(c))
    watched = monitor(chosen, spec, now=now, interval_seconds=itval)
    state, ok, migrated = watched.state, watched.ok, watched.migrated
    last_gain = watched.last_gain
    per_node = min(spec.safety.max_migrations_per_node, spec.safety.max_migrations_per_cycle)
    on: defaultdict[str, list[int]] = defaultdict(list)
    for i, c in enumerate(chosen):
        on[c.node].append(i)
    reports = []
    for node in snapshot.nodes:
        mine = on[node.name]
        categorised = [i for i in mine if ok[i]]
        counts = np.bincount(state.category[categorised], minlength=3).tolist()
        requests = tuple(
            ReallocationRequest(container=chosen[i].id, gain=last_gain[i])
            for i in categorised
            if state.requesting[i] and not migrated[i]
            and guards.action_blocked(chosen[i], spec, now, disrupts=True) is None)
        movable = sorted((c for c in candidates_of([chosen[i] for i in categorised], spec, now)
                          if c.blocked is None),
                         key=lambda c: (c.converged_seconds, c.container))[:per_node]
        reports.append(NodeReport(
            policy=policy.name, node=node.name, time=now,
            cpu_capacity_cores=node.cpu_capacity, cpu_used_cores=node.cpu_usage,
            pc=counts[PC], wc=counts[WC], cc=counts[CC], selected=len(mine),
            unreallocated=sum(1 for i in categorised if not migrated[i]),
            requests=requests,
            candidates=tuple(RebalanceCandidate(container=c.container,
                                                converged_seconds=c.converged_seconds)
                             for c in movable)))
    return tuple(reports)


def plan_from_reports(policy: SpeConPolicy, snapshot: Snapshot) -> Decision:
    """Algorithms 4 and 5 on the manager, from the node agents' reports of `policy` in
    `snapshot` (module docstring)."""
    spec, now = policy.spec, snapshot.time
    itval = snapshot.interval_seconds(policy.name, spec.interval_seconds)
    reports = sorted((r for r in snapshot.node_reports if r.policy == policy.name),
                     key=lambda r: r.node)
    names = [r.node for r in reports]
    counts = np.array([[r.pc, r.wc, r.cc] for r in reports], dtype=np.float64).reshape(-1, 3)
    board = Board(names, counts, spec.weights, [r.cpu_used_cores for r in reports])
    open_ = open_jobs(board, spec.request_scope)
    notes: dict[str, str] = {}
    requests = []
    for w, r in enumerate(reports):
        for q in r.requests:
            if open_[w] > 1:
                requests.append(Request(container=q.container, node=r.node, gain=q.gain))
            else:
                where = "the cluster" if spec.request_scope == "cluster" else r.node
                notes[q.container] = no_request_note(where, open_[w])
    requests.sort(key=lambda q: q.container)
    categorised = sum(r.categorised for r in reports)
    all_reallocated = categorised > 0 and not any(r.unreallocated for r in reports)

    decision_notes = [f"from {len(reports)} node reports", board.summary()]
    budget = guards.MigrationBudget.of(spec)
    actions = reallocate(requests, board, budget, notes, policy=policy.name, alpha=spec.alpha,
                         now=now, grace_seconds=spec.migration_grace_seconds)
    totals = counts.sum(axis=0).astype(int).tolist() if reports else [0, 0, 0]
    decision_notes.extend(cycle_notes(
        board, actions, totals, without=sum(r.selected for r in reports) - categorised,
        requests=len(requests)))
    node_of = {q.container: r.node for r in reports for q in r.requests}
    node_of.update((c.container, r.node) for r in reports for c in r.candidates)
    if spec.rebalance and all_reallocated:
        outcome = rebalance_cluster(
            policy=policy.name, now=now, load={r.node: r.selected for r in reports},
            candidates=[Candidate(converged_seconds=c.converged_seconds,
                                  container=c.container, node=r.node)
                        for r in reports for c in r.candidates],
            balance_factor=spec.balance_factor, budget=budget,
            grace_seconds=spec.migration_grace_seconds)
        actions.extend(outcome.actions)
        notes.update(outcome.container_notes)
        decision_notes.extend(outcome.notes)
    assessments = tuple(sorted(
        (Assessment(container=cid, node=node_of[cid], category=None, note=note)
         for cid, note in notes.items()), key=lambda a: (a.node, a.container)))
    return Decision(policy=policy.name, kind="SpeCon", time=now, actions=tuple(actions),
                    assessments=assessments, next_interval=itval, dry_run=spec.dry_run,
                    notes=tuple(decision_notes))
