"""FlowCon2's move search (`flowcon2_placement.best_moves`) against the plain one it stands for:
every (job, target) priced (`move_gain`), the greatest gain over the threshold moved (in whole
milliseconds, `gain_ms`), ties to the first in the order of the workers, their jobs and the
targets, again until none is left. The
search prices only the moves whose bound could beat the best found and walks the workers fastest
first, so the models here are small, random and full of what could trip it: several capacities,
equal speeds, identical workers and jobs (equal gains), budgets of 1-2 moves a worker, jobs that
never end where they are, workers holding a job without a forecast. And the model where the
bound would fall short if a move were credited with it: an arrival that speeds up a job where
it arrives."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest

import policyd.engine.flowcon2_placement as placement
from policyd.engine.drain import finish_seconds
from policyd.engine.flowcon2 import FlowCon2Policy, as_predictive
from policyd.engine.flowcon2_placement import (
    Arrival,
    ModelJob,
    Move,
    _movable_why,
    best_moves,
    gain_ms,
    growth_arrival,
    move_gain,
    remaining_arrival,
    total_seconds,
)
from policyd.engine.forecast_output import Forecast
from policyd.engine.guards import MigrationBudget
from policyd.engine.node_speed import NodeSpeeds
from policyd.engine.predictive_node import Job
from policyd.engine.spec import API_VERSION
from policyd.model import Container, Series

NOW = 1_700_000_000.0
MODELS = 150  # per arrival


def policy(rng: random.Random) -> FlowCon2Policy:
    """Small budgets (1-2 moves a worker) and a low cost, so that rounds move and run out."""
    return FlowCon2Policy.model_validate({
        "apiVersion": API_VERSION, "kind": "FlowCon2", "metadata": {"name": "fc2"},
        "spec": {"migration_cost_seconds": rng.choice([0.0, 5.0, 30.0]),
                 "safety": {"max_migrations_per_cycle": rng.randint(1, 6),
                            "max_migrations_per_node": rng.randint(1, 2)}}})


def forecast(steps: float, serial: float, parallel: float, cap: float) -> Forecast:
    """A forecast whose drain and bound read `steps` left at serial + parallel / cores a step."""
    per_step = serial + parallel
    return Forecast(steps_done=100.0, total_steps=None, remaining_steps=steps,
                    remaining_seconds=steps * per_step, finish_at=NOW + steps * per_step,
                    low_seconds=0.0, high_seconds=0.0, target_loss=None,
                    target_eta_seconds=None, basis="total steps", steps_per_second=1 / per_step,
                    parallel_fraction=parallel / per_step, serial_seconds=serial,
                    parallel_seconds=parallel, cap_cores=cap)


def random_job(rng: random.Random, jid: str, speed: float) -> ModelJob:
    """A job: mostly forecast, some without (its worker cannot be judged), some that would
    never end (no finite own finish: never moved)."""
    kind = rng.random()
    f = (None if kind < 0.1 else
         forecast(math.inf if kind < 0.18 else float(rng.choice([50, 200, 800, 3000])),
                  rng.choice([0.01, 0.05]), rng.choice([0.2, 0.5, 1.0]),
                  float(rng.choice([0.5, 1, 2, 4, 8]))))
    return ModelJob(id=jid, weight=rng.choice([0.1, 0.25, 0.5, 1.0]),
                    cap=float(rng.choice([1, 2, 4])), converged=rng.random() < 0.7, forecast=f,
                    speed=speed)


def random_model(rng: random.Random) -> tuple[dict[str, list[ModelJob]], dict[str, float],
                                              NodeSpeeds, set[str]]:
    """Workers of a few capacities and speeds (ties), some copies of another (equal gains, or
    gains in the same millisecond),
    half with one weight for their converged jobs, half with unequal ones (where an arrival
    may speed them up in the drain: the last test), and the movable jobs: most converged
    forecast ones."""
    model: dict[str, list[ModelJob]] = {}
    capacity: dict[str, float] = {}
    speed: dict[str, float] = {}
    for n in range(rng.randint(2, 7)):
        node = f"w{n}"
        if model and rng.random() < 0.3:  # a copy of another worker: same jobs, new ids
            like = rng.choice(sorted(model))
            # as fast, or a hair faster or slower: gains in the same millisecond, the workers
            # walked in another order than their names'
            capacity[node] = capacity[like]
            speed[node] = speed[like] * rng.choice([1.0, 1.0, 1.0 - 1e-9, 1.0 + 1e-9])
            model[node] = [replace(j, id=f"{j.id}-{node}") for j in model[like]]
            continue
        capacity[node] = float(rng.choice([2, 4, 4, 8, 3.5]))
        speed[node] = rng.choice([0.5, 1.0, 1.0, 1.5, 2.0])
        first = random_job(rng, f"j{n}-0", speed[node])
        jobs = [first]
        for i in range(1, rng.randint(1, 5)):  # some jobs the same as the first: equal gains
            jobs.append(replace(first, id=f"j{n}-{i}") if rng.random() < 0.3
                        else random_job(rng, f"j{n}-{i}", speed[node]))
        if rng.random() < 0.5:  # one weight for its converged jobs, else each its own
            weight = rng.choice([0.1, 0.25, 1.0])
            jobs = [replace(j, weight=weight) if j.converged else j for j in jobs]
        model[node] = jobs if rng.random() < 0.9 else []
    movable = {j.id for jobs in model.values() for j in jobs
               if j.forecast is not None and j.converged and rng.random() < 0.8}
    return model, capacity, NodeSpeeds(by_node=speed, notes={}), movable


def remaining(model: Mapping[str, Sequence[ModelJob]], capacity: Mapping[str, float],
              fc2: FlowCon2Policy) -> Arrival:
    """`order: remaining`'s arrival over the model's jobs as Predictive's plan sees them."""
    jobs = {}
    for node, there in model.items():
        for j in there:
            container = Container(id=j.id, name=j.id, node=node, started_at=NOW - 600.0,
                                  evaluation=Series.empty(), cpu_usage=Series.empty(),
                                  cpu_allocation=j.weight)
            best = min(max(j.forecast.cap_cores, 1.0), capacity[node]) if j.forecast else 1.0
            key = j.forecast.remaining_seconds_at(best) if j.forecast else math.inf
            jobs[j.id] = Job(container=container, forecast=j.forecast, reported=None,
                             note="" if j.forecast else "none", key=key, best_cores=best)
    return remaining_arrival(jobs, capacity, as_predictive(fc2).spec, NOW)


