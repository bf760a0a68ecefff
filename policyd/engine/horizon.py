"""When a fitted loss curve meets a condition: turning converged under a policy, or reaching a
target loss; for every container at once.

Theory of operation. Both questions ask for the first step x >= x_now at which a condition on
the fitted (reported) curve M holds:

* converged: FlowCon's growth efficiency over one interval (flowcon.py, thesis eq. 4.1-4.2 up
  to a constant), G(x) = |M(x - S) - M(x)| / max(|M(x - S)|, eps) / R < alpha, with S the steps
  the job makes in one interval at its allocation and R the cores it uses there (absolute
  normalization drops the division by |M|);
* target: M(x) <= the target loss.

`first_step_where` scans a geometric grid of steps ahead of x_now up to a horizon, takes the
first grid point that meets the condition, and bisects between it and the grid point before,
for the containers where it does not hold at x_now already (the condition is taken not to flip
back within that bracket: both conditions are monotone on a decreasing convex curve once the
running mean's first window is past). NaN when the condition never holds within the horizon.

Must not: fit anything, read a snapshot, or loop over containers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np
import numpy.typing as npt

from policyd.engine.curve import CurveFit
from policyd.model.snapshot import FloatArray

BoolArray = npt.NDArray[np.bool_]
Rows = npt.NDArray[np.int64]

SEARCH_POINTS = 16
"""Grid points of the scan: 0, then geometric from 1e-4 of the horizon to all of it."""
BISECTIONS = 16
"""Halvings of the bracket the scan found (a bracket of ~1.9x shrinks to ~1.5e-5 of itself)."""
EPSILON = 1e-12  # series.EPSILON: the floor of |E| in relative gains


def first_step_where(
    condition: Callable[[FloatArray, Rows], BoolArray], x_now: FloatArray, horizon: FloatArray
) -> FloatArray:
    """Per container the smallest x in [x_now, x_now + horizon] where `condition` holds, to a
    fraction of a step; NaN where it never does. `condition(xs, rows)` is evaluated on (R, K)
    arrays of steps, row r for container rows[r]."""
    offsets = np.concatenate(([0.0], np.geomspace(1e-4, 1.0, SEARCH_POINTS - 1)))
    grid = x_now[:, None] + horizon[:, None] * offsets[None, :]
    every = np.arange(x_now.size)
    # At x_now first: where the condition holds there already (the common case, a job that has
    # turned converged) the rest of its grid is not evaluated; it could not change `first`.
    met = np.zeros(grid.shape, dtype=np.bool_)
    met[:, 0] = condition(grid[:, :1], every)[:, 0]
    open_ = np.flatnonzero(~met[:, 0])
    if open_.size:
        met[open_, 1:] = condition(grid[open_, 1:], open_)
    found = met.any(axis=1)
    first = np.argmax(met, axis=1)
    hi = grid[every, first]
    # Bisect only the brackets that are open: where the condition holds at x_now already (the
    # common case, a job that has turned converged) or nowhere, there is nothing to bisect.
    bracket = np.flatnonzero(found & (first > 0))
    lo = grid[bracket, first[bracket] - 1]
    top = hi[bracket]
    for _ in range(BISECTIONS):
        mid = 0.5 * (lo + top)
        ok = condition(mid[:, None], bracket)[:, 0]
        top, lo = np.where(ok, mid, top), np.where(ok, lo, mid)
    hi[bracket] = top
    return np.where(found, np.where(first == 0, x_now, hi), np.nan)


def convergence_step(
    curve: CurveFit,
    *,
    x_now: FloatArray,
    steps_per_interval: FloatArray,
    cores: FloatArray,
    alpha: float,
    normalization: Literal["relative", "absolute"],
    horizon: FloatArray,
) -> FloatArray:
    """The first step at which G falls below alpha (module docstring); NaN if not within the
    horizon. `cores` is R, already floored by the caller."""

    def converged(xs: FloatArray, rows: Rows) -> BoolArray:
        before = curve.reported(np.maximum(xs - steps_per_interval[rows, None], 0.0), rows)
        change = np.abs(before - curve.reported(xs, rows))
        if normalization == "relative":
            change = change / np.maximum(np.abs(before), EPSILON)
        return np.asarray(change / cores[rows, None] < alpha, dtype=np.bool_)

    return first_step_where(converged, x_now, horizon)


def target_step(
    curve: CurveFit, *, x_now: FloatArray, target: FloatArray, horizon: FloatArray
) -> FloatArray:
    """The first step at which the reported curve is at or below `target`; NaN if not within
    the horizon (e.g. a target below the curve's floor c)."""
    return first_step_where(
        lambda xs, rows: np.asarray(curve.reported(xs, rows) <= target[rows, None],
                                    dtype=np.bool_),
        x_now, horizon)
