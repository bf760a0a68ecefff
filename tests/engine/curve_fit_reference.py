"""The loss-curve fit as it was before it was laid out point-major (commit d86b7ec's
`policyd.engine.curve_fit` with `Windows` and `basis` of `policyd.engine.curve`), kept unchanged
as the oracle the faster fit is compared with (`test_curve_fit_reference.py`): arrays (N, B),
one container a row, the coarse grid's sums by einsum along each row."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from policyd.engine.curve import CurveFit
from policyd.model.snapshot import FloatArray

BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, eq=False)
class Windows:
    """Each point's window (N, B): its two ends, its length, and whether it is x = 0."""

    upper: FloatArray
    lower: FloatArray
    inverse_span: FloatArray  # 0 at x = 0, so that f and its derivatives vanish there
    at_start: BoolArray

    @classmethod
    def of(cls, x: FloatArray, window: FloatArray) -> Windows:
        span = np.maximum(np.minimum(window[:, None], x), 1.0)
        at_start = x < 0.5
        return cls(upper=x + 0.5, lower=np.maximum(x - span + 0.5, 0.0),
                   inverse_span=np.where(at_start, 0.0, 1.0 / span), at_start=at_start)


def basis(w: Windows, log_tau: FloatArray,
           gamma: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """f = the window mean of (1 + u / tau) ** -gamma at each point (N, B), and its derivatives
    by log tau and by gamma (f = 1, derivatives 0 at x = 0).

    With m = 1 - gamma, p = 1 + u / tau, l = log p: F(u) = tau (p ** m - 1) / m, and
        tau dF/dtau = F - u p ** -gamma,
        dF/dgamma = -tau (m l p ** m - (p ** m - 1)) / m ** 2,
    by their series tau l (1 + m l / 2) and -tau l^2 (1/2 + m l / 3) where |m| < 1e-3."""
    tau = np.exp(log_tau)[:, None]
    m = (1.0 - gamma)[:, None]
    small = np.abs(m) < 1e-3
    safe_m = np.where(small, 1.0, m)
    ends = []
    for u in (w.upper, w.lower):
        ell = np.log1p(u / tau)
        power = np.exp(m * ell)  # p ** m
        big_f = tau * (power - 1.0) / safe_m
        d_gamma = -tau * (safe_m * ell * power - (power - 1.0)) / (safe_m * safe_m)
        if small.any():
            big_f = np.where(small, tau * ell * (1.0 + 0.5 * m * ell), big_f)
            d_gamma = np.where(small, -tau * ell * ell * (0.5 + m * ell / 3.0), d_gamma)
        d_tau = big_f - u * power / (1.0 + u / tau)
        ends.append((big_f, d_tau, d_gamma))
    (fu, tu, gu), (fl, tl, gl) = ends
    f = (fu - fl) * w.inverse_span
    return np.where(w.at_start, 1.0, f), (tu - tl) * w.inverse_span, (gu - gl) * w.inverse_span


TAU_RATIOS = np.geomspace(0.002, 4.0, 7)
"""tau / (the container's steps so far) on the coarse grid."""
GAMMA_START, GAMMA_STEP, GAMMA_COUNT = 0.15, 0.33, 9
"""The coarse grid's gamma: 0.15, 0.48, ... 2.79 (an arithmetic grid: see `_grid`)."""
REFINE_STEPS = 6
"""Damped Gauss-Newton iterations after the coarse grid (`_variable_projection`): they follow
the curved valley in which tau and gamma trade off, where a finer grid or a compass search
creeps."""
GAMMA_LIMITS = (0.02, 20.0)
TAU_LIMITS = (1e-4, 1e3)
"""tau stays within these multiples of the container's steps so far, gamma within GAMMA_LIMITS:
beyond them the family is already as steep or as straight as the data can tell, and the
powers (1 + x / tau) ** (1 - gamma) would underflow into slow subnormal arithmetic."""


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
        # windows). The logs in float32 (4-5x faster; their ~1e-7 relative error is far below
        # any noise a cost resolves), the rest in float64; along the gamma axis q_l and r are
        # running products, so a grid point costs no transcendental function at all. The grid's
        # bounds (tau >= 0.002 x the steps so far, gamma <= 2.8) keep q_l above ~1e-5.
        ell_l = np.log1p(lower32 / tau32).astype(np.float64)
        ell_d = np.log1p(span32 / (tau32 + lower32)).astype(np.float64)
        gamma = gamma_start.copy()
        q_l = np.exp((1.0 - gamma)[:, None] * ell_l)
        step_l = np.exp(-gamma_step[:, None] * ell_l)
        r = np.exp((1.0 - gamma)[:, None] * ell_d)
        step_r = np.exp(-gamma_step[:, None] * ell_d)
        for k in range(gamma_count):
            denominator = 1.0 - gamma
            near_one = np.abs(denominator) < 1e-6
            coef = tau / np.where(near_one, 1.0, denominator)
            d = q_l * (r - 1.0)
            if near_one.any():  # the limit tau ell_d (q_l = 1, r = 1 at gamma = 1)
                d = np.where(near_one[:, None], ell_d, d)
            sf = coef * np.einsum("ij,ij->i", d, w_s) + start_sf
            sfy = coef * np.einsum("ij,ij->i", d, w_sy) + start_sfy
            sff = coef * coef * np.einsum("ij,ij,ij->i", d, d, w_ss) + start_sf
            out[:, j, k, :] = _least_squares(sf, sff, sfy, s1=s1, sy=sy, syy=syy)
            if k + 1 < gamma_count:
                q_l *= step_l
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


def _linear(f: FloatArray, y: FloatArray, weight: FloatArray, *,
            s1: FloatArray, sy: FloatArray, syy: FloatArray,
            ) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(cost, a, c) of the best c + a f for each row (`_least_squares` on the sums)."""
    wf = weight * f
    return _least_squares(wf.sum(axis=1), (wf * f).sum(axis=1), (wf * y).sum(axis=1),
                          s1=s1, sy=sy, syy=syy)


def _project(v: FloatArray, f: FloatArray, weight: FloatArray, s1: FloatArray) -> FloatArray:
    """v projected off the span of 1 and f (weighted least squares): v - alpha - beta f."""
    wf = weight * f
    sf, sff = wf.sum(axis=1), (wf * f).sum(axis=1)
    sv, sfv = (weight * v).sum(axis=1), (wf * v).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        beta = (s1 * sfv - sf * sv) / (s1 * sff - sf * sf)
        alpha = (sv - beta * sf) / s1
    return np.asarray(v - alpha[:, None] - beta[:, None] * f, dtype=np.float64)


def _variable_projection(
    x: FloatArray, y: FloatArray, weight: FloatArray, window: FloatArray, *,
    start: tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray],
    log_tau_limits: tuple[FloatArray, FloatArray],
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """Refine (cost, a, c, tau, gamma) from `start`: damped Gauss-Newton on (log tau, gamma)
    alone, with (a, c) solved exactly at every point (variable projection, Kaufman's Jacobian:
    the derivative of a f projected off the span of 1 and f). Eliminating (a, c) leaves a
    2 x 2 system per container in closed form. A step is kept where it lowers the cost (the
    damping then shrinks) and dropped where it does not (the damping grows)."""
    cost, a, c, tau, gamma = start
    log_tau = np.log(tau)
    s1 = weight.sum(axis=1)
    sy, syy = (weight * y).sum(axis=1), (weight * y * y).sum(axis=1)
    damping = np.full(x.shape[0], 1e-3)
    windows = Windows.of(x, window)
    f, df_tau, df_gamma = basis(windows, log_tau, gamma)
    for _ in range(REFINE_STEPS):
        j_tau = _project(a[:, None] * df_tau, f, weight, s1)
        j_gamma = _project(a[:, None] * df_gamma, f, weight, s1)
        residual = y - c[:, None] - a[:, None] * f
        h11 = (weight * j_tau * j_tau).sum(axis=1)
        h22 = (weight * j_gamma * j_gamma).sum(axis=1)
        h12 = (weight * j_tau * j_gamma).sum(axis=1)
        g1, g2 = (weight * j_tau * residual).sum(axis=1), (weight * j_gamma * residual).sum(axis=1)
        l11, l22 = h11 * (1.0 + damping), h22 * (1.0 + damping)
        with np.errstate(divide="ignore", invalid="ignore"):
            d = l11 * l22 - h12 * h12
            step_tau = np.where(d > 0, (l22 * g1 - h12 * g2) / d, 0.0)
            step_gamma = np.where(d > 0, (l11 * g2 - h12 * g1) / d, 0.0)
        new_log_tau = np.clip(log_tau + np.nan_to_num(step_tau), *log_tau_limits)
        new_gamma = np.clip(gamma + np.nan_to_num(step_gamma), *GAMMA_LIMITS)
        nf, ndt, ndg = basis(windows, new_log_tau, new_gamma)
        new_cost, new_a, new_c = _linear(nf, y, weight, s1=s1, sy=sy, syy=syy)
        better = new_cost < cost
        cost = np.where(better, new_cost, cost)
        a, c = np.where(better, new_a, a), np.where(better, new_c, c)
        log_tau, gamma = np.where(better, new_log_tau, log_tau), np.where(better, new_gamma, gamma)
        keep = better[:, None]
        f, df_tau, df_gamma = (np.where(keep, nf, f), np.where(keep, ndt, df_tau),
                               np.where(keep, ndg, df_gamma))
        damping = np.where(better, damping / 3.0, damping * 4.0)
    return cost, a, c, np.exp(log_tau), gamma


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
    best_cost, best_a, best_c, tau, gamma = _variable_projection(
        x, y, weight, window, start=(best_cost, best_a, best_c, tau, gamma),
        log_tau_limits=(np.log(span * TAU_LIMITS[0]), np.log(span * TAU_LIMITS[1])))
    return CurveFit(a=best_a, c=best_c, tau=tau, gamma=gamma, window=window, cost=best_cost,
                    ok=np.isfinite(best_cost))
