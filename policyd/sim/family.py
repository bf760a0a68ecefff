"""The parametric loss-curve family of the simulator's fitted jobs: its parameters, its fit to a
recorded curve, and the JSON form in which the fits are shipped.

The family (a shifted power law with a shoulder):

    L(i) = c + a * (1 + (i / tau) ** k) ** (-gamma / k)

For k = 1 it is the usual c + a (1 + i / tau) ** -gamma: fast early gains, a power-law tail
that flattens towards the floor c. k > 1 only reshapes the start into a plateau (recurrent
models sit near ln 10 for a few dozen iterations before they start to learn); the tail,
a (i / tau) ** -gamma, is the same. Fitted with numpy only: a grid over (k, tau, gamma), and for
each point a weighted linear least-squares solve for (a, c) that minimises the *relative*
error sum(((y - L) / y) ** 2), since the mini-batch noise of a loss scales with the loss.
The recorded curve's high-frequency residual (its mini-batch noise) is measured per band of
iterations, so fitted jobs can be as noisy as real ones where real ones are.

Fitting all six recorded curves takes ~10 s, so it is not done at run time: `tools/fit_family.py`
runs `fit_family` on the shipped curves and writes `policyd/sim/data/family.json`, which
`policyd.sim.profiles.family_fits()` reads (a test checks that the two agree).

Must not: read or write files (callers pass curves in and take dicts out), train anything.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from policyd.model.snapshot import FloatArray

FAMILY_FORMAT = 1
_SMOOTH_WINDOW = 51  # iterations; the residual minus its moving average is mini-batch noise
# The mini-batch noise grows as a classifier learns (about 1% on the recurrent models' initial
# plateau, 13-15% in the tail), so it is measured, and reproduced, per band of iterations
# starting at these.
NOISE_BANDS: tuple[int, ...] = (0, 10, 30, 100, 300, 1000)
_NUMBERS = ("a", "c", "tau", "gamma", "k", "rms_log_residual", "noise_sigma", "systematic_rms")


@dataclass(frozen=True, kw_only=True)
class FamilyFit:
    """One recorded curve's fit: L(i) = c + a (1 + (i / tau) ** k) ** (-gamma / k).

    `rms_log_residual` is the RMS of log(recorded / fitted) over the whole run (noise and misfit
    together); `noise_sigma` its high-frequency part (the mini-batch noise), and `band_sigmas`
    the same per band of iterations starting at `NOISE_BANDS` (what fitted jobs reproduce);
    `systematic_rms` the RMS of the residual's moving average (what the family gets wrong).
    """

    model: str
    a: float
    c: float
    tau: float
    gamma: float
    k: float
    rms_log_residual: float
    noise_sigma: float
    systematic_rms: float
    band_sigmas: tuple[float, ...] = ()

    def curve(self, iterations: int) -> FloatArray:
        """The noise-free family curve at 0..iterations."""
        return _family(np.arange(iterations + 1, dtype=np.float64), self)


def _family(i: FloatArray, fit: FamilyFit) -> FloatArray:
    shape = (1.0 + (i / fit.tau) ** fit.k) ** (-fit.gamma / fit.k)
    return np.asarray(fit.c + fit.a * shape, dtype=np.float64)


def _solve_grid(
    y: FloatArray, ks: FloatArray, taus: FloatArray, gammas: FloatArray
) -> tuple[float, float, float, float, float, float]:
    """Best (cost, k, tau, gamma, a, c) over the grid, with (a, c) by weighted least squares.

    For fixed (k, tau, gamma) the model is linear in (a, c): y ~ c + a f. With weights w = 1 / y
    the 2x2 normal equations are solved for every gamma at once; points with a <= 0 are
    rejected, and where c < 0 the best c = 0 fit is used instead (a loss has no negative floor).
    """
    i = np.arange(y.size, dtype=np.float64)
    w2 = 1.0 / y**2
    s1, sy = w2.sum(), (w2 * y).sum()
    best = (np.inf, 1.0, 1.0, 1.0, 0.0, 0.0)
    for k in ks:
        for tau in taus:
            base = 1.0 + (i / tau) ** k  # (n,)
            f = base[None, :] ** (-gammas[:, None] / k)  # (g, n)
            sf, sff, sfy = (w2 * f).sum(1), (w2 * f * f).sum(1), (w2 * f * y).sum(1)
            det = s1 * sff - sf * sf
            with np.errstate(divide="ignore", invalid="ignore"):
                a = (s1 * sfy - sf * sy) / det
                c = (sff * sy - sf * sfy) / det
                a0 = sfy / sff
            floor = c < 0
            a, c = np.where(floor, a0, a), np.where(floor, 0.0, c)
            resid = (y[None, :] - c[:, None] - a[:, None] * f) / y[None, :]
            cost = np.where((a > 0) & np.isfinite(a), (resid**2).sum(1), np.inf)
            j = int(np.argmin(cost))
            if cost[j] < best[0]:
                best = (float(cost[j]), float(k), float(tau), float(gammas[j]), a[j], c[j])
    return best[0], best[1], best[2], best[3], float(best[4]), float(best[5])


def fit_family(model: str, losses: FloatArray) -> FamilyFit:
    """Fit the family to one recorded curve: a coarse log grid, then two finer local grids
    (~1.5 s a curve on a 2-core machine)."""
    y = np.asarray(losses, dtype=np.float64)
    ks = np.array([1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0])
    taus = np.geomspace(0.5, 4.0 * y.size, 40)
    gammas = np.geomspace(0.02, 8.0, 48)
    _, k, tau, gamma, a, c = _solve_grid(y, ks, taus, gammas)
    for span in (1.3, 1.06):
        k_grid = np.unique(np.clip(k * np.geomspace(1 / span, span, 5), 1.0, None))
        _, k, tau, gamma, a, c = _solve_grid(
            y,
            k_grid,
            tau * np.geomspace(1 / span, span, 11),
            gamma * np.geomspace(1 / span, span, 11),
        )
    fit = FamilyFit(
        model=model,
        a=a,
        c=c,
        tau=tau,
        gamma=gamma,
        k=k,
        rms_log_residual=0.0,
        noise_sigma=0.0,
        systematic_rms=0.0,
    )
    log_resid = np.log(y / fit.curve(y.size - 1))
    kernel = np.ones(_SMOOTH_WINDOW) / _SMOOTH_WINDOW
    padded = np.pad(log_resid, _SMOOTH_WINDOW // 2, mode="edge")
    trend = np.convolve(padded, kernel, mode="valid")
    noise = log_resid - trend
    edges = [*NOISE_BANDS, y.size]
    bands = tuple(
        float(np.sqrt(np.mean(noise[lo:hi] ** 2)))
        for lo, hi in itertools.pairwise(edges)
        if lo < y.size
    )
    return dataclasses.replace(
        fit,
        rms_log_residual=float(np.sqrt(np.mean(log_resid**2))),
        noise_sigma=float(np.sqrt(np.mean(noise**2))),
        systematic_rms=float(np.sqrt(np.mean(trend**2))),
        band_sigmas=bands,
    )


def fits_to_dict(fits: Mapping[str, FamilyFit], *, curves_sha256: str) -> dict[str, Any]:
    """The JSON form of `fits` (floats written in full: they read back bit for bit).

    `curves_sha256` names the curves file the fits were made from, so a re-recorded curves
    file without a re-fit is caught (tests/sim/test_family.py).
    """
    return {
        "format": FAMILY_FORMAT,
        "generated_by": "tools/fit_family.py",
        "family": "L(i) = c + a * (1 + (i / tau) ** k) ** (-gamma / k)",
        "curves_sha256": curves_sha256,
        "noise_bands": list(NOISE_BANDS),
        "models": {
            name: {**{key: getattr(fit, key) for key in _NUMBERS},
                   "band_sigmas": list(fit.band_sigmas)}
            for name, fit in fits.items()
        },
    }


def fits_from_dict(data: Mapping[str, Any]) -> dict[str, FamilyFit]:
    """The fits of a `fits_to_dict` document, keyed by model."""
    if data.get("format") != FAMILY_FORMAT:
        raise ValueError(f"family fits: format {data.get('format')!r}, expected {FAMILY_FORMAT}")
    if tuple(data["noise_bands"]) != NOISE_BANDS:
        raise ValueError(f"family fits: noise bands {data['noise_bands']}, expected "
                         f"{list(NOISE_BANDS)}: re-run tools/fit_family.py")
    return {
        name: FamilyFit(
            model=name, a=float(entry["a"]), c=float(entry["c"]), tau=float(entry["tau"]),
            gamma=float(entry["gamma"]), k=float(entry["k"]),
            rms_log_residual=float(entry["rms_log_residual"]),
            noise_sigma=float(entry["noise_sigma"]),
            systematic_rms=float(entry["systematic_rms"]),
            band_sigmas=tuple(float(s) for s in entry["band_sigmas"]),
        )
        for name, entry in data["models"].items()
    }