def side(job: ModelJob, jobs: Sequence[ModelJob], capacity: float, speed: float,
         total: float) -> tuple[float, float]:
    """A move's side on its source, from its definition: when `job` ends there as the worker
    (`jobs`, whose `total_seconds` is `total`) drains, and what the jobs left there save."""
    own = finish_seconds([j.draining(capacity) for j in jobs], capacity, speed)[jobs.index(job)]
    return own, total - own - total_seconds([j for j in jobs if j is not job], capacity, speed)


def every_move(fc2: FlowCon2Policy, model: dict[str, list[ModelJob]], *, movable: set[str],
               capacity: Mapping[str, float], speeds: NodeSpeeds, arrive: Arrival
               ) -> list[Move]:
    """The plain search: every move priced every round, the first of the greatest gains."""
    threshold = fc2.spec.move_threshold_seconds
    budget = MigrationBudget.of(fc2.spec)
    moved: list[Move] = []
    while True:
        totals = {n: total_seconds(js, capacity[n], speeds.of(n)) for n, js in model.items()}
        best: tuple[Move, ModelJob] | None = None
        for source in sorted(model):
            for job in model[source]:
                if job.id not in movable or job.id in {m.job.id for m in moved}:
                    continue
                leaving = side(job, model[source], capacity[source], speeds.of(source),
                               totals[source])
                for target in sorted(model):
                    if target == source or budget.refusal(source, target) is not None:
                        continue
                    move = move_gain(job, source, target, model=model, capacity=capacity,
                                     speeds=speeds, arrive=arrive, totals=totals,
                                     leaving=leaving)
                    if (move is not None and move.gain > threshold
                            and (best is None or gain_ms(move.gain) > gain_ms(best[0].gain))):
                        best = (move, job)
        if best is None:
            return moved
        move, job = best
        moved.append(replace(move, why=_movable_why(job, move, fc2.spec, speeds)))
        budget.spend(move.source, move.target)
        model[move.source] = [j for j in model[move.source] if j.id != move.job.id]
        model[move.target] = [*model[move.target], move.job]


@pytest.mark.parametrize("order", ["growth", "remaining"])
def test_the_search_moves_what_pricing_every_move_moves(order: str) -> None:
    rng = random.Random(f"flowcon2-moves-{order}")
    chosen = 0
    for _ in range(MODELS):
        fc2 = policy(rng)
        model, capacity, speeds, movable = random_model(rng)
        arrive = (growth_arrival(fc2.spec.beta) if order == "growth"
                  else remaining(model, capacity, fc2))
        args: dict[str, Any] = {"movable": movable, "capacity": capacity, "speeds": speeds,
                                "arrive": arrive}
        expected_model = {n: list(js) for n, js in model.items()}
        expected = every_move(fc2, expected_model, **args)
        assert best_moves(fc2, model, **args) == expected
        assert model == expected_model
        chosen += len(expected)
    assert chosen > MODELS  # the models do move, several a cycle


