"""The loss curve: a shifted power law seen through the exporter's running mean, fitted to every
container at once.

Theory of operation. A job's loss after x optimizer steps follows

    L(x) = c + a * (1 + x / tau) ** -gamma          (a > 0, c >= 0, tau > 0, gamma > 0)

fast early gains, then a power-law tail that flattens towards the floor c. Jobs do not report
L itself but the mean of their last `window` step losses (the exporter's `smoothing_steps`,
100 by default), so the model compared with a sample at x is that mean,

    M(x) = (F(x + 1/2) - F(x - w + 1/2)) / w,   w = min(window, x),   F' = L,

with F(u) = c u + a tau ((1 + u / tau) ** (1 - gamma) - 1) / (1 - gamma) (a tau log(1 + u / tau)
at gamma = 1), and M(0) = L(0). Without it the first `window` steps, where the reported mean lags
the loss by up to half the window, would bend the whole fit.

Why this family (measured: `benchmarks/forecast_family.py`, on the simulator's six recorded
curves only, cut at 10-75 % of their run): extrapolating the rest of the run from the part seen,
the median RMS log error was 0.019 for this family, 0.020 for the simulator's own family (an
extra shoulder exponent k that only shapes the first ~30 steps), 0.032 for Optimus's
c + a / (1 + x / tau), 0.096 for a power law without a floor and 0.105 for an exponential
c + a exp(-x / tau).

Fit: for fixed (tau, gamma) the model is linear in (a, c), so a weighted least-squares solve of
2 x 2 normal equations gives them in closed form, for every container and every (tau, gamma) of
a grid at once (the idea of `policyd.sim.profiles._solve_grid`, batched over containers): a
coarse grid, then two finer grids around each container's best point. Weights are 1 / y^2 (the
noise of a loss scales with the loss) times the number of samples a point stands for; a fit with
c < 0 is replaced by the best fit with c = 0, and a <= 0 is rejected (a rising curve has no
forecast here). tau is searched relative to each container's steps so far, so one grid serves
jobs of any length.

Must not: read a snapshot, do I/O, or loop over containers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from policyd.model.snapshot import FloatArray

BoolArray = npt.NDArray[np.bool_]

TAU_RATIOS = np.geomspace(0.003, 3.0, 7)
"""tau / (the container's steps so far) on the coarse grid."""
GAMMA_START, GAMMA_STEP, GAMMA_COUNT = 0.25, 0.4, 7
"""The coarse grid's gamma: 0.25, 0.65, ... 2.65 (an arithmetic grid: see `_solve`)."""
REFINE_FACTORS = (1.8, 1.3)
"""Two finer 3 x 3 grids around the best point: tau times f ** (-1, 0, 1), gamma plus
(f - 1) * gamma * (-1, 0, 1)."""
GAMMA_LIMITS = (0.02, 20.0)


@dataclass(frozen=True, kw_only=True, eq=False)
class CurveFit:
    """Per container (arrays of shape (N,)) the fitted parameters, the weighted mean squared
    relative residual `cost`, and whether the fit exists (`ok`)."""

    a: FloatArray
    c: FloatArray
    tau: FloatArray
    gamma: FloatArray
    window: FloatArray
    cost: FloatArray
    ok: BoolArray

    def take(self, rows: npt.NDArray[np.int64]) -> CurveFit:
        """The fits of the containers at `rows`, in that order."""
        return CurveFit(a=self.a[rows], c=self.c[rows], tau=self.tau[rows],
                        gamma=self.gamma[rows], window=self.window[rows], cost=self.cost[rows],
                        ok=self.ok[rows])

    def reported(self, steps: npt.ArrayLike) -> FloatArray:
        """M(x): the reported (window-mean) loss at `steps`, shape (N,) or (N, K)."""
        x = np.asarray(steps, dtype=np.float64)
        extra = (slice(None),) + (None,) * (x.ndim - 1)
        basis = window_mean(x, self.tau[extra], self.gamma[extra], self.window[extra])
        return np.asarray(self.c[extra] + self.a[extra] * basis, dtype=np.float64)


def _antiderivative(u: FloatArray, tau: FloatArray, gamma: FloatArray) -> FloatArray:
    """F(u) of f(u) = (1 + u / tau) ** -gamma, with F(0) = 0 (gamma within 1e-4 of 1 is read
    as 1 -+ 1e-4: the quotient stays accurate to ~1e-10, with no 0 / 0)."""
    ell = np.log1p(np.maximum(u, 0.0) / tau)
    one_minus = 1.0 - gamma
    one_minus = np.where(np.abs(one_minus) < 1e-4, np.where(one_minus < 0, -1e-4, 1e-4),
                         one_minus)
    return np.asarray(tau * np.expm1(one_minus * ell) / one_minus, dtype=np.float64)


def window_mean(x: FloatArray, tau: FloatArray, gamma: FloatArray,
                window: FloatArray) -> FloatArray:
    """The mean of f over the `min(window, x)` steps ending at x (f(0) = 1 at x = 0)."""
    x = np.maximum(x, 0.0)
    w = np.maximum(np.minimum(window, x), 1.0)
    upper = _antiderivative(x + 0.5, tau, gamma)
    lower = _antiderivative(x - w + 0.5, tau, gamma)
    mean = (upper - lower) / w
    return np.asarray(np.where(x >= 0.5, mean, 1.0), dtype=np.float64)


def _solve(
    x: FloatArray, y: FloatArray, weight: FloatArray, window: FloatArray, *,
    taus: FloatArray, gamma_start: FloatArray, gamma_step: FloatArray, gamma_count: int,
) -> tuple[FloatArray, ...]:
    """The best (cost, a, c, tau, gamma) per container over a grid of taus (N, T) times an
    arithmetic grid of gammas (gamma_start + k gamma_step, k < gamma_count, each (N,)).

    x, y, weight are (N, B). The grid is walked in Python, each point a few passes of numpy
    over the (N, B) points: the window mean needs F at both ends of every window, and along
    the gamma axis (1 + u / tau) ** (1 - gamma) is a running product, so the only
    transcendental functions are one log1p and two exp per tau and point. A point at x = 0
    reads L(0) (f = 1): its share of the sums is the same for every grid point.
    """
    n = x.shape[0]
    at_start = x < 0.5
    span = np.maximum(np.minimum(window[:, None], x), 1.0)
    upper, lower = x + 0.5, np.maximum(x - span + 0.5, 0.0)
    s1 = weight.sum(axis=1)
    sy = (weight * y).sum(axis=1)
    syy = (weight * y * y).sum(axis=1)
    start_w = np.where(at_start, weight, 0.0)
    start_sf, start_sfy = start_w.sum(axis=1), (start_w * y).sum(axis=1)
    # f = (q_u - q_l) * coef / span with coef = tau / (1 - gamma) per container; the sums
    # below take the per-point factors from these precomputed weights.
    w_s = np.where(at_start, 0.0, weight / span)
    w_sy = w_s * y
    w_ss = w_s / span
    best = [np.full(n, np.inf), np.zeros(n), np.zeros(n), np.ones(n), np.ones(n)]
    for j in range(taus.shape[1]):
        tau = taus[:, j]
        ell_u, ell_l = np.log1p(upper / tau[:, None]), np.log1p(lower / tau[:, None])
        gamma = gamma_start.copy()
        one_minus = (1.0 - gamma)[:, None]
        q_u, q_l = np.exp(one_minus * ell_u), np.exp(one_minus * ell_l)
        step_u = np.exp(-gamma_step[:, None] * ell_u)
        step_l = np.exp(-gamma_step[:, None] * ell_l)
        for _ in range(gamma_count):
            # F(u) = tau ((1 + u / tau) ** (1 - gamma) - 1) / (1 - gamma): the window's
            # F(upper) - F(lower) is tau (q_u - q_l) / (1 - gamma), tau (log1p ...) at gamma = 1.
            denominator = 1.0 - gamma
            near_one = np.abs(denominator) < 1e-6
            coef = tau / np.where(near_one, 1.0, denominator)
            d = q_u - q_l
            if near_one.any():
                d = np.where(near_one[:, None], ell_u - ell_l, d)
            sf = coef * np.einsum("ij,ij->i", d, w_s) + start_sf
            sfy = coef * np.einsum("ij,ij->i", d, w_sy) + start_sfy
            sff = coef * coef * np.einsum("ij,ij,ij->i", d, d, w_ss) + start_sf
            cost, a, c = _least_squares(sf, sff, sfy, s1=s1, sy=sy, syy=syy)
            better = cost < best[0]
            for k, value in enumerate((cost, a, c, tau, gamma)):
                best[k] = np.where(better, value, best[k])
            q_u *= step_u
            q_l *= step_l
            gamma = gamma + gamma_step
    return tuple(best)


def _least_squares(sf: FloatArray, sff: FloatArray, sfy: FloatArray, *, s1: FloatArray,
                   sy: FloatArray, syy: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(cost, a, c) of y ~ c + a f by weighted least squares from the weighted sums of 1, f,
    f^2, y, f y and y^2, per row; c >= 0 and a > 0 (cost inf otherwise)."""
    det = s1 * sff - sf * sf
    with np.errstate(divide="ignore", invalid="ignore"):
        a = (s1 * sfy - sf * sy) / det
        c = (sff * sy - sf * sfy) / det
        a0 = sfy / sff  # the best fit with c = 0
    floor = c < 0
    a, c = np.where(floor, a0, a), np.where(floor, 0.0, c)
    # The weighted sum of squared residuals from the sums, without forming the residuals.
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        cost = (syy - 2 * a * sfy - 2 * c * sy + a * a * sff + 2 * a * c * sf + c * c * s1) / s1
    ok = (a > 0) & np.isfinite(a) & np.isfinite(cost)
    return np.where(ok, np.maximum(cost, 0.0), np.inf), a, c


def fit_curves(x: FloatArray, y: FloatArray, weight: FloatArray, window: FloatArray) -> CurveFit:
    """Fit N containers' points, arrays (N, B) with weight 0 where a point is absent (its x and
    y must still be finite); `window` (N,) the steps each job's reported loss averages."""
    n = x.shape[0]
    window = window.astype(np.float64)
    span = np.maximum(np.max(np.where(weight > 0, x, 0.0), axis=1, initial=0.0), 1.0)
    best = _solve(x, y, weight, window, taus=span[:, None] * TAU_RATIOS[None, :],
                  gamma_start=np.full(n, GAMMA_START), gamma_step=np.full(n, GAMMA_STEP),
                  gamma_count=GAMMA_COUNT)
    for factor in REFINE_FACTORS:
        _, _, _, tau, gamma = best
        step = (factor - 1.0) * gamma
        start = np.clip(gamma - step, GAMMA_LIMITS[0], GAMMA_LIMITS[1])
        taus = tau[:, None] * factor ** np.array([-1.0, 0.0, 1.0])[None, :]
        fine = _solve(x, y, weight, window, taus=taus, gamma_start=start, gamma_step=step,
                      gamma_count=3)
        better = fine[0] < best[0]
        best = tuple(np.where(better, f, b) for f, b in zip(fine, best, strict=True))
    cost, a, c, tau, gamma = best
    return CurveFit(a=a, c=c, tau=tau, gamma=gamma, window=window, cost=cost,
                    ok=np.isfinite(cost))
