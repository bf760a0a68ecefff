"""Training profiles for the simulator: real recorded loss curves and a family fitted to them.

Owns two things:

* `load_profiles()`: the six curves recorded by `tools/record_curves.py` (real PyTorch training
  on this project's build machine; see `policyd/sim/data/README.md`), one `Profile` per model
  family of the thesis (VAE, MNIST CNN, LSTM, bidirectional RNN, GRU, RNN), `source="recorded"`.
* The parametric family fitted to each recorded curve, and `fitted_profile(...)`, which draws a
  new job of that family (`source="fitted"`) so scenarios can hold many distinct jobs.

The family and its fit live in `policyd.sim.family`; the fitted parameters are shipped beside
the curves (`policyd/sim/data/family.json`, written by `tools/fit_family.py`) and read here.
A fitted job multiplies the jittered family curve by log-normal noise whose sigma is the
recorded curve's high-frequency residual (its mini-batch noise), measured per band of
iterations, so fitted jobs are as noisy as real ones where real ones are (little on the initial
plateau, about 12% in a classifier's tail).

Must not: train or fit anything, import torch or scikit-learn, or do I/O beyond reading its own
package data (`policyd/sim/data/curves.json` and `family.json`).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Mapping
from importlib import resources
from types import MappingProxyType
from typing import Any

import numpy as np

from policyd.model.snapshot import FloatArray
from policyd.sim.family import NOISE_BANDS, FamilyFit, fits_from_dict
from policyd.sim.types import Profile

MODELS: tuple[str, ...] = ("vae", "cnn", "lstm", "birnn", "gru", "rnn")
DATA_FILE = "curves.json"
FAMILY_FILE = "family.json"

PARAMETER_JITTER = 0.03  # relative (log-normal sigma) jitter of a, c, tau, gamma per fitted job
TIME_JITTER = 0.05  # a fitted job's iteration time is the recorded one x U(0.95, 1.05)


def read_curves() -> dict[str, Any]:
    """The package data file as written by `tools/record_curves.py` (parsed JSON)."""
    text = resources.files("policyd.sim").joinpath("data", DATA_FILE).read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def curves_sha256() -> str:
    """The SHA-256 of the shipped curves file (the shipped fits name the curves they fit)."""
    raw = resources.files("policyd.sim").joinpath("data", DATA_FILE).read_bytes()
    return hashlib.sha256(raw).hexdigest()


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


def read_family() -> dict[str, Any]:
    """The shipped fits as written by `tools/fit_family.py` (parsed JSON)."""
    text = resources.files("policyd.sim").joinpath("data", FAMILY_FILE).read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


@functools.cache
def family_fits() -> Mapping[str, FamilyFit]:
    """The family's fit to every recorded curve, keyed by model, as shipped beside the curves
    (`data/family.json`; fitting them here would take ~10 s at every start)."""
    return MappingProxyType(fits_from_dict(read_family()))


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
