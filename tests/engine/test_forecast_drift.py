"""The forecast's range and a job whose speed drifts: the level of its step time wandering over
its window widens the range, the more the longer the rest of the run; one interval's scatter
alone (a steady job) leaves it as it was; the point forecast never moves."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from policyd.engine.forecast import MIN_SPREAD, SPEED_Z, forecast
from policyd.engine.forecast_input import Histories, History
from policyd.engine.speed import DRIFT_BLOCKS, fit_speed
from tests.engine.forecast_builders import NOW, settings

STEPS_PER_INTERVAL = 20.0


def timed(step_seconds: list[float] | np.ndarray, *, total_steps: float = 20_000.0,
          cores: list[float] | np.ndarray | None = None) -> History:
    """A job making STEPS_PER_INTERVAL steps between samples, interval j at step_seconds[j]
    seconds a step (on cores[j] cores, 1 when None), its last sample at NOW."""
    per_step = np.asarray(step_seconds, dtype=np.float64)
    spans = per_step * STEPS_PER_INTERVAL
    times = NOW - np.concatenate((spans[::-1].cumsum()[::-1], [0.0]))
    steps = STEPS_PER_INTERVAL * np.arange(per_step.size + 1, dtype=np.float64)
    used = np.ones(per_step.size) if cores is None else np.asarray(cores, dtype=np.float64)
    return History(times_seconds=times, losses=1.0 + 1.0 / (1.0 + steps / 100.0), steps=steps,
                   cores=np.concatenate(([np.nan], used)), allocation_cores=float(used[-1]),
                   max_cores=2.0, total_steps=total_steps)


def run(*histories: History):
    return forecast(Histories.of(list(histories)), settings())


def todays_factor(result, i: int = 0) -> float:
    """The range's speed factor before drift was measured: 1 + 1.28 max(spread, 2 %)."""
    return 1.0 + SPEED_Z * max(float(result.speed.spread[i]), MIN_SPREAD)


RAMP = np.linspace(0.5, 0.75, 36)  # the step time rising steadily by half over the window
# The same 36 step times dealt out low, high, low, high...: the same scatter, no drift.
DEALT = np.ravel(np.column_stack((RAMP[:18], RAMP[18:][::-1])))


def test_a_drifting_job_gets_a_wider_range_than_the_same_intervals_without_drift() -> None:
    result = run(timed(RAMP), timed(DEALT))
    drifting, steady = result.at(0), result.at(1)
    assert drifting is not None and steady is not None
    # Same steps in the same seconds: the same point forecast and the same per-interval scatter.
    assert drifting.remaining_seconds == pytest.approx(steady.remaining_seconds)
    assert result.speed.spread[0] == pytest.approx(result.speed.spread[1])
    assert result.speed.drift[0] > 0 and result.speed.drift[1] == 0
    assert drifting.high_seconds > 1.2 * steady.high_seconds
    assert drifting.low_seconds < 0.9 * steady.low_seconds
    # The dealt-out job keeps today's range exactly.
    factor = todays_factor(result, 1)
    assert steady.high_seconds == pytest.approx(steady.remaining_seconds * factor, rel=1e-9)
    assert steady.low_seconds == pytest.approx(steady.remaining_seconds / factor, rel=1e-9)


def test_a_steady_job_keeps_todays_range() -> None:
    result = run(timed(np.full(36, 0.5)))
    f = result.at(0)
    assert f is not None and result.speed.drift[0] == 0
    assert f.high_seconds == pytest.approx(f.remaining_seconds * (1 + SPEED_Z * MIN_SPREAD))
    assert f.low_seconds == pytest.approx(f.remaining_seconds / (1 + SPEED_Z * MIN_SPREAD))


def test_the_drift_term_grows_with_the_rest_of_the_run() -> None:
    short = run(timed(RAMP, total_steps=1_440.0)).at(0)
    long = run(timed(RAMP, total_steps=20_000.0)).at(0)
    assert short is not None and long is not None
    assert long.high_seconds / long.remaining_seconds > short.high_seconds / short.remaining_seconds
    assert long.remaining_seconds / long.low_seconds > short.remaining_seconds / short.low_seconds


