"""Recorded training runs played as monitored jobs, cut at fractions of their life, with the
truth the forecast is judged against (the protocol of `forecast_accuracy.py`).

The protocol, fixed before any forecast was run on the held-out curves:

* A run's per-step wall and CPU seconds are scaled by one factor so that the whole run takes
  `STANDALONE_SECONDS` (400 s, the middle of the simulator's 263-552 s per job alone on one
  core, `policyd.sim.scenarios.STANDALONE_SECONDS`). The job reports the 100-step running mean of
  its loss (`policyd.sim.types.REPORT_WINDOW_ITERATIONS`); a sample is scraped every
  `SCRAPE_SECONDS` (5 s, the simulator's): time, steps done, the reported loss, and the mean cores
  used since the previous scrape (CPU-seconds / wall seconds). The job runs on 1 core of a
  2-core node (allocation 1, node maximum 2).
* Two policies give the convergence rule: FlowCon's defaults (alpha 0.05, interval 20 s,
  `policies/flowcon.yaml`) and the SpeCon scenarios' (alpha 0.01, interval 30 s), both with
  relative normalization.
* Total steps known: life = the whole run; truth = the run's end.
* Total steps unknown: truth = the first time t >= one interval at which the *true* curve's
  growth efficiency over (t - interval, t], G = |L(t - I) - L(t)| / |L(t - I)| / R, falls below
  alpha (FlowCon's rule, series.py / flowcon.py): the job would turn converged there. The true
  curve is the reported running mean smoothed by a centred moving average of max(101, steps per
  interval) steps, so that the truth is the curve's and not one mini-batch's; R is the run's
  mean cores used. Life = that time. A run whose true curve never falls below alpha has no
  truth in this case and is counted apart.
* Cuts at 10, 25, 50 and 75 % of the life: the forecast sees every sample scraped at or before
  the cut, and predicts the remaining time from the last of them.

Must not: import the engine's forecast (the benchmark calls it; this module only builds cases).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from policyd.model.snapshot import FloatArray
from policyd.sim.profiles import load_profiles
from policyd.sim.types import REPORT_WINDOW_ITERATIONS, running_mean

STANDALONE_SECONDS = 400.0
SCRAPE_SECONDS = 5.0
FRACTIONS = (0.10, 0.25, 0.50, 0.75)
ALLOCATION_CORES = 1.0
NODE_CORES = 2.0
TRUTH_SMOOTHING_STEPS = 101
HELDOUT = Path(__file__).resolve().parent / "data" / "heldout_curves.json"


@dataclass(frozen=True, kw_only=True)
class Rule:
    """The policy settings the convergence rule reads."""

    name: str
    alpha: float
    interval_seconds: float
    normalization: Literal["relative", "absolute"] = "relative"


RULES = (Rule(name="FlowCon alpha 0.05 / 20 s", alpha=0.05, interval_seconds=20.0),
         Rule(name="SpeCon alpha 0.01 / 30 s", alpha=0.01, interval_seconds=30.0))


@dataclass(frozen=True, kw_only=True, eq=False)
class Run:
    """One recorded run: losses[i] after i steps (n + 1 values), per-step seconds (n values),
    already scaled to `STANDALONE_SECONDS`."""

    name: str
    losses: FloatArray
    wall_seconds: FloatArray
    cpu_seconds: FloatArray

    @property
    def steps(self) -> int:
        return int(self.wall_seconds.size)

    @property
    def reported(self) -> FloatArray:
        return running_mean(self.losses, REPORT_WINDOW_ITERATIONS)

    @property
    def step_end_times(self) -> FloatArray:
        """ends[i]: the time at which step i + 1 completes; ends[-1] is the run's end."""
        return np.cumsum(self.wall_seconds)

    @property
    def duration_seconds(self) -> float:
        return float(self.wall_seconds.sum())

    @property
    def mean_cores(self) -> float:
        """The cores the run used on average: its CPU seconds over its wall seconds."""
        return float(self.cpu_seconds.sum() / self.wall_seconds.sum())


def _scaled(name: str, losses: FloatArray, wall: FloatArray, cpu: FloatArray) -> Run:
    factor = STANDALONE_SECONDS / float(wall.sum())
    return Run(name=name, losses=losses, wall_seconds=wall * factor, cpu_seconds=cpu * factor)


def heldout_runs(path: Path = HELDOUT) -> list[Run]:
    """The held-out recordings (`tools/record_heldout.py`), the benchmark's test set."""
    document = json.loads(path.read_text())
    runs = []
    for name, job in document["jobs"].items():
        runs.append(_scaled(name, np.asarray(job["losses"], dtype=np.float64),
                            np.asarray(job["wall_microseconds"], dtype=np.float64) * 1e-6,
                            np.asarray(job["cpu_microseconds"], dtype=np.float64) * 1e-6))
    return runs


def development_runs() -> list[Run]:
    """The simulator's six recorded curves, the forecast's development set: only their median
    step time was kept, so every step takes the same time (and one core)."""
    runs = []
    for name, profile in load_profiles().items():
        wall = np.full(profile.iterations, profile.iteration_seconds_1core)
        runs.append(_scaled(name, np.asarray(profile.losses), wall, wall.copy()))
    return runs


