"""Deadline's move rule (`policyd.engine.deadline_moves`): the sorted search picks what a pass
over every worker picks, on random clusters."""

from __future__ import annotations

import random

import pytest

from policyd.engine.deadline import DeadlinePolicy, DeadlineSpec
from policyd.engine.deadline_moves import at_risk_moves
from policyd.engine.guards import MigrationBudget
from policyd.model import AtRiskJob


def spec(per_cycle: int, per_node: int) -> DeadlineSpec:
    return DeadlinePolicy.model_validate({
        "apiVersion": "policyd.io/v1alpha1", "kind": "Deadline", "metadata": {"name": "d"},
        "spec": {"safety": {"max_migrations_per_cycle": per_cycle,
                            "max_migrations_per_node": per_node}}}).spec


def plain(jobs: list[tuple[str, AtRiskJob]], spare: dict[str, float],
          capacity: dict[str, float], s: DeadlineSpec) -> dict[str, str]:
    """The rule written as a pass over every worker for every job."""
    budget = MigrationBudget.of(s)
    spare, moved = dict(spare), {}
    for node, job in sorted(jobs, key=lambda x: x[1].deadline_seconds):
        options = [(-spare[name], name) for name in capacity if name != node
                   and job.need_elsewhere_cores <= min(job.cap_cores, capacity[name],
                                                       spare[name]) + 1e-9
                   and budget.refusal(node, name) is None]
        if not options:
            continue
        _, target = min(options)
        moved[job.container] = target
        budget.spend(node, target)
        spare[target] -= job.need_elsewhere_cores
        spare[node] += job.reserved_cores
    return moved


def cluster(rng: random.Random) -> tuple[list[tuple[str, AtRiskJob]], dict[str, float],
                                         dict[str, float]]:
    workers = [f"w{i:02d}" for i in range(rng.randint(1, 12))]
    capacity = {w: float(rng.choice([1, 2, 4, 8])) for w in workers}
    # few distinct spare values, so that ties by name are common
    spare = {w: min(capacity[w], rng.choice([-0.5, 0.0, 0.5, 1.0, 2.0, 3.0])) for w in workers}
    jobs = []
    for i in range(rng.randint(0, 15)):
        need = rng.choice([0.25, 0.5, 1.0, 1.5, 2.0, 3.0])
        jobs.append((rng.choice(workers), AtRiskJob(
            container=f"j{i:02d}", deadline_seconds=float(rng.randint(0, 5)),
            need_elsewhere_cores=need, cap_cores=rng.choice([need, 2.0, 4.0]),
            reserved_cores=rng.choice([0.1, 0.5, 1.0]), granted_cores=0.1,
            need_here_cores=need)))
    return jobs, spare, capacity


def test_the_sorted_search_moves_as_the_plain_pass_does() -> None:
    rng = random.Random(7)
    moved_clusters = moves = 0
    for _ in range(400):
        jobs, spare, capacity = cluster(rng)
        s = spec(per_cycle=rng.randint(1, 6), per_node=rng.randint(1, 3))
        left = dict(spare)
        got = at_risk_moves("d", s, jobs, spare=left, capacity=capacity, now=0.0)
        want = plain(jobs, spare, capacity, s)
        assert {c: m.to_node for c, m in got.items()} == want
        moved_clusters += bool(want)
        moves += len(want)
        # the spare cores left are those the moves leave, for the admissions after them
        expect = dict(spare)
        for node, job in jobs:
            if job.container in want:
                expect[want[job.container]] -= job.need_elsewhere_cores
                expect[node] += job.reserved_cores
        assert left == pytest.approx(expect)
    assert moved_clusters > 150 and moves > 300


def test_a_reason_names_the_need_the_grant_and_the_spare_cores() -> None:
    job = AtRiskJob(container="a", deadline_seconds=600.0, need_elsewhere_cores=1.5,
                    cap_cores=2.0, reserved_cores=0.5, granted_cores=0.4, need_here_cores=1.2)
    got = at_risk_moves("d", spec(5, 2), [("w1", job)], spare={"w1": 0.0, "w2": 3.0},
                        capacity={"w1": 4.0, "w2": 4.0}, now=0.0)
    assert got["a"].reason == (
        "at risk on w1: needs 1.20 cores to meet its deadline in 10 min, the node gives 0.40; "
        "on w2 1.50 of 3.00 spare cores meet it with the margin, the move's 30 s counted")
