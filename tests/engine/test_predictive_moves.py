"""Predictive's move rule (`policyd.engine.predictive_moves.plan_moves`): the search that stops
as soon as no move can follow makes exactly the moves of the plain search over every target,
on workers of equal and of unequal speeds."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import pytest

from policyd.engine.guards import MigrationBudget
from policyd.engine.node_speed import NodeSpeeds
from policyd.engine.predictive import PredictiveSpec
from policyd.engine.predictive_moves import plan_moves
from policyd.model import WaitingJob


def plain(spec: PredictiveSpec, waiting: Sequence[tuple[str, WaitingJob]],
          spare: Mapping[str, float], budget: MigrationBudget,
          speed: Mapping[str, float]) -> list[tuple[str, str, str]]:
    """The rule as first written: every target, most spare first, priced against every
    waiting job each time (its time there at the target's speed over its own worker's)."""
    left, candidates, out = dict(spare), list(waiting), []
    threshold = spec.migration_cost_seconds * (1.0 + spec.migration_margin)
    for target in sorted(left, key=lambda node: (-left[node], node)):
        while left[target] >= 1.0 - 1e-9 and candidates:
            best: tuple[float, int, float] | None = None
            for i, (node, job) in enumerate(candidates):
                if node == target or budget.refusal(node, target):
                    continue
                there = min(left[target], job.best_cores)
                moved = job.remaining_seconds_at(there) * speed[node] / speed[target]
                gain = job.ahead_seconds - moved
                if gain > threshold and (best is None or gain > best[0]):
                    best = (gain, i, there)
            if best is None:
                break
            _, i, there = best
            node, job = candidates.pop(i)
            out.append((job.container, node, target))
            budget.spend(node, target)
            left[target] -= there
    return out


def world(rng: random.Random
          ) -> tuple[list[tuple[str, WaitingJob]], dict[str, float], dict[str, float]]:
    nodes = [f"w{i}" for i in range(rng.randint(1, 12))]
    spare = {n: rng.choice([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 8.0]) for n in nodes}
    equal = rng.random() < 0.5
    speed = {n: 1.0 if equal else rng.choice([0.5, 0.6, 1.0, 1.5, 2.0]) for n in nodes}
    waiting = []
    for j in range(rng.randint(0, 25)):
        waiting.append((rng.choice(nodes), WaitingJob(
            container=f"j{j}", ahead_seconds=rng.uniform(0, 2000),
            best_cores=rng.choice([1.0, 2.0, 4.0]), remaining_steps=rng.uniform(0, 3000),
            serial_seconds=rng.uniform(0.01, 0.3), parallel_seconds=rng.uniform(0.01, 0.5),
            cap_cores=rng.choice([1.0, 2.0, 4.0, 16.0]))))
    return waiting, spare, speed


@pytest.mark.parametrize("seed", range(400))
def test_the_search_that_stops_early_moves_what_the_plain_search_moves(seed: int) -> None:
    rng = random.Random(seed)
    waiting, spare, speed = world(rng)
    spec = PredictiveSpec(migrate=True, migration_cost_seconds=rng.choice([0.0, 30.0, 200.0]),
                          safety={"max_migrations_per_cycle": rng.randint(0, 6),
                                  "max_migrations_per_node": rng.randint(0, 3)})
    found = plan_moves("p", spec, waiting, spare, MigrationBudget.of(spec),
                       speeds=NodeSpeeds(by_node=speed, notes={}))
    assert [(m.container, m.from_node, m.to_node) for m, _ in found.values()] == \
        plain(spec, waiting, spare, MigrationBudget.of(spec), speed)
