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
curves only, cut at 10-75 % of their run, each family fitted by scipy's robust least squares
through the same running mean): extrapolating the rest of the run from the part seen, the
median RMS log error was 0.019 for this family, 0.020 for the simulator's own family (an extra
shoulder exponent k that only shapes the first ~30 steps), 0.032 for Optimus's
c + a / (1 + x / tau), 0.096 for a power law without a floor and 0.105 for an exponential
c + a exp(-x / tau). On the harder question, when the job turns converged, every family erred
by a median 32-96 % (Optimus's least, this one 71 %): the recorded curves keep a slow second
phase that no single-scale family sees coming; benchmarks/README.md has the figures.

Fit: for fixed (tau, gamma) the model is linear in (a, c), so a weighted least-squares solve of
2 x 2 normal equations gives them in closed form, for every container and every (tau, gamma) of
a grid at once (the idea of `policyd.sim.profiles._solve_grid`, batched over containers): a
coarse grid, then a few rounds of a quadratic model around each container's best point (see
REFINE_STEPS). Weights are 1 / y^2 (the noise of a loss scales with the loss); a fit with
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

TAU_RATIOS = np.geomspace(0.002, 4.0, 7)
"""tau / (the container's steps so far) on the coarse grid."""
GAMMA_START, GAMMA_STEP, GAMMA_COUNT = 0.15, 0.33, 9
"""The coarse grid's gamma: 0.15, 0.48, ... 2.79 (an arithmetic grid: see `_grid`)."""
REFINE_STEPS = 10
STENCIL_START = 2.0
TRUST = 4.0
"""After the coarse grid, REFINE_STEPS rounds of a quadratic model: the costs on a 3 x 3
stencil around each container's best point (tau times f ** (-1, 0, 1), gamma plus
(f - 1) * gamma * (-1, 0, 1), f = STENCIL_START at first) give a quadratic whose minimum, at
most TRUST stencil widths away, is tried too; the best point seen is kept, and f shrinks (to
f ** 0.75 after a gain, sqrt(f) without one). The quadratic follows the curved valley in which
tau and gamma trade off, where a fixed grid or a compass search creeps."""
GAMMA_LIMITS = (0.02, 20.0)
_FLOOR32 = np.float32(-80.0)
TAU_LIMITS = (1e-4, 1e3)
"""tau stays within these multiples of the container's steps so far, gamma within GAMMA_LIMITS:
beyond them the family is already as steep or as straight as the data can tell, and the
powers (1 + x / tau) ** (1 - gamma) would underflow into slow subnormal arithmetic."""


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


