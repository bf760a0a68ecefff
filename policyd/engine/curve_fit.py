"""Fitting the loss curve's family (`curve.py`) to every container at once.

For fixed (tau, gamma) the model is linear in (a, c), so a weighted least-squares solve of
2 x 2 normal equations gives them in closed form, for every container and every (tau, gamma) of
a grid at once (the idea of `policyd.sim.profiles._solve_grid`, batched over containers): a
coarse grid, then damped Gauss-Newton from each container's best point (REFINE_STEPS).
Weights are 1 / y^2 (the noise of a loss scales with the loss); a fit with
c < 0 is replaced by the best fit with c = 0, and a <= 0 is rejected (a rising curve has no
forecast here). tau is searched relative to each container's steps so far, so one grid serves
jobs of any length.

Layout: `fit_curves` takes (N, B) arrays, one container a row, and works on their transpose
(B, N), point-major: a container's sums then run down axis 0, which numpy does for a whole row
of containers at once (about twice as fast as along 10-point rows). It changes only the order in
which a container's points are summed: given the same numbers in column-major memory, the
row-per-container fit it replaced gives the same results bit for bit
(`tests/engine/test_curve_fit_reference.py`).

Must not: read a snapshot, do I/O, or loop over containers.
"""

from __future__ import annotations

import numpy as np

from policyd.engine.curve import CurveFit, Windows, basis
from policyd.model.snapshot import FloatArray

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
_BLOCK_ELEMENTS = 40_000
"""`_grid` takes all gammas at once while its (gamma, point, container) arrays hold at most this
many elements (a few containers: a node's, a small cluster's), one gamma at a time beyond (large
arrays then stay in the processor's cache, and numpy's two-operand sums are faster)."""


