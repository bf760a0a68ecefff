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
    stays the same from one finish to the next (each job's caps under both regimes) is read
    once; the arithmetic per finish is `_rate`'s and `fill`'s."""
    n = len(jobs)
    left = [j.forecast.remaining_steps if j.forecast is not None else math.inf for j in jobs]
    total = list(left)  # inf for a job without a forecast: it never ends
    done = [math.inf] * n
    caps_free = [j.cap_cores for j in jobs]  # once only converged jobs are left
    caps_limited = [min(j.cap_cores, j.limit_cores) for j in jobs]
    forecasts = [j.forecast for j in jobs]
    running = list(range(n))
    forecast_left = sum(f is not None for f in forecasts)  # running jobs with a forecast
    growing = sum(not j.converged for j in jobs)  # running jobs not converged
    now = 0.0
    while forecast_left:
        free_for_all = growing == 0
        cores = [0.0] * n
        fill(cores, caps_free if free_for_all else caps_limited, running, capacity_cores,
             [1.0] * len(running) if free_for_all else [jobs[i].weight for i in running])
        rates = [(i, _rate(forecasts[i], jobs[i].measured_speed, speed, cores[i]))
                 for i in running]
        stretch = min((left[i] / r for i, r in rates if r > 0 and forecasts[i] is not None),
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
                forecast_left -= forecasts[i] is not None
                growing -= not jobs[i].converged
            else:
                still.append(i)
        running = still
    return done


def _rate(forecast: Forecast | None, measured_speed: float, speed: float,
          cores: float) -> float:
    """Steps per second on `cores` of a worker of `speed`, for a forecast measured at
    `measured_speed`; 0 without a forecast or a core."""
    if forecast is None or cores <= 0:
        return 0.0
    per_step = forecast.seconds_per_step_at(cores) * measured_speed / speed
    return 1.0 / per_step if per_step > 0 and math.isfinite(per_step) else 0.0
