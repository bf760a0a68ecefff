"""Builders for the forecast's tests: histories of jobs that follow a known curve and speed.

`curve_history` samples L(x) = c + a (1 + x / tau) ** -gamma (the forecast's family) as the job's
exporter reports it: the mean of the last `window` step losses, computed exactly on the integer
steps, so that the fitted curve can be checked against known parameters.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from policyd.engine.forecast_input import History, Settings

NOW = 1_700_000_000.0


def family(x: np.ndarray, *, a: float, c: float, tau: float, gamma: float) -> np.ndarray:
    return c + a * (1.0 + x / tau) ** -gamma


def reported(steps: np.ndarray, losses_per_step: np.ndarray, window: int) -> np.ndarray:
    """The exporter's mean of the last `window` step losses at each of `steps` (integers)."""
    total = np.concatenate(([0.0], np.cumsum(losses_per_step[1:])))
    i = steps.astype(int)
    w = np.minimum(i, window)
    return np.where(i > 0, (total[i] - total[i - w]) / np.maximum(w, 1), losses_per_step[0])


def curve_history(
    *,
    samples: int = 40,
    sample_seconds: float = 10.0,
    seconds_per_step: float = 0.5,
    a: float = 2.0,
    c: float = 0.5,
    tau: float = 60.0,
    gamma: float = 0.8,
    window: int = 100,
    cores: float | Sequence[float] = 1.0,
    allocation: float = 1.0,
    max_cores: float = 2.0,
    total_steps: float | None = None,
    target_loss: float | None = None,
) -> History:
    """A job sampled every `sample_seconds` up to NOW, making 1 / seconds_per_step steps a
    second on `cores` cores (one figure, or one per sample)."""
    times = NOW - sample_seconds * np.arange(samples - 1, -1, -1, dtype=np.float64)
    steps = np.round((times - times[0]) / seconds_per_step)
    dense = family(np.arange(int(steps[-1]) + 1, dtype=np.float64), a=a, c=c, tau=tau,
                   gamma=gamma)
    used = np.full(samples, float(cores)) if np.isscalar(cores) else np.asarray(cores, float)
    return History(times_seconds=times, losses=reported(steps, dense, window), steps=steps,
                   cores=np.concatenate(([np.nan], used[1:])), allocation_cores=allocation,
                   max_cores=max_cores, total_steps=total_steps, target_loss=target_loss,
                   smoothing_steps=window)


def settings(*, alpha: float = 0.05, interval: float = 20.0, now: float = NOW,
             normalization: str = "relative", direction: str = "minimize") -> Settings:
    return Settings(now_seconds=now, alpha=alpha, interval_seconds=interval,
                    normalization=normalization,  # type: ignore[arg-type]
                    direction=direction)  # type: ignore[arg-type]


def replaced(h: History, **changes: object) -> History:
    fields = {name: getattr(h, name) for name in (
        "times_seconds", "losses", "steps", "cores", "allocation_cores", "max_cores",
        "total_steps", "target_loss", "smoothing_steps")}
    fields.update(changes)
    return History(**fields)  # type: ignore[arg-type]
