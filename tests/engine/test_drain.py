"""Draining a worker: each job's predicted finish as the others end and give their cores back,
and FlowCon's free competition once only converged jobs are left."""

from __future__ import annotations

import math

import pytest

from policyd.engine.drain import DrainingJob, finish_seconds
from policyd.engine.forecast_output import Forecast


def forecast(steps: float, *, per_step_on_one_core: float = 1.0, cap: float = 1.0) -> Forecast:
    """A job with `steps` left, fully parallel up to `cap` cores."""
    return Forecast(
        steps_done=0.0, total_steps=steps, remaining_steps=steps,
        remaining_seconds=steps * per_step_on_one_core, finish_at=0.0, low_seconds=0.0,
        high_seconds=0.0, target_loss=None, target_eta_seconds=None, basis="total steps",
        steps_per_second=1.0 / per_step_on_one_core, parallel_fraction=1.0, serial_seconds=0.0,
        parallel_seconds=per_step_on_one_core, cap_cores=cap)


def draining(steps: float | None, *, weight: float = 1.0, converged: bool = False,
             cap: float = 1.0, measured_speed: float = 1.0,
             limit: float = math.inf) -> DrainingJob:
    return DrainingJob(weight=weight, cap_cores=cap, converged=converged,
                       forecast=forecast(steps, cap=cap) if steps is not None else None,
                       measured_speed=measured_speed, limit_cores=limit)


@pytest.mark.parametrize(("jobs", "capacity", "speed", "expected"), [
    ([draining(100)], 1.0, 1.0, [100.0]),
    ([draining(100)], 1.0, 2.0, [50.0]),  # twice as fast a worker
    ([draining(100, measured_speed=2.0)], 1.0, 1.0, [200.0]),  # measured on a faster one
    # two equal jobs on one core: both at half a core, both end at 200 s
    ([draining(100), draining(100)], 1.0, 1.0, [200.0, 200.0]),
    # the short one ends at 100 s (half a core each), then the long one runs alone:
    # 50 steps done by then, 250 left on a whole core
    ([draining(50), draining(300)], 1.0, 1.0, [100.0, 350.0]),
    # by weight 3 : 1 on one core, then the rest alone
    ([draining(75, weight=1.0), draining(100, weight=1 / 3)], 1.0, 1.0, [100.0, 175.0]),
    # enough cores for both: neither waits
    ([draining(100), draining(300)], 2.0, 1.0, [100.0, 300.0]),
    # a quota of a quarter core: the other takes the rest (at equal weights) and ends at
    # 133 s; the capped one, not converged, stays at its quota: 100 - 33.3 steps at 0.25/s
    ([draining(100, limit=0.25), draining(100)], 1.0, 1.0, [400.0, 400 / 3]),
    # converged, alone at the end: FlowCon's quota of the whole worker (free competition)
    ([draining(100, limit=0.25, converged=True), draining(100)], 1.0, 1.0, [200.0, 400 / 3]),
], ids=["alone", "fast worker", "measured on a fast worker", "equal", "short first",
        "weighted", "room for both", "hard quota", "hard quota, then alone and converged"])
def test_finish_seconds(jobs: list[DrainingJob], capacity: float, speed: float,
                        expected: list[float]) -> None:
    assert finish_seconds(jobs, capacity, speed) == pytest.approx(expected)


def test_a_converged_job_at_the_floor_runs_at_full_share_once_the_growing_jobs_end() -> None:
    # floor 1/4 beside a growing job: 0.2 of the core until the growing job ends at 125 s
    # (100 steps at 0.8), then the whole core: 25 steps done, 75 left, ends at 200 s
    ends = finish_seconds([draining(100, weight=0.25, converged=True), draining(100)], 1.0, 1.0)
    assert ends == pytest.approx([200.0, 125.0])


def test_converged_jobs_alone_compete_freely_whatever_their_limits() -> None:
    ends = finish_seconds([draining(100, weight=0.25, converged=True),
                           draining(100, weight=1.0, converged=True)], 1.0, 1.0)
    assert ends == pytest.approx([200.0, 200.0])


def test_a_job_without_a_forecast_never_ends_and_keeps_its_share() -> None:
    ends = finish_seconds([draining(None), draining(100)], 1.0, 1.0)
    assert math.isinf(ends[0])
    assert ends[1] == pytest.approx(200.0)


def test_impossible_jobs_are_refused() -> None:
    with pytest.raises(ValueError, match="must be > 0"):
        draining(100, weight=0.0)
