"""Training profiles for the simulator: real recorded loss curves and a family fitted to them.

Owns two things:

* `load_profiles()`: the six curves recorded by `tools/record_curves.py` (real PyTorch training
  on this project's build machine; see `policyd/sim/data/README.md`), one `Profile` per model
  family of the thesis (VAE, MNIST CNN, LSTM, bidirectional RNN, GRU, RNN), `source="recorded"`.
* The parametric family fitted to each recorded curve, and `fitted_profile(...)`, which draws a
  new job of that family (`source="fitted"`) so scenarios can hold many distinct jobs.

The family (a shifted power law with a shoulder):

    L(i) = c + a * (1 + (i / tau) ** k) ** (-gamma / k)

For k = 1 it is the usual c + a (1 + i / tau) ** -gamma: fast early gains, a power-law tail
that flattens towards the floor c. k > 1 only reshapes the start into a plateau (recurrent
models sit near ln 10 for a few dozen iterations before they start to learn); the tail,
a (i / tau) ** -gamma, is the same. Fitted with numpy only: a grid over (k, tau, gamma), and for
each point a weighted linear least-squares solve for (a, c) that minimises the *relative*
error sum(((y - L) / y) ** 2), since the mini-batch noise of a loss scales with the loss.
A fitted job multiplies the jittered curve by log-normal noise whose sigma is the recorded
curve's high-frequency residual (its mini-batch noise), measured per band of iterations, so
fitted jobs are as noisy as real ones where real ones are (little on the initial plateau, about
12% in a classifier's tail).

Must not: train anything, import torch or scikit-learn, or do I/O beyond reading its own package
data (`policyd/sim/data/curves.json`).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Any

import numpy as np

from policyd.model.snapshot import FloatArray
from policyd.sim.types import Profile

MODELS: tuple[str, ...] = ("vae", "cnn", "lstm", "birnn", "gru", "rnn")
DATA_FILE = "curves.json"

PARAMETER_JITTER = 0.03  # relative (log-normal sigma) jitter of a, c, tau, gamma per fitted job
TIME_JITTER = 0.05  # a fitted job's iteration time is the recorded one x U(0.95, 1.05)
_SMOOTH_WINDOW = 51  # iterations; the residual minus its moving average is mini-batch noise
# The mini-batch noise grows as a classifier learns (about 1% on the recurrent models' initial
# plateau, 13-15% in the tail), so it is measured, and reproduced, per band of iterations
# starting at these.
NOISE_BANDS: tuple[int, ...] = (0, 10, 30, 100, 300, 1000)


def read_curves() -> dict[str, Any]:
    """The package data file as written by `tools/record_curves.py` (parsed JSON)."""
    text = resources.files("policyd.sim").joinpath("data", DATA_FILE).read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _frozen(values: object) -> FloatArray:
    array = np.array(values, dtype=np.float64)
    array.flags.writeable = False
    return array


@functools.cache
def load_profiles() -> Mapping[str, Profile]:
    """The recorded profiles, keyed by model ("vae", "cnn", "lstm", "birnn", "gru", "rnn")."""
    data = read_curves()
    machine = data["machine"]
    profiles: dict[str, Profile] = {}
    for name in MODELS:
        entry = data["models"][name]
        fit = entry["fit"]
        profiles[name] = Profile(
            model=name,
            source="recorded",
            losses=_frozen(entry["losses"]),
            iteration_seconds_1core=float(fit["iteration_seconds_1core"]),
            parallel_fraction=float(fit["parallel_fraction"]),
            max_parallelism=float(fit["max_parallelism"]),
            note=(
                f"{entry['description']}; {entry['evaluation']}; recorded {data['recorded_at']}"
                f" with torch {data['versions']['torch']} on {machine['cpu_model']}"
                f" ({machine['nproc']} cores)"
            ),
        )
    return MappingProxyType(profiles)


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
    """Fit the family to one recorded curve: a coarse log grid, then two finer local grids."""
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


@functools.cache
def family_fits() -> Mapping[str, FamilyFit]:
    """The fit of every recorded curve, keyed by model (computed once, ~1 s)."""
    return MappingProxyType({m: fit_family(m, p.losses) for m, p in load_profiles().items()})


def fitted_profile(
    model: str, rng: np.random.Generator, *, iterations: int | None = None
) -> Profile:
    """A new job of `model`'s family: jittered parameters, recorded-level noise, jittered speed.

    Deterministic given `rng` (draws: 4 parameter jitters, 1 time jitter, then the noise).
    `iterations` defaults to the recorded run's length.
    """
    recorded = load_profiles()[model]
    fit = family_fits()[model]
    n = recorded.iterations if iterations is None else iterations
    if n < 1:
        raise ValueError(f"{model}: a fitted job needs at least 1 iteration, got {n}")
    ja, jc, jtau, jgamma = np.exp(PARAMETER_JITTER * rng.standard_normal(4))
    time_scale = rng.uniform(1.0 - TIME_JITTER, 1.0 + TIME_JITTER)
    job = dataclasses.replace(
        fit, a=fit.a * ja, c=fit.c * jc, tau=fit.tau * jtau, gamma=fit.gamma * jgamma
    )
    band = np.searchsorted(NOISE_BANDS, np.arange(n + 1), side="right") - 1
    sigma = np.asarray(fit.band_sigmas)[np.minimum(band, len(fit.band_sigmas) - 1)]
    noise = np.exp(sigma * rng.standard_normal(n + 1))
    return Profile(
        model=model,
        source="fitted",
        losses=_frozen(job.curve(n) * noise),
        iteration_seconds_1core=recorded.iteration_seconds_1core * float(time_scale),
        parallel_fraction=recorded.parallel_fraction,
        max_parallelism=recorded.max_parallelism,
        note=(
            f"fitted family of the recorded {model} curve: c={job.c:.4g} a={job.a:.4g}"
            f" tau={job.tau:.4g} gamma={job.gamma:.4g} k={job.k:.3g},"
            f" log-normal noise sigma {min(fit.band_sigmas):.3g}..{max(fit.band_sigmas):.3g}"
        ),
    )