def test_a_move_is_not_credited_with_jobs_on_its_target_ending_sooner() -> None:
    """Where only converged jobs run they compete freely; a job arriving unconverged ends that,
    their limits apply again, and the one limited above the others ends sooner than it would
    have. That is the limits' doing, not the move's: the move's gain counts the jobs there as
    losing nothing (not as gaining), so no gain passes its bound and the search moves what
    pricing every move moves."""
    endless = forecast(math.inf, 0.01, 1.0, 4.0)

    def worker(node: str) -> list[ModelJob]:
        return [ModelJob(id=f"{node}-heavy", weight=1.0, cap=4.0, converged=True,
                         forecast=forecast(50.0, 0.05, 1.0, 8.0), speed=1.0),
                *(ModelJob(id=f"{node}-{i}", weight=0.1, cap=2.0, converged=True,
                           forecast=endless, speed=1.0) for i in range(4))]

    fc2 = FlowCon2Policy.model_validate({
        "apiVersion": API_VERSION, "kind": "FlowCon2", "metadata": {"name": "fc2"},
        "spec": {"migration_cost_seconds": 30.0}})

    def unconverged(job: ModelJob, target: str, model: Mapping[str, Sequence[ModelJob]]
                    ) -> tuple[float, bool]:
        return 0.5, False

    capacity = {"a": 4.0, "b": 4.0}
    speeds = NodeSpeeds(by_node={"a": 1.0, "b": 1.0}, notes={})
    model = {"a": worker("a"), "b": worker("b")}
    totals = {n: total_seconds(js, capacity[n], 1.0) for n, js in model.items()}
    heavy = model["a"][0]
    move = move_gain(heavy, "a", "b", model=model, capacity=capacity, speeds=speeds,
                     arrive=unconverged, totals=totals,
                     leaving=side(heavy, model["a"], 4.0, 1.0, totals["a"]))
    assert move is not None
    # the drain of b with the job arrived: b's heavy job ends sooner than without it
    arrived = replace(heavy, weight=0.5, converged=False)
    ends = finish_seconds([j.draining(4.0) for j in [*model["b"], arrived]], 4.0, 1.0)
    assert sum(e for e in ends[:-1] if math.isfinite(e)) < totals["b"]
    assert move.harm == 0.0 and move.gain == move.freed + move.own
    args: dict[str, Any] = {"movable": {"a-heavy"}, "capacity": capacity, "speeds": speeds,
                            "arrive": unconverged}
    expected = every_move(fc2, {"a": worker("a"), "b": worker("b")}, **args)
    assert best_moves(fc2, {"a": worker("a"), "b": worker("b")}, **args) == expected


def test_of_alike_roomy_targets_the_first_priced_ends_the_walk(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A converged job on a crowded worker and forty alike workers that hold one small job each:
    it gains as much on each of them (to the millisecond; the drains round each differently),
    so the first in name order is chosen, and once it is priced no other alike worker is."""
    fc2 = FlowCon2Policy.model_validate({
        "apiVersion": API_VERSION, "kind": "FlowCon2", "metadata": {"name": "fc2"},
        "spec": {"migration_cost_seconds": 5.0,
                 "safety": {"max_migrations_per_cycle": 1}}})
    small = forecast(40.0, 0.01, 0.3, 1.0)
    model = {"crowded": [ModelJob(id=f"c{i}", weight=1.0 if i else 0.1, cap=4.0,
                                  converged=i == 0, forecast=forecast(900.0, 0.01, 1.0, 4.0),
                                  speed=1.0) for i in range(6)],
             **{f"w{n:02}": [ModelJob(id=f"s{n}", weight=1.0, cap=1.0, converged=False,
                                      forecast=small, speed=1.0)] for n in range(40)}}
    capacity = {node: 8.0 for node in model} | {"crowded": 4.0}
    speeds = NodeSpeeds(by_node={node: 1.0 for node in model}, notes={})
    priced: list[str] = []

    def counted(job: ModelJob, source: str, target: str, **kw: Any) -> Move | None:
        priced.append(target)
        return move_gain(job, source, target, **kw)

    monkeypatch.setattr(placement, "move_gain", counted)
    moves = best_moves(fc2, model, movable={"c0"}, capacity=capacity, speeds=speeds,
                       arrive=growth_arrival(fc2.spec.beta))
    assert [(m.job.id, m.source, m.target) for m in moves] == [("c0", "crowded", "w00")]
    assert priced == ["w00"]