@dataclass(frozen=True, kw_only=True, eq=False)
class Samples:
    """What a scraper saw: per scrape the time, steps done, reported loss, mean cores used in
    the preceding scrape interval (NaN for the first)."""

    times_seconds: FloatArray
    steps: FloatArray
    losses: FloatArray
    cores: FloatArray

    def upto(self, time_seconds: float) -> Samples:
        k = int(np.searchsorted(self.times_seconds, time_seconds, side="right"))
        return Samples(times_seconds=self.times_seconds[:k], steps=self.steps[:k],
                       losses=self.losses[:k], cores=self.cores[:k])


def scrape(run: Run, scrape_seconds: float = SCRAPE_SECONDS) -> Samples:
    """Scrapes at 0, 5, 10 ... s up to the run's end (the last scrape is the end itself)."""
    ends = run.step_end_times
    times = np.arange(0.0, run.duration_seconds, scrape_seconds)
    times = np.append(times, run.duration_seconds)
    done = np.searchsorted(ends, times * (1 + 1e-12), side="right")  # steps complete by t
    losses = run.reported[done]
    # CPU-seconds by time t, spread evenly over each step's wall time.
    cpu_at = np.interp(times, np.concatenate(([0.0], ends)),
                       np.concatenate(([0.0], np.cumsum(run.cpu_seconds))))
    cores = np.concatenate(([np.nan], np.diff(cpu_at) / np.diff(times)))
    return Samples(times_seconds=times, steps=done.astype(np.float64), losses=losses,
                   cores=cores)


def true_curve(run: Run, smoothing_steps: int) -> FloatArray:
    """The reported curve smoothed by a centred moving average (edges: shrinking windows)."""
    y = run.reported
    half = smoothing_steps // 2
    total = np.concatenate(([0.0], np.cumsum(y)))
    idx = np.arange(y.size)
    lo, hi = np.maximum(idx - half, 0), np.minimum(idx + half + 1, y.size)
    return (total[hi] - total[lo]) / (hi - lo)


def truth_smoothing_steps(run: Run, rule: Rule) -> int:
    """The true curve's smoothing window: max(101, steps per interval) (module docstring)."""
    per_interval = run.steps * rule.interval_seconds / run.duration_seconds
    return max(TRUTH_SMOOTHING_STEPS, round(per_interval))


def convergence_time(run: Run, rule: Rule, *, smoothing_steps: int | None = None,
                     interval_cores: bool = False) -> float | None:
    """The first time t >= interval at which the true curve's growth efficiency over
    (t - interval, t] is below alpha (see the module docstring), to one step; None if never.

    The protocol's truth takes the defaults. `forecast_bounds.py` varies its reading:
    `smoothing_steps` another smoothing window; `interval_cores` R measured over each
    (t - interval, t] (FlowCon's R_c, series.mean_cpu_cores) instead of the run's mean."""
    ends = np.concatenate(([0.0], run.step_end_times))  # ends[i]: time when i steps are done
    if smoothing_steps is None:
        smoothing_steps = truth_smoothing_steps(run, rule)
    curve = true_curve(run, smoothing_steps)
    t = ends[ends >= rule.interval_seconds]
    now_steps = np.searchsorted(ends, t, side="right") - 1
    before = np.searchsorted(ends, t - rule.interval_seconds, side="right") - 1
    change = np.abs(curve[before] - curve[now_steps])
    if rule.normalization == "relative":
        change = change / np.maximum(np.abs(curve[before]), 1e-12)
    cores: float | FloatArray = run.mean_cores
    if interval_cores:
        cpu = np.concatenate(([0.0], np.cumsum(run.cpu_seconds)))
        cores = (np.interp(t, ends, cpu) - np.interp(t - rule.interval_seconds, ends, cpu)
                 ) / rule.interval_seconds
    below = np.flatnonzero(change / np.maximum(cores, 1e-3) < rule.alpha)
    return float(t[below[0]]) if below.size else None


@dataclass(frozen=True, kw_only=True, eq=False)
class Case:
    """One run cut at one fraction of its life, with the truth to compare against."""

    run: str
    basis: Literal["total known", "total unknown"]
    rule: Rule
    fraction: float
    samples: Samples  # what the forecast may see
    total_steps: int | None
    truth_seconds: float  # remaining time after the last visible sample


def cases(runs: list[Run], rule: Rule) -> tuple[list[Case], list[str]]:
    """Every run x basis x fraction; and the runs with no truth for the unknown case."""
    built: list[Case] = []
    never: list[str] = []
    for run in runs:
        seen = scrape(run)
        end = run.duration_seconds
        converged = convergence_time(run, rule)
        if converged is None:
            never.append(run.name)
        lives: list[tuple[Literal["total known", "total unknown"], float, int | None]] = [
            ("total known", end, run.steps)]
        if converged is not None:
            lives.append(("total unknown", converged, None))
        for basis, life, total in lives:
            for fraction in FRACTIONS:
                visible = seen.upto(fraction * life)
                last = float(visible.times_seconds[-1])
                built.append(Case(run=run.name, basis=basis, rule=rule, fraction=fraction,
                                  samples=visible, total_steps=total,
                                  truth_seconds=life - last))
    return built, never
