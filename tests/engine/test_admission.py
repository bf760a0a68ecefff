"""The shared admission part: candidates in order, each on the freest node that fits,
backfilling past a job that fits nowhere, blocked jobs queued with why, and `last` jobs
admitted only when nothing else waits."""

from __future__ import annotations

import random

import pytest

from policyd.engine.admission import Candidate, place
from policyd.model import PendingJob
from policyd.model.pending import Why


def held(jid: str, node: str | None = None) -> PendingJob:
    return PendingJob(id=jid, name=jid, submitted_at=0.0, node=node)


def candidate(jid: str, key: float, cores: float = 1.0, *, node: str | None = None,
              last: bool = False, blocked: str = "", blocked_why: Why = "blocked") -> Candidate:
    return Candidate(job=held(jid, node), key=(key,), cores=cores, about=f"about {jid}",
                     last=last, blocked=blocked, blocked_why=blocked_why)


def test_in_order_on_the_freest_node_that_fits() -> None:
    p = place([candidate("b", 2.0), candidate("a", 1.0)], {"w1": 2.0, "w2": 1.5}, policy="dl")
    assert [(a.container, a.node) for a in p.admits] == [("a", "w1"), ("b", "w2")]
    assert dict(p.free) == {"w1": 1.0, "w2": 0.5}
    assert p.queue == ()
    assert p.admits[0].reason == "about a; 1.00 cores needed, 2.00 free on w1"


def test_a_job_that_fits_nowhere_waits_and_smaller_ones_pass_it() -> None:
    p = place([candidate("big", 1.0, cores=3.0), candidate("small", 2.0)], {"w1": 2.0},
              policy="dl")
    assert [a.container for a in p.admits] == ["small"]
    (waiting,) = p.queue
    assert (waiting.container, waiting.position, waiting.why) == ("big", 1, "no_fit")
    assert "needs 3.00 free cores, no node has them (most free: w1 with 2.00)" in waiting.reason


def test_ties_go_to_the_node_the_job_is_held_on() -> None:
    p = place([candidate("a", 1.0, node="w2")], {"w1": 2.0, "w2": 2.0}, policy="dl")
    assert (p.admits[0].node, p.admits[0].held_on) == ("w2", "w2")


def test_blocked_jobs_wait_with_their_reason() -> None:
    p = place([candidate("bad", 0.0, blocked="not admitted: bad deadline",
                         blocked_why="invalid")], {"w1": 4.0}, policy="dl")
    assert p.admits == ()
    assert [(q.container, q.why, q.reason) for q in p.queue] == [
        ("bad", "invalid", "not admitted: bad deadline")]


def test_last_jobs_start_only_when_nothing_else_waits() -> None:
    jobs = [candidate("late", 0.0, last=True), candidate("big", 1.0, cores=9.0)]
    p = place(jobs, {"w1": 2.0}, policy="dl")
    assert p.admits == ()
    assert [(q.container, q.position, q.why) for q in p.queue] == [
        ("big", 1, "no_fit"), ("late", 2, "hopeless")]
    p = place([candidate("late", 0.0, last=True, cores=3.0)], {"w1": 2.0}, policy="dl")
    assert [(a.container, a.node) for a in p.admits] == [("late", "w1")]
    assert "no other job waits" in p.admits[0].reason


def plain_place(candidates: list[Candidate], free_cores: dict[str, float]
                ) -> tuple[list[tuple[str, str]], list[str], dict[str, float]]:
    """The rule as a pass over every node for every candidate: the freest node among those
    it fits (ties: where it is held, then by name); `last` ones only when nothing waits."""
    free = dict(free_cores)
    order = sorted(candidates, key=lambda c: (c.last, c.key, c.job.id))
    admitted, waiting = [], []

    def freest(nodes: dict[str, float], held_on: str | None) -> str:
        return min(nodes, key=lambda n: (-nodes[n], n != held_on, n))

    for c in order:
        if c.last:
            continue
        fitting = {n: f for n, f in free.items() if f + 1e-9 >= c.cores}
        if c.blocked or not fitting:
            waiting.append(c.job.id)
            continue
        node = freest(fitting, c.job.node)
        admitted.append((c.job.id, node))
        free[node] -= c.cores
    others_wait = bool(waiting)
    for c in order:
        if not c.last:
            continue
        if c.blocked or others_wait or not free:
            waiting.append(c.job.id)
            continue
        node = freest(free, c.job.node)
        admitted.append((c.job.id, node))
        free[node] -= c.cores
    return admitted, waiting, free


def test_kept_sorted_the_nodes_give_what_a_pass_over_every_node_gives() -> None:
    rng = random.Random(11)
    admitted_total = 0
    for _ in range(400):
        nodes = [f"w{i}" for i in range(rng.randint(0, 8))]
        free = {n: rng.choice([-1.0, 0.0, 0.5, 1.0, 1.5, 2.0, 4.0]) for n in nodes}
        candidates = [Candidate(
            job=PendingJob(id=f"j{i}", name=f"j{i}", submitted_at=float(i),
                           node=rng.choice([None, *nodes])),
            key=(float(rng.randint(0, 3)),), cores=rng.choice([0.5, 1.0, 2.0]), about="a",
            last=rng.random() < 0.2, blocked="held back" if rng.random() < 0.1 else "")
            for i in range(rng.randint(0, 10))]
        placed = place(candidates, free, policy="p")
        admitted, waiting, left = plain_place(candidates, free)
        assert [(a.container, a.node) for a in placed.admits] == admitted
        assert [q.container for q in placed.queue] == waiting
        assert placed.free == pytest.approx(left)
        admitted_total += len(admitted)
    assert admitted_total > 500