def _grid(
    x: FloatArray, y: FloatArray, weight: FloatArray, window: FloatArray, *,
    taus: FloatArray, gamma_start: FloatArray, gamma_step: FloatArray, gamma_count: int,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(cost, a, c), each (N, T, K), at every point of a grid of taus (N, T) times an arithmetic
    grid of gammas (gamma_start + k gamma_step, k < K = gamma_count, each (N,)).

    x, y, weight are (B, N), point-major (`fit_curves`). The grid is walked in Python, each
    point a few passes of numpy over the (B, N) points: the window mean needs F at both ends of
    every window; along the gamma axis (1 + lower / tau) ** (1 - gamma) is a running product,
    so each tau costs two log1p and four exp per point, each gamma none. A point at x = 0 reads
    L(0) (f = 1): its share of the sums is the same for every grid point.
    """
    n, t = x.shape[1], taus.shape[1]
    at_start = x < 0.5
    span = np.maximum(np.minimum(window, x), 1.0)
    lower = np.maximum(x - span + 0.5, 0.0)
    span32 = span.astype(np.float32)
    s1 = weight.sum(axis=0)
    sy = (weight * y).sum(axis=0)
    syy = (weight * y * y).sum(axis=0)
    start_w = np.where(at_start, weight, 0.0)
    start_sf, start_sfy = start_w.sum(axis=0), (start_w * y).sum(axis=0)
    # f = (q_u - q_l) * coef / span with coef = tau / (1 - gamma) per container; the sums
    # below take the per-point factors from these precomputed weights.
    w_s = np.where(at_start, 0.0, weight / span)
    w_sy = w_s * y
    w_ss = w_s / span
    out = np.empty((3, t, gamma_count, n))  # contiguous per grid point
    lower32 = lower.astype(np.float32)
    # The gammas, (K, N), as running sums (the same additions, in the same order, as stepping
    # one gamma at a time), and what depends on gamma alone.
    gammas = np.empty((gamma_count, n))
    gammas[0], gammas[1:] = gamma_start, gamma_step
    gammas = np.cumsum(gammas, axis=0)
    denominator = 1.0 - gammas
    near_one = np.abs(denominator) < 1e-6
    safe_denominator = np.where(near_one, 1.0, denominator)
    any_near_one = bool(near_one.any())
    # For few containers, every gamma at once, (K, B, N) arrays: one pass of numpy per tau
    # instead of one per grid point, which for a node's few containers is most of the cost
    # (5 containers: 2.3 ms a fit against 5.2). Every element is computed by the same
    # operations in the same order as one gamma at a time (running products along the gamma
    # axis, sums over points in order): the results are the same bit for bit.
    block = gamma_count if x.size * gamma_count <= _BLOCK_ELEMENTS else 1
    for j in range(t):
        tau = taus[:, j]
        tau32 = tau.astype(np.float32)
        # f = (F(x + 1/2) - F(lower)) / span = tau q_l (r - 1) / ((1 - gamma) span) with
        # q_l = (1 + lower / tau) ** (1 - gamma) and r = exp((1 - gamma) ell_d),
        # ell_d = log1p(span / (tau + lower)), taken directly (no cancellation for short
        # windows). The logs in float32 (4-5x faster; their ~1e-7 relative error is far below
        # any noise a cost resolves), the rest in float64; along the gamma axis q_l and r are
        # running products, so a grid point costs no transcendental function at all. The grid's
        # bounds (tau >= 0.002 x the steps so far, gamma <= 2.8) keep q_l above ~1e-5.
        ell_l = np.log1p(lower32 / tau32).astype(np.float64)
        ell_d = np.log1p(span32 / (tau32 + lower32)).astype(np.float64)
        step_l = np.exp(-gamma_step * ell_l)
        step_r = np.exp(-gamma_step * ell_d)
        q_l = np.exp((1.0 - gamma_start) * ell_l)
        r = np.exp((1.0 - gamma_start) * ell_d)
        coef = tau / safe_denominator  # (K, N)
        for k0 in range(0, gamma_count, block):
            k1 = min(k0 + block, gamma_count)
            if k1 - k0 == 1:  # many containers: one gamma at a time keeps arrays in cache
                d = q_l * (r - 1.0)
                q_l, r = q_l * step_l, r * step_r
            else:
                q_ls, rs = np.empty((k1 - k0, *x.shape)), np.empty((k1 - k0, *x.shape))
                q_ls[0], q_ls[1:] = q_l, step_l
                rs[0], rs[1:] = r, step_r
                q_ls, rs = np.cumprod(q_ls, axis=0), np.cumprod(rs, axis=0)
                d = q_ls * (rs - 1.0)
                q_l, r = q_ls[-1] * step_l, rs[-1] * step_r
            if any_near_one:  # the limit tau ell_d (q_l = 1, r = 1 at gamma = 1)
                d = np.where(near_one[k0:k1, None, :] if d.ndim == 3 else near_one[k0], ell_d, d)
            sums = "kji,ji->ki" if d.ndim == 3 else "ji,ji->i"
            squares = "kji,kji,ji->ki" if d.ndim == 3 else "ji,ji,ji->i"
            c = coef[k0:k1] if d.ndim == 3 else coef[k0]
            sf = c * np.einsum(sums, d, w_s) + start_sf
            sfy = c * np.einsum(sums, d, w_sy) + start_sfy
            sff = c * c * np.einsum(squares, d, d, w_ss) + start_sf
            out[:, j, k0:k1, :] = np.reshape(
                _least_squares(sf, sff, sfy, s1=s1, sy=sy, syy=syy), (3, k1 - k0, n))
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
    """(cost, a, c) of the best c + a f for each container (`_least_squares` on the sums;
    arrays (B, N) point-major)."""
    wf = weight * f
    return _least_squares(wf.sum(axis=0), (wf * f).sum(axis=0), (wf * y).sum(axis=0),
                          s1=s1, sy=sy, syy=syy)


def _project(v: FloatArray, f: FloatArray, weight: FloatArray, wf: FloatArray, *,
             s1: FloatArray, sf: FloatArray, det: FloatArray) -> FloatArray:
    """v projected off the span of 1 and f (weighted least squares): v - alpha - beta f; the
    sums of f that both projections of a step share are passed in (wf = weight f, sf its sum,
    det = s1 sff - sf^2). Arrays (B, N) point-major."""
    sv, sfv = (weight * v).sum(axis=0), (wf * v).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        beta = (s1 * sfv - sf * sv) / det
        alpha = (sv - beta * sf) / s1
    return np.asarray(v - alpha - beta * f, dtype=np.float64)


def _variable_projection(
    x: FloatArray, y: FloatArray, weight: FloatArray, window: FloatArray, *,
    start: tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray],
    log_tau_limits: tuple[FloatArray, FloatArray],
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """Refine (cost, a, c, tau, gamma) from `start`: damped Gauss-Newton on (log tau, gamma)
    alone, with (a, c) solved exactly at every point (variable projection, Kaufman's Jacobian:
    the derivative of a f projected off the span of 1 and f). Eliminating (a, c) leaves a
    2 x 2 system per container in closed form. A step is kept where it lowers the cost (the
    damping then shrinks) and dropped where it does not (the damping grows). x, y, weight
    are (B, N) point-major."""
    cost, a, c, tau, gamma = start
    log_tau = np.log(tau)
    s1 = weight.sum(axis=0)
    sy, syy = (weight * y).sum(axis=0), (weight * y * y).sum(axis=0)
    damping = np.full(x.shape[1], 1e-3)
    windows = Windows.of(x, window)
    f, df_tau, df_gamma = basis(windows, log_tau, gamma)
    for _ in range(REFINE_STEPS):
        wf = weight * f
        sf = wf.sum(axis=0)
        det = s1 * (wf * f).sum(axis=0) - sf * sf
        j_tau = _project(a * df_tau, f, weight, wf, s1=s1, sf=sf, det=det)
        j_gamma = _project(a * df_gamma, f, weight, wf, s1=s1, sf=sf, det=det)
        residual = y - c - a * f
        w_tau, w_gamma = weight * j_tau, weight * j_gamma
        h11 = (w_tau * j_tau).sum(axis=0)
        h22 = (w_gamma * j_gamma).sum(axis=0)
        h12 = (w_tau * j_gamma).sum(axis=0)
        g1, g2 = (w_tau * residual).sum(axis=0), (w_gamma * residual).sum(axis=0)
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
        f, df_tau, df_gamma = (np.where(better, nf, f), np.where(better, ndt, df_tau),
                               np.where(better, ndg, df_gamma))
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
    # Point-major from here on: a container's sums run over axis 0, whole rows at a time.
    x, y, weight = (np.ascontiguousarray(v.T, dtype=np.float64) for v in (x, y, weight))
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
