"""SpeCon's planner (policyd.engine.specon, policyd.engine.rebalance): thesis Algorithms 3-5.

Table ids name the algorithm and the listing line they exercise. Snapshots are built with
`specon_builders`: each job's loss is sampled at interval boundaries so that its gains are the
ones written in the table.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from policyd.engine import decide
from policyd.engine.flowcon import FlowConPolicy
from policyd.engine.specon import Weights, plan
from policyd.engine.specon_algorithms import CC, PC, WC, Replay, replay
from policyd.model import (
    Assessment,
    Container,
    Decision,
    Markers,
    MarkMigrated,
    Migrate,
    Series,
    Snapshot,
)
from policyd.model.codec import decision_to_dict, snapshot_from_dict

from .specon_builders import (
    CC_GAINS,
    ITVAL,
    NOW,
    PC_GAINS,
    REQUEST_GAINS,
    WC_GAINS,
    cluster,
    job,
    losses,
    policy,
    thesis_jobs,
)

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def assessment(decision: Decision, cid: str) -> Assessment:
    (found,) = [a for a in decision.assessments if a.container == cid]
    return found


def moves(decision: Decision) -> list[tuple[str, str, str, str]]:
    """(kind, container, from, to) of every action; stays have from == to."""
    out = []
    for a in decision.actions:
        if isinstance(a, Migrate):
            out.append(("rebalance" if a.rebalance else "migrate", a.container, a.from_node,
                        a.to_node))
        elif isinstance(a, MarkMigrated):
            out.append(("stay", a.container, a.node, a.node))
    return out


# --- Algorithm 3 ------------------------------------------------------------------------------

# The job under test, "x", sits on w1 next to two PC jobs (so |PC|+|WC| > 1) with w2 empty: a
# request shows as a migration to w2.
ALG3 = [
    pytest.param((), "PC", False, id="alg3-l2-young-starts-PC"),
    pytest.param((0.05, 0.04, 0.03), "PC", False, id="alg3-l19-above-alpha-stays-PC"),
    pytest.param((0.005,), "WC", False, id="alg3-l6-first-gain-below-alpha-PC-to-WC"),
    pytest.param(WC_GAINS, "WC", False, id="alg3-l6-PC-to-WC"),
    pytest.param((0.008, 0.006), "CC", False, id="alg3-l10-WC-to-CC"),
    pytest.param(CC_GAINS, "CC", False, id="alg3-l10-one-transition-per-step"),
    pytest.param(REQUEST_GAINS, "CC", True, id="alg3-l13-CC-requests"),
    pytest.param((0.05, 0.008, 0.006, 0.007, 0.004), "CC", True,
                 id="alg3-l13-CC-requests-after-a-bounce"),
    pytest.param((*REQUEST_GAINS, 0.005), "CC", False, id="alg3-l17-CC-rising-no-request"),
    pytest.param((0.05, 0.008, 0.009), "WC", False, id="alg3-l17-rising-gain-stays"),
    pytest.param((*REQUEST_GAINS, 0.02), "PC", False, id="alg3-l19-back-to-PC"),
    pytest.param((0.05, 0.008, 0.02, 0.008), "WC", False, id="alg3-l19-reset-then-PC-to-WC"),
]


@pytest.mark.parametrize(("gains", "category", "requests"), ALG3)
def test_algorithm_3_categories(gains: tuple[float, ...], category: str, requests: bool) -> None:
    snapshot = cluster(job("x", "w1", gains), job("p1", "w1"), job("p2", "w1"),
                       nodes=("w1", "w2"))
    decision = plan(policy(), snapshot)
    found = assessment(decision, "x")
    assert found.category == category
    assert moves(decision) == ([("migrate", "x", "w1", "w2")] if requests else [])
    if gains:
        assert found.gain == pytest.approx(gains[-1])
    else:
        assert found.gain is None
        assert "no gain yet" in found.note


def _exact(values: list[float]) -> Container:
    """A job with exact (dyadic) readings, for ties under absolute normalization."""
    times = [NOW - (len(values) - 1 - m) * ITVAL for m in range(len(values))]
    return job("x", "w1", evaluation=Series.of(times, values))


@pytest.mark.parametrize(("values", "category"), [
    pytest.param([4.0, 3.75, 3.5], "PC", id="alg3-l19-g-equals-alpha-stays-PC"),
    pytest.param([4.0, 3.9375, 3.6875], "WC", id="alg3-l17-g-equals-alpha-stays-WC"),
    pytest.param([4.0, 3.9375, 3.90625, 3.65625], "CC", id="alg3-l17-g-equals-alpha-stays-CC"),
])
def test_gain_equal_to_alpha_is_not_above_it(values: list[float], category: str) -> None:
    pol = policy(alpha=0.25, evaluation={"normalization": "absolute"})
    decision = plan(pol, cluster(_exact(values), job("p1", "w1"), job("p2", "w1")))
    assert assessment(decision, "x").category == category
    assert decision.actions == ()


@pytest.mark.parametrize(("neighbours", "requests"), [
    pytest.param((PC_GAINS,), False, id="alg3-l15-single-progressing-no-request"),
    pytest.param((WC_GAINS,), False, id="alg3-l15-single-watching-no-request"),
    pytest.param((CC_GAINS, CC_GAINS, PC_GAINS), False, id="alg3-l15-converged-do-not-count"),
    pytest.param((PC_GAINS, WC_GAINS), True, id="alg3-l15-progressing-plus-watching-request"),
])
def test_alg3_l15_request_needs_more_than_one_open_job(
        neighbours: tuple[tuple[float, ...], ...], requests: bool) -> None:
    jobs = [job(f"n{i}", "w1", gains) for i, gains in enumerate(neighbours)]
    decision = plan(policy(), cluster(job("x", "w1", REQUEST_GAINS), *jobs, nodes=("w1", "w2")))
    assert bool(decision.actions) is requests
    found = assessment(decision, "x")
    assert found.category == "CC"
    if not requests:
        assert "no request (Algorithm 3, line 15)" in found.note


@pytest.mark.parametrize(("scope", "requests"), [
    pytest.param("node", False, id="node-scope-one-open-job-here-no-request"),
    pytest.param("cluster", True, id="cluster-scope-counts-every-worker"),
])
def test_alg3_l15_request_scope(scope: str, requests: bool) -> None:
    # x converges on w1 next to one progressing job; two more progress on w2: |PC|+|WC| is 1
    # on w1 but 3 over the cluster.
    snap = cluster(job("x", "w1", REQUEST_GAINS), job("p1", "w1"), job("p2", "w2"),
                   job("p3", "w2"), nodes=("w1", "w2", "w3"))
    decision = plan(policy(request_scope=scope), snap)
    assert bool(decision.actions) is requests
    if not requests:
        assert assessment(decision, "x").note.startswith("converged; w1 has |PC|+|WC| = 1")
    else:
        (action,) = decision.actions
        assert isinstance(action, Migrate) and action.to_node == "w3"


def test_alg3_l15_jobs_with_a_problem_do_not_count_as_progressing() -> None:
    broken = Series.of([NOW - 60, NOW - 30, NOW], [1.0, float("nan"), 0.9])
    decision = plan(policy(), cluster(job("x", "w1", REQUEST_GAINS), job("p1", "w1"),
                                      job("bad", "w1", evaluation=broken), nodes=("w1", "w2")))
    assert decision.actions == ()


def test_alg3_l3_migrated_container_never_requests_again() -> None:
    decision = plan(policy(), cluster(
        job("x", "w1", REQUEST_GAINS, migrated=True, converged_at=NOW - 600),
        job("p1", "w1"), job("p2", "w1"), nodes=("w1", "w2")))
    assert decision.actions == ()
    found = assessment(decision, "x")
    assert found.category == "CC"
    assert "markers.migrated" in found.note


def test_replay_is_a_fold_over_steps() -> None:
    gains = np.array([[0.05, 0.008, 0.006, 0.004], [np.nan, np.nan, 0.005, 0.02]])
    state = replay(Replay.initial(2), gains, alpha=0.01)
    assert state.category.tolist() == [CC, PC]
    assert state.requesting.tolist() == [True, False]
    assert state.previous.tolist() == [0.004, 0.02]
    assert [PC, WC, CC] == [0, 1, 2]


# --- Algorithm 4 ------------------------------------------------------------------------------

# w1 = x + 2 WC = 4, w2 = w4 = 2 PC = 4, w3 = 3 PC = 6: T = {w1, w2, w4}, x stays.
STAY = [job("x", "w1", REQUEST_GAINS), job("a", "w1", WC_GAINS), job("b", "w1", WC_GAINS),
        job("c", "w2"), job("d", "w2"), job("e", "w3"), job("f", "w3"), job("g", "w3"),
        job("h", "w4"), job("i", "w4")]
# w1 = 5, w2 = w3 = 2 (T), w4 = 4.
TWO_CANDIDATES = [job("x", "w1", REQUEST_GAINS), job("a", "w1"), job("b", "w1"), job("c", "w2"),
                  job("d", "w3"), job("e", "w4"), job("f", "w4")]

ALG4 = [
    pytest.param(STAY, {}, [("stay", "x", "w1", "w1")], id="alg4-l8-current-host-stays"),
    pytest.param(  # the thesis's check: w2 (3.5) is the only minimum
        thesis_jobs(), {}, [("migrate", "cc", "w4", "w2")], id="alg4-l13-single-candidate"),
    pytest.param(TWO_CANDIDATES, {"w2": 8.0, "w3": 3.0}, [("migrate", "x", "w1", "w3")],
                 id="alg4-l17-least-usage-wins"),
    pytest.param(TWO_CANDIDATES, {"w2": 3.0, "w3": 3.0}, [("migrate", "x", "w1", "w2")],
                 id="alg4-l17-usage-tie-by-name"),
    pytest.param(  # w4 holds nothing: score 0
        [job("x", "w1", REQUEST_GAINS), job("a", "w1"), job("b", "w1"), job("c", "w2"),
         job("d", "w3")],
        {}, [("migrate", "x", "w1", "w4")], id="alg4-l3-empty-worker-scores-zero"),
    pytest.param(  # x takes w3 (less used); y then sees w3 = 1 and w4 = 0
        [job("x", "w1", REQUEST_GAINS), job("y", "w1", REQUEST_GAINS), job("a", "w1"),
         job("b", "w1"), job("c", "w2"), job("d", "w2")],
        {"w3": 1.0, "w4": 2.0},
        [("migrate", "x", "w1", "w3"), ("migrate", "y", "w1", "w4")],
        id="alg4-counts-update-between-requests"),
]


@pytest.mark.parametrize(("jobs", "usage", "expected"), ALG4)
def test_algorithm_4_scheduling(jobs: list[Container], usage: dict[str, float],
                                expected: list[tuple[str, str, str, str]]) -> None:
    decision = plan(policy(), cluster(*jobs, usage=usage))
    assert moves(decision) == expected
    for action in decision.actions:
        assert isinstance(action, Migrate | MarkMigrated)
        assert action.converged_at == NOW
        assert set(action.scores) == {"w1", "w2", "w3", "w4"}


def test_thesis_worker_score_example_names_the_numbers() -> None:
    decision = plan(policy(), cluster(*thesis_jobs()))
    (action,) = decision.actions
    assert isinstance(action, Migrate)
    assert dict(action.scores) == {"w1": 6.0, "w2": 3.5, "w3": 4.0, "w4": 11.0}
    assert not action.rebalance
    assert action.reason == ("converged (g=0.004 < alpha=0.01, falling); "
                             "scores w1=6 w2=3.5 w3=4 w4=11: w2 is the only minimum")
    assert decision.notes[0] == "scores: w1=6 w2=3.5 w3=4 w4=11"
    assert assessment(decision, "cc").category == "CC"


def test_every_move_carries_the_policy_grace_period() -> None:
    """The actuator's SIGTERM grace comes from the action, so a reloaded policy's
    migration_grace_seconds applies to its next move (Algorithms 4 and 5 alike)."""
    (move,) = plan(policy(migration_grace_seconds=90), cluster(*thesis_jobs())).actions
    assert isinstance(move, Migrate) and move.grace_seconds == 90
    (moved,) = plan(policy(migration_grace_seconds=5),
                    cluster(*ONE_IDLE, nodes=("w1", "w2", "w3"))).actions
    assert isinstance(moved, Migrate) and moved.rebalance and moved.grace_seconds == 5
    assert decision_to_dict(plan(policy(), cluster(*thesis_jobs())))["actions"][0][
        "grace_seconds"] == 60


def test_stay_reason_names_the_minimum() -> None:
    (action,) = plan(policy(), cluster(*STAY)).actions
    assert isinstance(action, MarkMigrated)
    assert action.reason.endswith("stays on w1: current host has the minimum score 4")


def test_least_usage_reason_names_the_usage() -> None:
    (action,) = plan(policy(), cluster(*TWO_CANDIDATES, usage={"w2": 8.0, "w3": 3.0})).actions
    assert "minimum 2 on w2, w3; w3 has the lowest usage 3 cores" in action.reason


# --- Algorithm 5 ------------------------------------------------------------------------------


def done(cid: str, node: str, d: float | None, *, rebalanced: bool = False) -> Container:
    """A job reallocated earlier, converged d seconds ago (None: no converged_at)."""
    return job(cid, node, CC_GAINS, migrated=True, rebalanced=rebalanced,
               converged_at=None if d is None else NOW - d)


# sum 4, |W| 3: bf 1; w3 is idle and takes b (d = 45).
ONE_IDLE = [done("a", "w1", 100), done("b", "w1", 45), done("c", "w2", 300), done("d", "w2", 200)]

ALG5 = [
    pytest.param(ONE_IDLE, ("w1", "w2", "w3"), {}, [("rebalance", "b", "w1", "w3")],
                 id="alg5-l10-idle-worker-takes-smallest-d"),
    pytest.param(  # sum 6, |W| 4: bf 1; w3 then w4 each take one, smallest d first
        [done("a", "w1", 100), done("b", "w1", 45), done("c", "w1", 400),
         done("d", "w2", 300), done("e", "w2", 60), done("f", "w2", 500)],
        ("w1", "w2", "w3", "w4"), {},
        [("rebalance", "b", "w1", "w3"), ("rebalance", "e", "w2", "w4")],
        id="alg5-l11-each-idle-worker-takes-one"),
    pytest.param(  # sum 1, |W| 3: bf 0, no idle worker is below it
        [done("a", "w1", 100)], ("w1", "w2", "w3"), {}, [],
        id="alg5-l12-bf-zero-idle-stays-idle"),
    pytest.param(  # 1 + 5 + 6 = 12, bf 4: w1 < 3 takes the smallest d from w2/w3, not its own
        [done("a", "w1", 10),
         *[done(f"b{i}", "w2", 100 + i) for i in range(5)],
         *[done(f"c{i}", "w3", 50 + i) for i in range(6)]],
        ("w1", "w2", "w3"), {}, [("rebalance", "c0", "w3", "w1")],
        id="alg5-l19-below-bf-minus-1"),
    pytest.param(  # 2 + 2 + 3, bf 2: nobody below bf - 1 = 1
        [done("a", "w1", 10), done("b", "w1", 20), done("c", "w2", 30), done("d", "w2", 40),
         done("e", "w3", 50), done("f", "w3", 60), done("g", "w3", 70)],
        ("w1", "w2", "w3"), {}, [], id="alg5-l21-balanced-nothing-moves"),
    pytest.param(  # the same with a fixed bf 3: w1 (2) < bf - 1 = 2 is false; w1 with 1 is true
        [done("a", "w1", 10), done("c", "w2", 30), done("d", "w2", 40),
         done("e", "w3", 50), done("f", "w3", 60), done("g", "w3", 70)],
        ("w1", "w2", "w3"), {"balance_factor": 3}, [("rebalance", "c", "w2", "w1")],
        id="alg5-l9-fixed-balance-factor"),
    pytest.param(  # b has the smallest d but was rebalanced already: no ping-pong
        [done("a", "w1", 100), done("b", "w1", 45, rebalanced=True), done("c", "w2", 300),
         done("d", "w2", 200)],
        ("w1", "w2", "w3"), {}, [("rebalance", "a", "w1", "w3")],
        id="alg5-rebalanced-never-chosen-again"),
    pytest.param(  # b has no converged_at, so no d_c
        [done("a", "w1", 100), done("b", "w1", None), done("c", "w2", 300)],
        ("w1", "w2", "w3"), {}, [("rebalance", "a", "w1", "w3")],
        id="alg5-l5-no-converged-at-never-chosen"),
    pytest.param(  # d is still being watched (not migrated): Algorithm 5 waits
        [done("a", "w1", 100), done("b", "w1", 45), job("c", "w2", CC_GAINS)],
        ("w1", "w2", "w3"), {}, [], id="alg5-l1-not-all-migrated-no-rebalance"),
    pytest.param(
        [done("a", "w1", 100), done("b", "w1", 45)],
        ("w1", "w2"), {"rebalance": False}, [], id="alg5-disabled"),
    pytest.param(
        ONE_IDLE, ("w1", "w2", "w3"), {"safety": {"max_migrations_per_cycle": 0}}, [],
        id="alg5-budget-applies"),
    pytest.param(  # "bad" counts in |w1| (bf = 3 // 3 = 1) but has no category: never moved
        [done("a", "w1", 100), job("bad", "w1", migrated=True, converged_at=NOW - 10,
                                   evaluation=Series.of([NOW - 30, NOW], [1.0, math.nan])),
         done("c", "w2", 300)],
        ("w1", "w2", "w3"), {}, [("rebalance", "a", "w1", "w3")],
        id="alg5-problem-jobs-count-but-never-move"),
]


@pytest.mark.parametrize(("jobs", "nodes", "spec", "expected"), ALG5)
def test_algorithm_5_rebalancing(jobs: list[Container], nodes: tuple[str, ...],
                                 spec: dict[str, object],
                                 expected: list[tuple[str, str, str, str]]) -> None:
    decision = plan(policy(**spec), cluster(*jobs, nodes=nodes))
    assert moves(decision) == expected
    for action in decision.actions:
        assert isinstance(action, Migrate)
        assert action.converged_at is None
        assert "rebalance" in assessment(decision, action.container).note


def test_rebalance_reason_and_notes_name_the_numbers() -> None:
    decision = plan(policy(), cluster(*ONE_IDLE, nodes=("w1", "w2", "w3")))
    (action,) = decision.actions
    assert action.reason == ("rebalance: w3 idle, bf=1; smallest converged duration d=45 s "
                             "(from w1, 2 jobs)")
    assert "rebalance: bf=1, idle workers: w3" in decision.notes


def test_rebalance_passes_over_blocked_candidates() -> None:
    decision = plan(policy(safety={"cooldown_seconds": 120}), cluster(
        done("a", "w1", 100), job("b", "w1", CC_GAINS, migrated=True, converged_at=NOW - 45,
                                  last_action_at=NOW - 45),
        done("c", "w2", 300), nodes=("w1", "w2", "w3")))
    assert moves(decision) == [("rebalance", "a", "w1", "w3")]
    assert "in cooldown" in assessment(decision, "b").note


# --- Safety -----------------------------------------------------------------------------------


def two_requests() -> Snapshot:
    """x and y on w1 both request; w3 and w4 are empty, w3 the less used."""
    return cluster(job("x", "w1", REQUEST_GAINS), job("y", "w1", REQUEST_GAINS),
                   job("a", "w1"), job("b", "w1"), job("c", "w2"), usage={"w3": 1.0})


@pytest.mark.parametrize(("safety", "kept", "note"), [
    pytest.param({"max_migrations_per_cycle": 1}, ["x"], "max_migrations_per_cycle (1) reached",
                 id="safety-budget-per-cycle"),
    pytest.param({"max_migrations_per_node": 1}, ["x"], "max_migrations_per_node (1) reached on w1",
                 id="safety-budget-per-node"),
    pytest.param({"max_migrations_per_cycle": 0}, [], "max_migrations_per_cycle (0) reached",
                 id="safety-budget-zero"),
])
def test_migration_budget(safety: dict[str, int], kept: list[str], note: str) -> None:
    decision = plan(policy(safety=safety), two_requests())
    assert [m[1] for m in moves(decision)] == kept
    assert note in assessment(decision, "y").note


@pytest.mark.parametrize(("container", "safety", "note"), [
    pytest.param(job("x", "w1", REQUEST_GAINS, last_action_at=NOW - 30),
                 {"cooldown_seconds": 300}, "in cooldown", id="safety-cooldown"),
    pytest.param(job("x", "w1", REQUEST_GAINS, labels={"app": "train",
                                                       "policyd.io/opt-out": "true"}),
                 {}, "opted out", id="safety-opt-out"),
    pytest.param(job("x", "w1", REQUEST_GAINS, started_at=NOW - 200),
                 {"min_job_age_seconds": 3600}, "younger than min_job_age_seconds",
                 id="safety-min-age"),
    pytest.param(job("x", "w1", REQUEST_GAINS, started_at=NOW + 0.5), {},
                 "its exporter not scraped since", id="restarted-not-scraped-yet"),
    pytest.param(replace(job("x", "w1", REQUEST_GAINS),
                         markers=Markers(move_failures=2, move_failed_at=NOW - 100)),
                 {"move_backoff_seconds": 60}, "backing off after 2 failed move(s) (100 s of "
                 "120 s)", id="backoff-after-failed-moves"),
])
def test_guards_block_requests(container: Container, safety: dict[str, float],
                               note: str) -> None:
    decision = plan(policy(safety=safety), cluster(container, job("a", "w1"), job("b", "w1")))
    assert decision.actions == ()
    found = assessment(decision, "x")
    assert found.category == "CC"
    assert note in found.note


def test_cooldown_blocks_a_stay_too() -> None:
    jobs = [job("x", "w1", REQUEST_GAINS, last_action_at=NOW - 10), *STAY[1:]]
    decision = plan(policy(safety={"cooldown_seconds": 60}), cluster(*jobs))
    assert decision.actions == ()


def test_a_stay_spends_no_migration_budget() -> None:
    # w1 = x + 2 WC = 4, w2 = y + 2 PC = 5, w3 = 2 PC = 4: x stays, y moves to w3.
    snapshot = cluster(job("x", "w1", REQUEST_GAINS), job("a", "w1", WC_GAINS),
                       job("b", "w1", WC_GAINS), job("y", "w2", REQUEST_GAINS), job("c", "w2"),
                       job("d", "w2"), job("e", "w3"), job("f", "w3"), nodes=("w1", "w2", "w3"),
                       usage={"w3": 1.0})
    decision = plan(policy(safety={"max_migrations_per_cycle": 1}), snapshot)
    assert moves(decision) == [("stay", "x", "w1", "w1"), ("migrate", "y", "w2", "w3")]


def test_opted_out_jobs_count_in_scores() -> None:
    opted = {"app": "train", "policyd.io/opt-out": "true"}
    snapshot = cluster(job("x", "w1", REQUEST_GAINS), job("a", "w1"), job("b", "w1"),
                       job("o", "w2", labels=opted), nodes=("w1", "w2", "w3"))
    decision = plan(policy(), snapshot)
    assert moves(decision) == [("migrate", "x", "w1", "w3")]
    assert assessment(decision, "o").category == "PC"


def test_unselected_containers_are_invisible() -> None:
    other = {"app": "web"}
    snapshot = cluster(job("x", "w1", REQUEST_GAINS), job("a", "w1"), job("b", "w1"),
                       job("u1", "w2", labels=other), job("u2", "w2", labels=other),
                       nodes=("w1", "w2", "w3"), usage={"w3": 9.0})
    decision = plan(policy(selector={"labels": {"app": "train"}}), snapshot)
    assert moves(decision) == [("migrate", "x", "w1", "w2")]
    assert {a.container for a in decision.assessments} == {"x", "a", "b"}


def test_dry_run_is_reported_not_acted_on_here() -> None:
    decision = plan(policy(dry_run=True), cluster(*thesis_jobs()))
    assert decision.dry_run
    assert moves(decision) == [("migrate", "cc", "w4", "w2")]


# --- Bad series -------------------------------------------------------------------------------

_T = [NOW - (4 - m) * ITVAL for m in range(5)]


@pytest.mark.parametrize(("evaluation", "category", "note"), [
    pytest.param(Series.of(_T, [*losses(REQUEST_GAINS)[:4], float("nan")]), None,
                 "evaluation is nan", id="bad-nan"),
    pytest.param(Series.of(_T[:2], losses(REQUEST_GAINS)[:2]), None,  # last sample 90 s old
                 "gap: no evaluation sample for 90 s", id="bad-gap"),
    pytest.param(Series.of([_T[0], _T[2], _T[1]], [2.0, 1.9, 1.8]), None, "not increasing",
                 id="bad-unordered-times"),
    pytest.param(Series.of([NOW], [2.0]), "PC", "no gain yet", id="bad-too-few-samples"),
    pytest.param(Series.empty(), "PC", "no gain yet", id="bad-no-samples"),
])
def test_bad_series_get_no_action(evaluation: Series, category: str | None, note: str) -> None:
    snapshot = cluster(job("x", "w1", evaluation=evaluation), job("a", "w1"), job("b", "w1"))
    decision = plan(policy(), snapshot)
    found = assessment(decision, "x")
    assert decision.actions == ()
    assert found.category == category
    assert note in found.note
    if category is None:
        assert "x" in decision.skipped


def test_problem_containers_are_not_counted_in_scores() -> None:
    broken = Series.of([NOW - 30, NOW], [float("nan"), 1.0])
    snapshot = cluster(job("x", "w1", REQUEST_GAINS), job("a", "w1"), job("b", "w1"),
                       job("bad1", "w2", evaluation=broken), job("bad2", "w2", evaluation=broken),
                       job("c", "w3"), nodes=("w1", "w2", "w3"))
    (action,) = plan(policy(), snapshot).actions
    assert isinstance(action, Migrate)
    assert (action.to_node, action.scores["w2"]) == ("w2", 0.0)


def test_other_kinds_are_refused() -> None:
    flowcon = FlowConPolicy.model_validate({"apiVersion": "policyd.io/v1alpha1",
                                            "kind": "FlowCon", "metadata": {"name": "f"},
                                            "spec": {}})
    with pytest.raises(TypeError, match="FlowCon"):
        plan(flowcon, cluster())


def test_empty_cluster() -> None:
    decision = decide(policy(), cluster())
    assert (decision.actions, decision.assessments, decision.next_interval) == ((), (), ITVAL)


def test_interval_comes_from_the_snapshot() -> None:
    base = cluster(*thesis_jobs())
    snapshot = Snapshot(time=base.time, nodes=base.nodes, containers=base.containers,
                        intervals={"specon-test": 60.0})
    decision = plan(policy(), snapshot)
    assert decision.next_interval == 60.0


# --- Properties -------------------------------------------------------------------------------

PATTERNS = [(), PC_GAINS, WC_GAINS, CC_GAINS, REQUEST_GAINS, (*REQUEST_GAINS, 0.02),
            (0.05, 0.008, 0.006, 0.007, 0.004)]


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    nodes = [f"w{i}" for i in range(1, draw(st.integers(1, 4)) + 1)]
    count = draw(st.integers(0, 12))
    jobs = []
    for i in range(count):
        migrated = draw(st.booleans())
        d = draw(st.one_of(st.none(), st.integers(0, 3600)))
        jobs.append(job(
            f"c{i:02d}", draw(st.sampled_from(nodes)), draw(st.sampled_from(PATTERNS)),
            migrated=migrated, converged_at=None if d is None else NOW - d,
            rebalanced=migrated and draw(st.booleans())))
    order = draw(st.permutations(jobs))
    usage = {n: float(draw(st.integers(0, 3))) for n in nodes}
    return cluster(*order, nodes=nodes, usage=usage)


@settings(max_examples=150, deadline=None)
@given(snapshots())
def test_algorithm_4_acts_at_most_once_and_never_on_migrated(snapshot: Snapshot) -> None:
    decision = plan(policy(safety={"max_migrations_per_cycle": 100,
                                   "max_migrations_per_node": 100}), snapshot)
    acted = [a.container for a in decision.actions]
    assert len(acted) == len(set(acted))
    migrated = {c.id for c in snapshot.containers if c.markers.migrated}
    for action in decision.actions:
        if isinstance(action, MarkMigrated) or (isinstance(action, Migrate)
                                                and not action.rebalance):
            assert action.container not in migrated
        else:
            assert action.container in migrated


@settings(max_examples=100, deadline=None)
@given(snapshots(), st.randoms(use_true_random=False))
def test_same_snapshot_same_decision(snapshot: Snapshot, rng: random.Random) -> None:
    shuffled = list(snapshot.containers)
    rng.shuffle(shuffled)
    again = Snapshot(time=snapshot.time, nodes=snapshot.nodes, containers=tuple(shuffled))
    first = decision_to_dict(plan(policy(), snapshot))
    assert decision_to_dict(plan(policy(), snapshot)) == first
    assert decision_to_dict(plan(policy(), again)) == first


GAIN_VALUES = st.sampled_from([math.nan, 0.0, 0.001, 0.004, 0.006, 0.01, 0.02, 0.5])


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 5).flatmap(lambda n: st.tuples(
    st.lists(st.lists(GAIN_VALUES, min_size=8, max_size=8), min_size=n, max_size=n),
    st.integers(0, 8))))
def test_replaying_in_two_pieces_equals_one_go(case: tuple[list[list[float]], int]) -> None:
    rows, cut = case
    gains = np.array(rows)
    once = replay(Replay.initial(len(rows)), gains, alpha=0.01)
    half = replay(Replay.initial(len(rows)), gains[:, :cut], alpha=0.01)
    twice = replay(half, gains[:, cut:], alpha=0.01)
    assert once.category.tolist() == twice.category.tolist()
    assert once.previous.tolist() == twice.previous.tolist()
    assert once.requesting.tolist() == twice.requesting.tolist()


WEIGHT = st.floats(0.1, 10.0, allow_nan=False)


@given(WEIGHT, WEIGHT, WEIGHT)
def test_weights_must_be_ordered(pc: float, wc: float, cc: float) -> None:
    if pc > wc > cc:
        Weights(pc=pc, wc=wc, cc=cc)
    else:
        with pytest.raises(ValidationError, match="must be greater than"):
            Weights(pc=pc, wc=wc, cc=cc)


@settings(max_examples=50, deadline=None)
@given(st.lists(WEIGHT, min_size=3, max_size=3, unique=True))
def test_thesis_example_holds_for_any_ordered_weights(values: list[float]) -> None:
    cc, wc, pc = sorted(values)
    pol = policy(weights={"pc": pc, "wc": wc, "cc": cc})
    assert moves(plan(pol, cluster(*thesis_jobs()))) == [("migrate", "cc", "w4", "w2")]


# --- Example snapshots ------------------------------------------------------------------------


def load_example(name: str) -> Snapshot:
    with (EXAMPLES / name).open() as f:
        return snapshot_from_dict(json.load(f))


def test_example_thesis_worker_score() -> None:
    decision = decide(policy(), load_example("thesis-specon-worker-score.json"))
    (action,) = decision.actions
    assert isinstance(action, Migrate)
    assert (action.from_node, action.to_node, action.rebalance) == ("w4", "w2", False)
    assert dict(action.scores) == {"w1": 6.0, "w2": 3.5, "w3": 4.0, "w4": 11.0}
    categories = decision.categories
    assert sorted(categories.values()).count("PC") == 11
    assert categories[action.container] == "CC"


def test_example_rebalance() -> None:
    snapshot = load_example("thesis-specon-rebalance.json")
    decision = decide(policy(), snapshot)
    assert all(c.markers.migrated for c in snapshot.containers)
    (action,) = decision.actions
    assert isinstance(action, Migrate)
    assert action.rebalance
    durations = {c.id: snapshot.time - (c.markers.converged_at or 0)
                 for c in snapshot.containers}
    assert action.container == min(durations, key=lambda cid: durations[cid])
    idle = {n.name for n in snapshot.nodes} - {c.node for c in snapshot.containers}
    assert {action.to_node} == idle
