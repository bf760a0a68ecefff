"""How much of today's loss the rest of a run may still take off: the upper end of two readings.

Theory of operation. `on_converged` (`policyd.engine.delivery`) acts on this figure, and a
job stopped on a figure that is too low gives up loss for good. Two readings, for every
container at once:

1. The fitted curve's: (M(x_now) - M(end)) / M(x_now), M the fitted curve (`curve.py`) and
   `end` the total steps, or the step the job turns converged at.
2. Today's rate carried on: r ln(end / x_now) / M(x_now), with r the loss's observed fall per
   unit of log-steps, -dL / d(ln x), from a weighted least-squares line of the curve points
   (the same points and weights the curve is fitted to) against ln x. A loss that falls
   linearly in ln x is the flattest tail of the family (gamma -> 0); a tail flattens faster
   than that only if its rate per log-step keeps shrinking, which the points seen cannot
   promise.

Why both: the curve is fitted to the snapshot's history only (the policy's window, some
hundreds of steps late in a run), where tau and gamma are not identified; the fits take steep
tails (gamma 3-9) whose last percent of fall they place within the window. On the development
seeds (1-5 of the contended thesis scenarios, benchmarks/README.md, "Twenty-third session") the
fitted figure correlated 0.12 with the fall the job's curve really had left at the stops it
caused, today's rate carried on 0.57. The larger of the two is the figure: a job is converged
only when both readings agree that less than `converged_below` is left.

Must not: read a snapshot, do I/O, or loop over containers.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from policyd.engine.curve import CurveFit
from policyd.model.snapshot import FloatArray

BoolArray = npt.NDArray[np.bool_]


def rate_per_log_step(x: FloatArray, y: FloatArray, weight: FloatArray) -> FloatArray:
    """-dL / d(ln x) of the weighted least-squares line of `y` against ln `x`, per row of the
    (N, B) points (weight 0 where absent; points at x <= 0 left out); NaN where fewer than two
    distinct steps remain."""
    use = (weight > 0) & (x > 0)
    w = np.where(use, weight, 0.0)
    log_x = np.log(np.where(use, x, 1.0))
    total = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_x = (w * log_x).sum(axis=1) / total
        mean_y = (w * y).sum(axis=1) / total
        dx = log_x - mean_x[:, None]
        spread = (w * dx * dx).sum(axis=1)
        slope = (w * dx * (y - mean_y[:, None])).sum(axis=1) / spread
    return np.asarray(np.where(spread > 0, -slope, np.nan), dtype=np.float64)


def remaining_improvement(curve: CurveFit, rows: npt.NDArray[np.int64], *, fitted: BoolArray,
                          flat: BoolArray, x_now: FloatArray, end: FloatArray, x: FloatArray,
                          y: FloatArray, weight: FloatArray) -> FloatArray:
    """The larger of the fitted curve's figure and today's rate carried on (module docstring),
    at least 0: how much of today's loss the rest of the run (to `end`) may still take off; 0
    for a flat loss, NaN where there is no curve. `x`, `y`, `weight` (N, B): the curve points
    of every container; `rows` the containers `curve` was fitted to, in its order."""
    out = np.where(flat, 0.0, np.nan)
    if rows.size:
        now = curve.reported(x_now[rows])
        until = np.maximum(end[rows], x_now[rows])
        later = curve.reported(until)
        rate = np.maximum(rate_per_log_step(x[rows], y[rows], weight[rows]), 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            on_curve = np.maximum(now - later, 0.0) / np.abs(now)
            at_rate = rate * np.log(until / x_now[rows]) / np.abs(now)
        at_rate = np.where(np.isfinite(at_rate), at_rate, 0.0)
        value = np.maximum(on_curve, at_rate)
        out[rows] = np.where(fitted[rows] & np.isfinite(on_curve), value, np.nan)
    return out