def _grid(
    x: FloatArray, y: FloatArray, weight: FloatArray, window: FloatArray, *,
    taus: FloatArray, gamma_start: FloatArray, gamma_step: FloatArray, gamma_count: int,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(cost, a, c), each (N, T, K), at every point of a grid of taus (N, T) times an arithmetic
    grid of gammas (gamma_start + k gamma_step, k < K = gamma_count, each (N,)).

    x, y, weight are (N, B). The grid is walked in Python, each point a few passes of numpy
    over the (N, B) points: the window mean needs F at both ends of every window; along the
    gamma axis (1 + lower / tau) ** (1 - gamma) is a running product, so each tau costs two
    log1p and two exp per point, each gamma one expm1. A point at x = 0 reads L(0) (f = 1):
    its share of the sums is the same for every grid point.
    """
    n, t = x.shape[0], taus.shape[1]
    at_start = x < 0.5
    span = np.maximum(np.minimum(window[:, None], x), 1.0)
    lower = np.maximum(x - span + 0.5, 0.0)
    span32 = span.astype(np.float32)
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
    out = np.empty((3, t, gamma_count, n))  # contiguous per grid point
    lower32 = lower.astype(np.float32)
    for j in range(t):
        tau = taus[:, j]
        tau32 = tau.astype(np.float32)[:, None]
        # f = (F(x + 1/2) - F(lower)) / span = tau q_l (r - 1) / ((1 - gamma) span) with
        # q_l = (1 + lower / tau) ** (1 - gamma) and r = exp((1 - gamma) ell_d),
        # ell_d = log1p(span / (tau + lower)), taken directly (no cancellation for short
        # windows). Logs and q_l in float32 (4-5x faster), r in float64 so that r - 1 keeps
        # its digits; along the gamma axis both are running products.
        ell_l = np.log1p(lower32 / tau32)
        ell_d = np.log1p(span32 / (tau32 + lower32)).astype(np.float64)
        gamma = gamma_start.copy()
        # log q_l runs along gamma and is floored at -80: below ~1e-38 float32 turns
        # subnormal (tens of times slower), and values that small add nothing to the sums.
        log_q = (1.0 - gamma).astype(np.float32)[:, None] * ell_l
        log_step = -gamma_step.astype(np.float32)[:, None] * ell_l
        r = np.exp((1.0 - gamma)[:, None] * ell_d)
        step_r = np.exp(-gamma_step[:, None] * ell_d)
        for k in range(gamma_count):
            denominator = 1.0 - gamma
            near_one = np.abs(denominator) < 1e-6
            coef = tau / np.where(near_one, 1.0, denominator)
            d = np.exp(np.maximum(log_q, _FLOOR32)).astype(np.float64) * (r - 1.0)
            if near_one.any():  # the limit tau ell_d (q_l = 1, r = 1 at gamma = 1)
                d = np.where(near_one[:, None], ell_d, d)
            sf = coef * np.einsum("ij,ij->i", d, w_s) + start_sf
            sfy = coef * np.einsum("ij,ij->i", d, w_sy) + start_sfy
            sff = coef * coef * np.einsum("ij,ij,ij->i", d, d, w_ss) + start_sf
            out[:, j, k, :] = _least_squares(sf, sff, sfy, s1=s1, sy=sy, syy=syy)
            if k + 1 < gamma_count:
                log_q += log_step
                r *= step_r
                gamma = gamma + gamma_step
    cost, a, c = out.transpose(0, 3, 1, 2)
    return cost, a, c


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


_STENCIL = np.array([(u, v) for u in (-1.0, 0.0, 1.0) for v in (-1.0, 0.0, 1.0)])
_QUADRATIC = np.linalg.pinv(np.column_stack([
    np.ones(9), _STENCIL[:, 0], _STENCIL[:, 1], _STENCIL[:, 0] ** 2, _STENCIL[:, 1] ** 2,
    _STENCIL[:, 0] * _STENCIL[:, 1]]))
"""Least-squares coefficients of q(u, v) = c0 + c1 u + c2 v + c3 u^2 + c4 v^2 + c5 u v from
the costs at the 3 x 3 stencil (u, v in -1, 0, 1), row-major in u."""


def _newton_step(costs: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The minimum (u, v) of the quadratic through a 3 x 3 stencil of costs (N, 9), in stencil
    units, clipped to +-TRUST; (0, 0) where the quadratic has no minimum or a cost is inf."""
    finite: BoolArray = np.asarray(np.isfinite(costs).all(axis=1), dtype=np.bool_)
    c = np.where(finite[:, None], costs, 0.0) @ _QUADRATIC.T
    det = 4.0 * c[:, 3] * c[:, 4] - c[:, 5] ** 2
    convex = finite & (c[:, 3] > 0) & (det > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        u = -(2.0 * c[:, 4] * c[:, 1] - c[:, 5] * c[:, 2]) / det
        v = -(2.0 * c[:, 3] * c[:, 2] - c[:, 5] * c[:, 1]) / det
    u = np.clip(np.where(convex, u, 0.0), -TRUST, TRUST)
    v = np.clip(np.where(convex, v, 0.0), -TRUST, TRUST)
    return u, v


def fit_curves(x: FloatArray, y: FloatArray, weight: FloatArray, window: FloatArray) -> CurveFit:
    """Fit N containers' points, arrays (N, B) with weight 0 where a point is absent (its x and
    y must still be finite); `window` (N,) the steps each job's reported loss averages."""
    n = x.shape[0]
    rows = np.arange(n)
    window = window.astype(np.float64)
    if n == 0:
        empty = np.empty(0)
        return CurveFit(a=empty, c=empty, tau=empty, gamma=empty, window=window, cost=empty,
                        ok=np.empty(0, dtype=np.bool_))
    span = np.maximum(np.max(np.where(weight > 0, x, 0.0), axis=1, initial=0.0), 1.0)
    taus = span[:, None] * TAU_RATIOS[None, :]
    cost, a, c = _grid(x, y, weight, window, taus=taus, gamma_start=np.full(n, GAMMA_START),
                       gamma_step=np.full(n, GAMMA_STEP), gamma_count=GAMMA_COUNT)
    flat = cost.reshape(n, -1).argmin(axis=1)
    j, k = np.divmod(flat, GAMMA_COUNT)
    best_cost, best_a, best_c = cost[rows, j, k], a[rows, j, k], c[rows, j, k]
    tau, gamma = taus[rows, j], GAMMA_START + GAMMA_STEP * k
    factor = np.full(n, STENCIL_START)
    for _ in range(REFINE_STEPS):
        # The 3 x 3 stencil around the best point, and the Newton step of its quadratic.
        step = np.minimum((factor - 1.0) * gamma, gamma - GAMMA_LIMITS[0])
        stencil_taus = np.clip(tau[:, None] * factor[:, None] ** np.array([-1.0, 0.0, 1.0]),
                               (span * TAU_LIMITS[0])[:, None], (span * TAU_LIMITS[1])[:, None])
        cost, a, c = _grid(x, y, weight, window, taus=stencil_taus, gamma_start=gamma - step,
                           gamma_step=step, gamma_count=3)
        u, v = _newton_step(cost.reshape(n, 9))
        new_tau = np.clip(tau * factor ** u, span * TAU_LIMITS[0], span * TAU_LIMITS[1])
        new_gamma = np.clip(gamma + step * v, *GAMMA_LIMITS)
        jump = _grid(x, y, weight, window, taus=new_tau[:, None], gamma_start=new_gamma,
                     gamma_step=np.zeros(n), gamma_count=1)
        flat = cost.reshape(n, -1).argmin(axis=1)
        j, k = np.divmod(flat, 3)
        candidates = [
            (cost[rows, j, k], a[rows, j, k], c[rows, j, k], stencil_taus[rows, j],
             gamma - step + step * k),
            (jump[0][:, 0, 0], jump[1][:, 0, 0], jump[2][:, 0, 0], new_tau, new_gamma)]
        improved = np.zeros(n, dtype=np.bool_)
        for cand_cost, cand_a, cand_c, cand_tau, cand_gamma in candidates:
            better = cand_cost < best_cost
            improved |= better
            best_cost = np.where(better, cand_cost, best_cost)
            best_a = np.where(better, cand_a, best_a)
            best_c = np.where(better, cand_c, best_c)
            tau = np.where(better, cand_tau, tau)
            gamma = np.where(better, cand_gamma, gamma)
        factor = np.where(improved, factor ** 0.75, np.sqrt(factor))
    return CurveFit(a=best_a, c=best_c, tau=tau, gamma=gamma, window=window, cost=best_cost,
                    ok=np.isfinite(best_cost))
