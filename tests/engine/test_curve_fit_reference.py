"""The point-major loss-curve fit against the row-per-container fit it replaced
(`curve_fit_reference.py`): on varied histories (the family and curves outside it, noise,
windows, lengths, absent points) both find the same curves, up to the rounding of sums taken in
another order; given the same numbers in column-major memory, the reference gives the new fit's
results bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from policyd.engine import curve_fit
from policyd.engine.curve_fit import fit_curves
from tests.engine import curve_fit_reference as reference
from tests.engine.forecast_builders import family, reported

ROWS = 240


def varied(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """ROWS histories of 6-10 points (padded to 10 with weight 0), each from its own curve:
    the family with drawn parameters, or an exponential decay (outside the family), seen
    through a running mean of 1-200 steps, with 0-3 % multiplicative noise."""
    rng = np.random.default_rng(seed)
    x = np.zeros((ROWS, 10))
    y = np.ones((ROWS, 10))
    weight = np.zeros((ROWS, 10))
    window = rng.choice([1.0, 20.0, 100.0, 200.0], size=ROWS)
    for i in range(ROWS):
        count = int(rng.integers(6, 11))
        last = int(rng.integers(200, 20_000))
        steps = np.arange(last + 1, dtype=np.float64)
        if i % 4 == 3:
            dense = 0.1 + 2.0 * np.exp(-steps / (last * rng.uniform(0.1, 1.0)))
        else:
            dense = family(steps, a=rng.uniform(0.2, 40.0), c=rng.choice([0.0, 0.3, 2.0]),
                           tau=last * rng.uniform(0.005, 2.0), gamma=rng.uniform(0.2, 2.5))
        points = np.round(np.linspace(0, last, count) if i % 2 else
                          np.linspace(last * 0.2, last, count))
        values = reported(points, dense, int(window[i]))
        values = values * (1.0 + rng.uniform(0.0, 0.03) * rng.standard_normal(count))
        x[i, :count], y[i, :count] = points, values
        weight[i, :count] = 1.0 / values**2
    return x, y, weight, window


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_same_curves_as_the_row_per_container_fit(seed: int) -> None:
    x, y, weight, window = varied(seed)
    new = fit_curves(x, y, weight, window)
    old = reference.fit_curves(x, y, weight, window)
    assert np.array_equal(new.ok, old.ok)
    assert new.ok.mean() > 0.9
    # The fitted curve inside the data (its first point, the middle, its last) and up to twice
    # as far beyond it, and the cost. Not bit for bit: where the cost is flat along the valley
    # in which tau and gamma trade off, a Gauss-Newton step that changes it by ~1e-12 is kept by
    # one summation order and dropped by the other, and the two paths end apart (the reference
    # itself does so when its losses are multiplied by 1 + 1e-15). How far apart depends on the
    # CPU's summation kernels: measured on 200 seeds, up to 3.2e-5 in the curves and 4.7e-5 in
    # the cost; where the data are so flat that the amplitude runs off along the valley
    # (a > 1e6, 29 of 48,000 fits), up to 3.5e-4 and 5e-3.
    first = np.where(weight > 0, x, np.inf).min(axis=1, keepdims=True)
    last = x.max(axis=1, keepdims=True)
    points = np.hstack([first, (first + last) / 2, last, 1.5 * last, 2.0 * last])
    runaway = np.maximum(new.a, old.a) > 1e6
    for rows, rel_curve, rel_cost in ((np.flatnonzero(old.ok & ~runaway), 1e-4, 1e-4),
                                      (np.flatnonzero(old.ok & runaway), 2e-3, 2e-2)):
        assert new.reported(points)[rows] == pytest.approx(old.reported(points)[rows],
                                                           rel=rel_curve)
        assert new.cost[rows] == pytest.approx(old.cost[rows], rel=rel_cost, abs=1e-12)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bit_for_bit_the_reference_on_column_major_input(seed: int) -> None:
    # Given the same numbers in column-major memory, the reference sums each container's
    # points in the order the point-major fit does, and the two agree to the last bit: what
    # differs from the reference's row-major run is numpy's summation order, nothing else.
    x, y, weight, window = varied(seed)
    new = fit_curves(x, y, weight, window)
    old = reference.fit_curves(*(np.asfortranarray(v) for v in (x, y, weight)), window)
    for name in ("a", "c", "tau", "gamma", "cost", "ok"):
        assert np.array_equal(getattr(new, name), getattr(old, name), equal_nan=True), name


@pytest.mark.parametrize("rows", [1, 5, 40])
def test_all_gammas_at_once_is_one_gamma_at_a_time_bit_for_bit(
        rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # A node's few containers take the grid's gammas as one (K, B, N) block, many containers one
    # gamma at a time: the same operations in the same order, so the same bits.
    x, y, weight, window = (v[:rows] for v in varied(4))
    assert x.size * curve_fit.GAMMA_COUNT <= curve_fit._BLOCK_ELEMENTS
    together = fit_curves(x, y, weight, window)
    monkeypatch.setattr(curve_fit, "_BLOCK_ELEMENTS", 0)
    alone = fit_curves(x, y, weight, window)
    for name in ("a", "c", "tau", "gamma", "cost", "ok"):
        assert np.array_equal(getattr(together, name), getattr(alone, name), equal_nan=True), name
