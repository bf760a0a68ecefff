"""The loss curve's family: a shifted power law seen through the exporter's running mean.

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

`curve_fit.py` fits it to every container at once.

Must not: read a snapshot, do I/O, or loop over containers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from policyd.model.snapshot import FloatArray

BoolArray = npt.NDArray[np.bool_]


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

    def reported(self, steps: npt.ArrayLike,
                 rows: npt.NDArray[np.int64] | None = None) -> FloatArray:
        """M(x): the reported (window-mean) loss at `steps`, shape (N,) or (N, K); with `rows`,
        `steps` has one row per entry of `rows` and each is read on that container's curve."""
        x = np.asarray(steps, dtype=np.float64)
        extra = (slice(None),) + (None,) * (x.ndim - 1)
        fit = self if rows is None else self.take(rows)
        basis = window_mean(x, fit.tau[extra], fit.gamma[extra], fit.window[extra])
        return np.asarray(fit.c[extra] + fit.a[extra] * basis, dtype=np.float64)


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


@dataclass(frozen=True, eq=False)
class Windows:
    """Each point's window, arrays (B, N) point-major (one column per container: a sum over a
    container's points is a sum over axis 0, which numpy does a whole row of containers at a
    time): its two ends, its length, and whether it is x = 0."""

    upper: FloatArray
    lower: FloatArray
    inverse_span: FloatArray  # 0 at x = 0, so that f and its derivatives vanish there
    at_start: BoolArray

    @classmethod
    def of(cls, x: FloatArray, window: FloatArray) -> Windows:
        """`x` (B, N), `window` (N,)."""
        span = np.maximum(np.minimum(window, x), 1.0)
        at_start = x < 0.5
        return cls(upper=x + 0.5, lower=np.maximum(x - span + 0.5, 0.0),
                   inverse_span=np.where(at_start, 0.0, 1.0 / span), at_start=at_start)


def basis(w: Windows, log_tau: FloatArray,
          gamma: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """f = the window mean of (1 + u / tau) ** -gamma at each point (B, N), and its derivatives
    by log tau and by gamma (f = 1, derivatives 0 at x = 0); `log_tau`, `gamma` (N,).

    With m = 1 - gamma, p = 1 + u / tau, l = log p: F(u) = tau (p ** m - 1) / m, and
        tau dF/dtau = F - u p ** -gamma,
        dF/dgamma = -tau (m l p ** m - (p ** m - 1)) / m ** 2,
    by their series tau l (1 + m l / 2) and -tau l^2 (1/2 + m l / 3) where |m| < 1e-3."""
    tau = np.exp(log_tau)
    m = 1.0 - gamma
    small = np.abs(m) < 1e-3
    safe_m = np.where(small, 1.0, m)
    ends = []
    for u in (w.upper, w.lower):
        ratio = u / tau
        ell = np.log1p(ratio)
        power = np.exp(m * ell)  # p ** m
        big_f = tau * (power - 1.0) / safe_m
        d_gamma = -tau * (safe_m * ell * power - (power - 1.0)) / (safe_m * safe_m)
        if small.any():
            big_f = np.where(small, tau * ell * (1.0 + 0.5 * m * ell), big_f)
            d_gamma = np.where(small, -tau * ell * ell * (0.5 + m * ell / 3.0), d_gamma)
        d_tau = big_f - u * power / (1.0 + ratio)
        ends.append((big_f, d_tau, d_gamma))
    (fu, tu, gu), (fl, tl, gl) = ends
    f = (fu - fl) * w.inverse_span
    return np.where(w.at_start, 1.0, f), (tu - tl) * w.inverse_span, (gu - gl) * w.inverse_span
