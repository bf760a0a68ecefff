"""Draining a worker: when each of its jobs would finish if no job came or left, with the cores
flowing to the rest as each one ends. FlowCon2's moves are judged on it (`policyd.engine.flowcon2`).

Theory of operation. A worker's jobs share its cores by weight (their limits in shares mode),
none above what it can use nor above its hard limit (its CPU quota, in quota mode, where
every job weighs the same) (`policyd.engine.waterfill`), as CFS shares them. Between two
finishes every job's cores, hence its rate, are constant, so the worker is played forward finish
by finish: each job's steps left shrink by its rate times the stretch, the job that ends first
leaves, and its cores go to the others. FlowCon's limits change with the jobs on the worker:
once every job left is converged, each gets a limit of 1 (free competition, thesis Algorithm 1,
lines 14-16; under quotas, a quota of the whole worker), so a converged job that waits at the
floor beside growing jobs gets a full share when they are done. That is what a one-interval
picture misses: it prices a converged job's whole remaining run at the floor.

What it does not know: when a growing job will converge (it keeps its weight until it ends)
and which jobs will arrive. A job without a forecast never ends here: it holds its share to the
end, and its own finish is unknown (inf). Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from policyd.engine.forecast_output import Forecast
from policyd.engine.waterfill import fill
from policyd.model.forecast import seconds_per_step

STEP_TOLERANCE = 1e-9
"""Steps left below this count as done (absorbs the rounding of rate x seconds)."""


@dataclass(frozen=True, kw_only=True)
class DrainingJob:
    """One job on the worker: its weight (limit), the most cores it can use, whether FlowCon
    counts it converged, its forecast (None: unknown) and the speed of the worker its forecast
    was measured on (its seconds per step scale by that speed over the worker's); under a CPU
    quota, `limit_cores`, the most its quota lets it use (inf: no quota) until only converged
    jobs are left."""

    weight: float
    cap_cores: float
    converged: bool
    forecast: Forecast | None
    measured_speed: float
    limit_cores: float = math.inf

    def __post_init__(self) -> None:
        if not (self.weight > 0 and self.cap_cores > 0 and self.measured_speed > 0):
            raise ValueError(f"weight, cap_cores and measured_speed must be > 0, got "
                             f"{self.weight}, {self.cap_cores}, {self.measured_speed}")


def finish_seconds(jobs: Sequence[DrainingJob], capacity_cores: float,
                   speed: float) -> list[float]:
    """Seconds from now until each job ends on a worker of `capacity_cores` cores at `speed`
    (module docstring); inf for a job without a forecast or one that never gets a core. What
    stays the same from one finish to the next (each job's caps, weight and speed model) is
    read once; the arithmetic per finish is `_rate`'s and `fill`'s."""
    n = len(jobs)
    left = [j.forecast.remaining_steps if j.forecast is not None else math.inf for j in jobs]
    total = list(left)  # inf for a job without a forecast: it never ends
    done = [math.inf] * n
    caps_free = [j.cap_cores for j in jobs]  # once only converged jobs are left
    caps_limited = [min(j.cap_cores, j.limit_cores) for j in jobs]
    models = [_SpeedModel.of(j, speed) for j in jobs]
    running = list(range(n))
    forecast_left = sum(m is not None for m in models)  # running jobs with a forecast
    growing = sum(not j.converged for j in jobs)  # running jobs not converged
    now = 0.0
    while forecast_left:
        free_for_all = growing == 0
        cores = [0.0] * n
        fill(cores, caps_free if free_for_all else caps_limited, running, capacity_cores,
             [1.0] * len(running) if free_for_all else [jobs[i].weight for i in running])
        rates = [(i, _rate(models[i], cores[i])) for i in running]
        stretch = min((left[i] / r for i, r in rates if r > 0 and models[i] is not None),
                      default=math.inf)
        if not math.isfinite(stretch):
            break
        now += stretch
        for i, rate in rates:
            left[i] -= rate * stretch
        still = []
        for i in running:
            if math.isfinite(left[i]) and left[i] <= STEP_TOLERANCE * max(1.0, total[i]):
                done[i] = now
                forecast_left -= models[i] is not None
                growing -= not jobs[i].converged
            else:
                still.append(i)
        running = still
    return done


@dataclass(frozen=True)
class _SpeedModel:
    """A job's speed model on this worker, read once (`Forecast.seconds_per_step_at`, scaled
    by the speed its forecast was measured at over the worker's)."""

    cap_cores: float
    serial_seconds: float
    parallel_seconds: float
    scale: float  # measured speed
    speed: float  # the worker's

    @classmethod
    def of(cls, job: DrainingJob, speed: float) -> _SpeedModel | None:
        f = job.forecast
        if f is None:
            return None
        return cls(cap_cores=f.cap_cores, serial_seconds=f.serial_seconds,
                   parallel_seconds=f.parallel_seconds, scale=job.measured_speed, speed=speed)


def _rate(model: _SpeedModel | None, cores: float) -> float:
    """Steps per second on `cores`; 0 without a forecast or a core (`Forecast.
    seconds_per_step_at`'s arithmetic, scaled by the speeds)."""
    if model is None or cores <= 0:
        return 0.0
    per_step = seconds_per_step(cores, cap_cores=model.cap_cores,
                                serial_seconds=model.serial_seconds,
                                parallel_seconds=model.parallel_seconds) * model.scale \
        / model.speed
    return 1.0 / per_step if per_step > 0 and math.isfinite(per_step) else 0.0