def test_the_range_is_symmetric_in_log_and_the_point_does_not_move() -> None:
    f = run(timed(RAMP)).at(0)
    assert f is not None
    assert f.remaining_seconds == pytest.approx(np.mean(RAMP) * (20_000.0 - 36 * 20.0))
    assert f.high_seconds / f.remaining_seconds == pytest.approx(
        f.remaining_seconds / f.low_seconds)


def test_a_change_of_allocation_is_not_drift() -> None:
    # Amdahl with p = 0.5 (the prior): 0.5 s a step on 1 core, 0.375 s on 2.
    cores = np.array([1.0] * 18 + [2.0] * 18)
    result = run(timed(np.where(cores > 1, 0.375, 0.5), cores=cores))
    assert result.at(0) is not None
    assert result.speed.drift[0] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("intervals", [1, 2, 3, DRIFT_BLOCKS - 1, DRIFT_BLOCKS])
def test_short_histories_are_safe(intervals: int) -> None:
    result = run(timed(np.linspace(0.5, 1.0, intervals)))
    f = result.at(0)
    assert f is not None and result.notes[0] == ""
    assert np.isfinite(result.speed.drift[0]) and result.speed.drift[0] >= 0
    assert 0 < f.low_seconds <= f.remaining_seconds <= f.high_seconds < np.inf


def test_a_single_block_shows_no_drift() -> None:
    result = run(timed([0.5, 1.0]))  # one interval a block at most: nothing to difference
    assert result.speed.drift[0] == 0


def test_intervals_without_a_cpu_figure_or_with_nan_are_left_out() -> None:
    cores = np.ones(36)
    cores[[3, 10, 20]] = np.nan
    result = run(timed(RAMP, cores=cores), timed(RAMP))
    assert result.at(0) is not None
    assert np.isfinite(result.speed.drift[0]) and result.speed.drift[0] > 0
    assert result.at(0).high_seconds > result.at(0).remaining_seconds


def test_fit_speed_drift_with_no_usable_interval_is_zero() -> None:
    nan = np.full((2, 4), np.nan)
    model = fit_speed(steps_made=nan, seconds=nan, cores=nan,
                      allocation_cores=np.ones(2), max_cores=np.full(2, 2.0))
    assert np.array_equal(model.drift, np.zeros(2))
    assert np.array_equal(model.window_seconds, np.zeros(2))


step_times = st.lists(st.floats(min_value=0.05, max_value=5.0), min_size=1, max_size=40)


@hypothesis_settings(max_examples=60, deadline=None)
@given(step_times)
def test_the_new_range_holds_todays_and_the_point(seconds: list[float]) -> None:
    result = run(timed(seconds))
    f = result.at(0)
    assert f is not None
    factor = todays_factor(result)
    assert np.isfinite(f.low_seconds) and np.isfinite(f.high_seconds)
    assert f.low_seconds <= f.remaining_seconds / factor * (1 + 1e-9)
    assert f.high_seconds >= f.remaining_seconds * factor * (1 - 1e-9)
    assert f.remaining_seconds == pytest.approx(
        sum(seconds) / len(seconds) * (20_000.0 - 20.0 * len(seconds)))


@hypothesis_settings(max_examples=30, deadline=None)
@given(st.lists(step_times, min_size=2, max_size=4))
def test_drift_is_per_container_and_deterministic(jobs: list[list[float]]) -> None:
    batch = run(*(timed(s) for s in jobs))
    again = run(*(timed(s) for s in jobs))
    assert np.array_equal(batch.speed.drift, again.speed.drift)
    assert np.array_equal(batch.high_seconds, again.high_seconds)
    for i, s in enumerate(jobs):
        alone = run(timed(s))
        assert alone.speed.drift[0] == pytest.approx(batch.speed.drift[i], rel=1e-9, abs=1e-15)
        assert alone.high_seconds[0] == pytest.approx(batch.high_seconds[i], rel=1e-9)
