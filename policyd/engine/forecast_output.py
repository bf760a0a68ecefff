"""What the forecast says: one container's `Forecast`, and `Forecasts`, every container's as
arrays (what the vectorised forecast computes; `at(i)` gives one container's values).

Seconds count from `Settings.now_seconds`; a container that could not be judged has no
`Forecast` and a note instead (`Forecasts.notes`), never a guess presented as a figure.

Must not: compute forecasts (forecast.py does), read a snapshot, or do I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from policyd.engine.forecast_input import Settings
from policyd.engine.speed import SpeedModel
from policyd.model.forecast import seconds_per_step
from policyd.model.snapshot import FloatArray

BoolArray = npt.NDArray[np.bool_]


def convergence_basis(s: Settings) -> str:
    """`Forecast.basis` of a job whose remaining steps come from its fitted curve."""
    return f"convergence (alpha {s.alpha:g} per {s.interval_seconds:g} s interval)"


@dataclass(frozen=True, kw_only=True)
class Forecast:
    """One container's forecast (seconds count from `Settings.now_seconds`)."""

    steps_done: float
    total_steps: float | None
    remaining_steps: float
    remaining_seconds: float
    finish_at: float
    low_seconds: float
    high_seconds: float
    target_loss: float | None
    target_eta_seconds: float | None
    basis: str  # "total steps" or "convergence (alpha ...)"
    steps_per_second: float
    parallel_fraction: float
    serial_seconds: float
    parallel_seconds: float
    cap_cores: float
    note: str = ""  # what the forecast could not say (e.g. an unreachable target)
    remaining_improvement: float | None = None  # when asked (`Settings.improvement`)

    def seconds_per_step_at(self, cores: float) -> float:
        """The speed model at `cores` (capped at the cores the job can use)."""
        return seconds_per_step(cores, cap_cores=self.cap_cores,
                                serial_seconds=self.serial_seconds,
                                parallel_seconds=self.parallel_seconds)

    def remaining_seconds_at(self, cores: float) -> float:
        """Remaining seconds if the job ran on `cores` from its last sample on."""
        return self.remaining_steps * self.seconds_per_step_at(cores)

    def on_a_whole_core(self) -> Forecast:
        """This forecast with its cap lifted to one core when it is below (a cap below one
        core comes from intervals at a floor, not from the job's threads: Predictive's
        `jobs_of`). Built as `JobForecast.checked` builds, without the frozen `__init__`: made
        for nearly every job of a 10,000-container decide, where `dataclasses.replace` cost
        40 ms."""
        if self.cap_cores >= 1.0:
            return self
        made = object.__new__(Forecast)
        made.__dict__.update(self.__dict__)
        made.__dict__["cap_cores"] = 1.0
        return made


@dataclass(frozen=True, kw_only=True, eq=False)
class Forecasts:
    """Every container's forecast as arrays (N,), NaN where `notes[i]` says why there is none."""

    steps_done: FloatArray
    total_steps: FloatArray
    remaining_steps: FloatArray
    remaining_seconds: FloatArray
    finish_at: FloatArray
    low_seconds: FloatArray
    high_seconds: FloatArray
    target_loss: FloatArray
    target_eta_seconds: FloatArray
    seconds_per_step: FloatArray  # at the current allocation
    speed: SpeedModel
    settings: Settings
    notes: tuple[str, ...]  # "" where there is a forecast
    remarks: tuple[str, ...]  # partial gaps of a forecast that exists (e.g. target)
    remaining_improvement: FloatArray | None = None
    """The loss's expected fall from now to the job's end (its total steps, or where the forecast
    puts its convergence) over the loss now, 0 for a flat loss; NaN where no curve was fitted.
    None unless asked (`Settings.improvement`)."""

    def improvement_at(self, i: int) -> float | None:
        if self.remaining_improvement is None:
            return None
        value = float(self.remaining_improvement[i])
        return None if math.isnan(value) else value

    @property
    def judged(self) -> BoolArray:
        return np.array([not n for n in self.notes], dtype=np.bool_)

    def remaining_seconds_at(self, cores: npt.ArrayLike) -> FloatArray:
        """Remaining seconds at `cores` (shape (N,) or (N, K)); NaN where not judged."""
        c = np.asarray(cores, dtype=np.float64)
        extra = (slice(None),) + (None,) * (c.ndim - 1)
        return self.remaining_steps[extra] * self.speed.seconds_per_step(c)

    def every(self) -> list[Forecast | None]:
        """Every container's `at(i)`, read out of the arrays once (10,000 at a time)."""
        convergence = convergence_basis(self.settings)
        fraction = self.speed.parallel_fraction.tolist()
        columns = [a.tolist() for a in (
            self.steps_done, self.total_steps, self.remaining_steps, self.remaining_seconds,
            self.finish_at, self.low_seconds, self.high_seconds, self.target_loss,
            self.target_eta_seconds, self.seconds_per_step, self.speed.serial_seconds,
            self.speed.parallel_seconds, self.speed.cap_cores)]
        improvements = (self.remaining_improvement.tolist()
                        if self.remaining_improvement is not None
                        else [None] * len(self.notes))
        out: list[Forecast | None] = []
        for i, (row, gain) in enumerate(zip(zip(*columns, strict=True), improvements,
                                            strict=True)):
            if self.notes[i]:
                out.append(None)
                continue
            (done, total, steps, seconds, finish, low, high, target, eta, per_step, serial,
             parallel, cap) = row
            # Built as the frozen __init__ would, without its object.__setattr__ per field
            # (10,000 at a time): Forecast checks nothing.
            made = object.__new__(Forecast)
            made.__dict__.update(
                steps_done=done, total_steps=None if math.isnan(total) else total,
                remaining_steps=steps, remaining_seconds=seconds, finish_at=finish,
                low_seconds=low, high_seconds=high,
                target_loss=None if math.isnan(target) else target,
                target_eta_seconds=None if math.isnan(eta) else eta,
                basis="total steps" if not math.isnan(total) else convergence,
                steps_per_second=1.0 / per_step, parallel_fraction=fraction[i],
                serial_seconds=serial, parallel_seconds=parallel, cap_cores=cap,
                note=self.remarks[i],
                remaining_improvement=None if gain is None or math.isnan(gain) else gain)
            out.append(made)
        return out

    def at(self, i: int) -> Forecast | None:
        if self.notes[i]:
            return None
        total = float(self.total_steps[i])
        target = float(self.target_loss[i])
        eta = float(self.target_eta_seconds[i])
        return Forecast(
            steps_done=float(self.steps_done[i]),
            total_steps=None if np.isnan(total) else total,
            remaining_steps=float(self.remaining_steps[i]),
            remaining_seconds=float(self.remaining_seconds[i]),
            finish_at=float(self.finish_at[i]),
            low_seconds=float(self.low_seconds[i]), high_seconds=float(self.high_seconds[i]),
            target_loss=None if np.isnan(target) else target,
            target_eta_seconds=None if np.isnan(eta) else eta,
            basis="total steps" if not np.isnan(total) else convergence_basis(self.settings),
            steps_per_second=float(1.0 / self.seconds_per_step[i]),
            parallel_fraction=float(self.speed.parallel_fraction[i]),
            serial_seconds=float(self.speed.serial_seconds[i]),
            parallel_seconds=float(self.speed.parallel_seconds[i]),
            cap_cores=float(self.speed.cap_cores[i]),
            note=self.remarks[i],
            remaining_improvement=self.improvement_at(i),
        )
