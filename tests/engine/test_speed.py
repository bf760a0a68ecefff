"""The speed model: Amdahl's law fitted to (cores used, step rate) pairs, with a prior on p."""

from __future__ import annotations

import numpy as np
import pytest

from policyd.engine.speed import MIN_MEASURED_CORES, PRIOR_PARALLEL_FRACTION, fit_speed


def amdahl_seconds(cores: np.ndarray, *, t1: float, p: float) -> np.ndarray:
    return np.where(cores >= 1, t1 * ((1 - p) + p / cores), t1 / cores)


def fitted(cores: list[float], *, t1: float = 0.01, p: float = 0.6, allocation: float = 2.0,
           max_cores: float = 2.0, seconds: float = 10.0):
    """One container whose intervals ran on `cores`, each `seconds` long, at Amdahl speed."""
    c = np.asarray(cores, dtype=np.float64)
    steps = seconds / amdahl_seconds(c, t1=t1, p=p)
    return fit_speed(steps_made=steps[None, :], seconds=np.full((1, c.size), seconds),
                     cores=c[None, :], allocation_cores=np.array([allocation]),
                     max_cores=np.array([max_cores]))


@pytest.mark.parametrize(("cores", "p"), [
    pytest.param([1.0, 2.0, 1.0, 2.0], 0.6, id="1-and-2-cores-p0.6"),
    pytest.param([1.0, 1.5, 2.0, 3.0, 4.0], 0.3, id="1-to-4-cores-p0.3"),
    pytest.param([1.0, 2.0, 4.0], 0.9, id="1-2-4-cores-p0.9"),
])
def test_several_allocations_recover_amdahl(cores: list[float], p: float) -> None:
    model = fitted(cores, p=p, allocation=cores[-1], max_cores=4.0)
    # The prior pulls p towards 0.5 a little; the data outweighs it.
    assert model.parallel_fraction[0] == pytest.approx(p, abs=0.05)
    for c in (1.0, 2.0, 3.0):
        truth = amdahl_seconds(np.array([c]), t1=0.01, p=p)[0]
        assert model.seconds_per_step(np.array([c]))[0] == pytest.approx(truth, rel=0.05)


def test_one_allocation_takes_the_prior_and_matches_the_observed_speed() -> None:
    model = fitted([2.0] * 6, p=0.7)
    assert model.parallel_fraction[0] == pytest.approx(PRIOR_PARALLEL_FRACTION)
    observed = amdahl_seconds(np.array([2.0]), t1=0.01, p=0.7)[0]
    assert model.seconds_per_step(np.array([2.0]))[0] == pytest.approx(observed)
    # At 1 core the prior predicts s(2) / (0.5 + 0.5 / 2) = s(2) * 4 / 3.
    assert model.seconds_per_step(np.array([1.0]))[0] == pytest.approx(observed * 4 / 3)


def test_below_one_core_is_time_slicing() -> None:
    model = fitted([0.25, 0.5, 0.5], p=0.6, allocation=0.5)
    assert model.seconds_per_step(np.array([0.5]))[0] == pytest.approx(0.01 / 0.5, rel=1e-6)
    assert model.seconds_per_step(np.array([1.0]))[0] == pytest.approx(0.01, rel=1e-6)


def test_a_job_using_less_than_its_allocation_gets_no_faster_with_more() -> None:
    model = fitted([1.0] * 5, allocation=4.0, max_cores=8.0)
    assert model.cap_cores[0] == pytest.approx(1.0)
    one, four = model.seconds_per_step(np.array([[1.0, 4.0]]))[0]
    assert one == four


def test_no_steps_no_model() -> None:
    model = fit_speed(steps_made=np.zeros((1, 3)), seconds=np.full((1, 3), 10.0),
                      cores=np.ones((1, 3)), allocation_cores=np.ones(1), max_cores=np.ones(1))
    assert not model.usable[0]
    assert np.isnan(model.seconds_per_step(np.ones(1))[0])


def test_intervals_without_a_cpu_figure_are_left_out() -> None:
    steps = np.array([[1000.0, 1000.0, 1000.0]])
    model = fit_speed(steps_made=steps, seconds=np.array([[10.0, 10.0, 50.0]]),
                      cores=np.array([[1.0, 1.0, np.nan]]), allocation_cores=np.ones(1),
                      max_cores=np.ones(1))
    assert model.seconds_per_step(np.ones(1))[0] == pytest.approx(0.01)


@pytest.mark.parametrize("tiny", [1e-9, 1e-6, MIN_MEASURED_CORES / 2])
def test_an_interval_on_next_to_no_cpu_is_left_out(tiny: float) -> None:
    # Seen after an engine restart: a step made while the CPU rate read ~1e-9 cores (a rate
    # across the restart). Kept, it put terms of 1e18 into the normal equations and the
    # model's seconds per step came out NaN; a tick then failed on the decision's forecast.
    steps = np.array([[1000.0, 1000.0, 1.0]])
    model = fit_speed(steps_made=steps, seconds=np.array([[10.0, 10.0, 5.0]]),
                      cores=np.array([[1.0, 1.0, tiny]]), allocation_cores=np.ones(1),
                      max_cores=np.full(1, 2.0))
    assert model.seconds_per_step(np.ones(1))[0] == pytest.approx(0.01)


def test_zero_cores_means_no_progress() -> None:
    model = fitted([1.0, 2.0])
    assert model.seconds_per_step(np.array([0.0]))[0] == np.inf
    assert model.steps_per_second(np.array([0.0]))[0] == 0.0
