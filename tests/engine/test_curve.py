"""The loss-curve fit: known parameters of the family come back, seen raw or through the
exporter's running mean; curves that do not decrease do not fit."""

from __future__ import annotations

import numpy as np
import pytest

from policyd.engine.curve import window_mean
from policyd.engine.curve_fit import fit_curves
from tests.engine.forecast_builders import family, reported

CASES = [
    pytest.param(dict(a=2.0, c=0.5, tau=60.0, gamma=0.8), 1, id="raw-loss"),
    pytest.param(dict(a=2.0, c=0.5, tau=60.0, gamma=0.8), 100, id="100-step-mean"),
    pytest.param(dict(a=40.0, c=20.0, tau=5.0, gamma=0.5), 100, id="vae-like"),
    pytest.param(dict(a=1.0, c=0.0, tau=300.0, gamma=1.5), 50, id="no-floor"),
]


def points(params: dict[str, float], window: int, *, last: int = 2000, count: int = 12):
    x = np.round(np.linspace(0, last, count))
    dense = family(np.arange(last + 1, dtype=np.float64), **params)
    y = reported(x, dense, window)
    return x[None, :], y[None, :], (1.0 / y**2)[None, :], np.array([float(window)])


@pytest.mark.parametrize(("params", "window"), CASES)
def test_the_family_is_recovered(params: dict[str, float], window: int) -> None:
    x, y, w, win = points(params, window)
    fit = fit_curves(x, y, w, win)
    assert fit.ok[0]
    # The curve itself, inside the data and half as far again beyond it, within 5 %: with no
    # noise at all, c and gamma still trade off a little (the no-floor case fits to 2e-7 and
    # is 4.5 % off at 1.5 x its data).
    ahead = np.array([[100.0, 1000.0, 2000.0, 3000.0]])
    dense = family(np.arange(3001, dtype=np.float64), **params)
    truth = reported(ahead[0], dense, window)
    assert fit.reported(ahead)[0] == pytest.approx(truth, rel=0.05)
    assert fit.gamma[0] == pytest.approx(params["gamma"], rel=0.25)


def test_window_mean_is_the_mean_of_the_steps() -> None:
    dense = (1.0 + np.arange(501.0) / 30.0) ** -0.7
    x = np.array([1.0, 10.0, 99.0, 100.0, 250.0, 500.0])
    exact = reported(x, dense, 100)
    approx = window_mean(x, np.full(6, 30.0), np.full(6, 0.7), np.full(6, 100.0))
    assert approx == pytest.approx(exact, rel=2e-3)
    assert window_mean(np.zeros(1), np.ones(1), np.ones(1), np.ones(1))[0] == 1.0


@pytest.mark.parametrize("gamma", [1.0, 1.0 + 1e-7, 1.0 - 5e-5])
def test_gamma_at_one_is_the_log_limit(gamma: float) -> None:
    x = np.array([10.0, 200.0])
    value = window_mean(x, np.full(2, 20.0), np.full(2, gamma), np.full(2, 5.0))
    dense = (1.0 + np.arange(201.0) / 20.0) ** -1.0
    assert value == pytest.approx(reported(x, dense, 5), rel=1e-3)


@pytest.mark.parametrize("y", [
    pytest.param(np.linspace(0.5, 1.5, 12), id="rising"),
    pytest.param(np.array([0.5, 0.6] * 6), id="zigzag-up"),
])
def test_a_rising_curve_does_not_fit(y: np.ndarray) -> None:
    x = np.linspace(0, 1000, 12)[None, :]
    fit = fit_curves(x, y[None, :], (1.0 / y**2)[None, :], np.array([1.0]))
    assert not fit.ok[0]


def test_rows_are_independent() -> None:
    a = points(dict(a=2.0, c=0.5, tau=60.0, gamma=0.8), 100)
    b = points(dict(a=1.0, c=0.1, tau=500.0, gamma=2.0), 1)
    both = fit_curves(*(np.concatenate((p, q)) for p, q in zip(a, b, strict=True)))
    alone = fit_curves(*b)
    # Equal up to rounding: numpy may sum a batch of rows in another order than one row.
    for name in ("a", "c", "tau", "gamma", "cost"):
        assert getattr(both, name)[1] == pytest.approx(getattr(alone, name)[0], rel=1e-6)
