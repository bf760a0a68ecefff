"""Where each job is going: remaining steps and seconds, at any allocation, with a range.

Theory of operation, for N containers at once (numpy over all of them; Python touches only the
containers that cannot be judged, to word their note):

1. Speed (`speed.py`): seconds per step as a function of cores, Amdahl's law fitted to the
   (cores used, step rate) pairs of the history's intervals, with a prior on the parallel
   fraction when the job has run on one allocation only.
2. Loss curve (`curve.py`, fitted by `curve_fit.py`): a shifted power law seen through the
   exporter's running mean, fitted to up to `CURVE_POINTS` samples spread evenly over the
   history; only where something needs it (no total steps, or a target). A loss that has not
   moved at all is converged as it stands.
3. Remaining steps: with total steps known, exactly total - done. Without, the steps until the
   job would turn converged under the policy: the first x at which the fitted curve's growth
   efficiency over one interval, G(x) = |M(x - S) - M(x)| / |M(x - S)| / R (FlowCon's, with S the
   steps the job makes in `interval_seconds` at its current allocation and R the cores it uses
   there; absolute normalization drops the division by |M|), is below alpha.
4. Seconds: remaining steps times seconds per step at the current allocation (or any other,
   `remaining_seconds_at`); `finish_at` counts from the last sample. A declared target loss
   gives the steps and seconds until the fitted curve reaches it.
5. Range [low, high]: the speed's dispersion (SPEED_Z spreads either side, at least MIN_SPREAD)
   and, when the remaining steps come from the curve, the step it turns converged at within a
   factor CONVERGENCE_BAND either way (calibrated on the development curves).

A container that cannot be judged gets no forecast and a note saying why (no samples, NaN/Inf,
too few points, no progress, a curve that does not decrease, no convergence within the horizon).
Nothing here reads a clock (`Settings.now_seconds`), does I/O or draws random numbers.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from policyd.engine.curve import CurveFit
from policyd.engine.curve_fit import fit_curves
from policyd.engine.forecast_input import Histories, Settings
from policyd.engine.forecast_output import Forecasts
from policyd.engine.horizon import convergence_step, target_step
from policyd.engine.speed import DRIFT_BLOCKS, fit_speed
from policyd.model.snapshot import FloatArray

BoolArray = npt.NDArray[np.bool_]

CURVE_POINTS = 10
MIN_CURVE_POINTS = 6
"""The curve has four parameters; six distinct points leave two degrees of freedom."""
HORIZON_INTERVALS = 10_000.0
"""A job whose curve does not turn converged within this many intervals gets no forecast."""
FLAT_TOLERANCE = 1e-9
"""A loss whose samples differ by no more than this fraction has not moved: it is converged."""
MIN_CORES = 0.001  # FlowCon's floor of R in G = g / R (flowcon.MIN_CORES)
SPEED_Z = 1.28  # +-1.28 spreads: the 10th and 90th percentiles of a normal
CONVERGENCE_BAND = 2.8
"""The step at which a job turns converged is read off the fitted curve within a factor of
this, either way: the 85th percentile of the ratio between the predicted and the true step on
the development curves (the simulator's six, `benchmarks/forecast_accuracy.py --development`:
30 of 36 cases within 2.8x; the other six, all at the earliest cuts, 6-30x)."""
MIN_SPREAD = 0.02
"""The speed of the rest of a run is never taken as known to better than 2 %."""
DRIFT_T = {1: 3.078, 2: 1.886, 3: 1.638, 5: 1.476}[DRIFT_BLOCKS - 1]
"""Student's t 90th percentile at DRIFT_BLOCKS - 1 degrees of freedom (1.476 at 5): the drift's
diffusion is estimated from the differences of the window's DRIFT_BLOCKS consecutive blocks."""


def _last(values: FloatArray, lengths: FloatArray) -> FloatArray:
    n = values.shape[0]
    idx = np.maximum(lengths.astype(np.int64) - 1, 0)
    return values[np.arange(n), idx] if values.shape[1] else np.full(n, np.nan)


def _problems(h: Histories, s: Settings) -> list[str]:
    """Why each container cannot be judged at all ("" when it can)."""
    n, k = h.size, h.times_seconds.shape[1]
    present = np.arange(k)[None, :] < h.lengths[:, None]
    notes = [""] * n
    bad_time = present & ~np.isfinite(h.times_seconds)
    bad_loss = present & ~np.isfinite(h.losses)
    bad_steps = present & ~np.isfinite(h.steps)
    with np.errstate(invalid="ignore"):
        back_time = present[:, 1:] & (np.diff(h.times_seconds, axis=1) <= 0)
        back_steps = present[:, 1:] & (np.diff(h.steps, axis=1) < 0)
        non_positive = present & (h.losses <= 0)
    checks: list[tuple[BoolArray, Callable[[int, int], str]]] = [
        (bad_time, lambda i, j: f"sample time {j} is {h.times_seconds[i, j]}"),
        (back_time, lambda i, j: f"sample times do not increase at sample {j + 1}"),
        (bad_loss, lambda i, j: (f"the loss is {h.losses[i, j]} at "
                                 f"t={h.times_seconds[i, j]:.0f}")),
        (bad_steps, lambda i, j: f"steps done is {h.steps[i, j]} at t={h.times_seconds[i, j]:.0f}"),
        (back_steps, lambda i, j: (f"steps done went back at t={h.times_seconds[i, j + 1]:.0f} "
                                   "(a restart without its checkpoint?)")),
        (non_positive, lambda i, j: (f"the loss is {h.losses[i, j]:g} at "
                                     f"t={h.times_seconds[i, j]:.0f}; the curve model needs a "
                                     "positive loss")),
    ]
    for mask, word in checks:
        for i in np.flatnonzero(mask.any(axis=1)).tolist():
            if not notes[i]:
                notes[i] = word(i, int(mask[i].argmax()))
    for i in np.flatnonzero(h.lengths < 2).tolist():
        notes[i] = notes[i] or f"too few samples: {int(h.lengths[i])} (needs 2 to measure speed)"
    bad_alloc = ~(h.allocation_cores > 0) | ~np.isfinite(h.allocation_cores)
    for i in np.flatnonzero(bad_alloc).tolist():
        notes[i] = notes[i] or (f"allocation is {h.allocation_cores[i]:g} cores: the job "
                                "cannot progress")
    if s.direction == "maximize":
        notes = [n or "the forecast reads loss-like (minimize) evaluation functions only"
                 for n in notes]
    return notes


def _curve_points(h: Histories, usable: BoolArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Up to CURVE_POINTS samples per container, evenly spread over its history (the first and
    the last always in), as (x, y, weight) arrays (N, CURVE_POINTS); weight 1 / y^2 (the noise
    of a loss scales with the loss), 0 where absent."""
    n = h.size
    lengths = np.where(usable, h.lengths, 0).astype(np.int64)
    count = np.minimum(lengths, CURVE_POINTS)
    slots = np.arange(CURVE_POINTS)[None, :]
    pick = np.rint(slots * (lengths - 1)[:, None] / np.maximum(count - 1, 1)[:, None])
    present = slots < count[:, None]
    pick = np.where(present, pick, 0).astype(np.int64)
    rows = np.arange(n)[:, None]
    x = np.where(present, h.steps[rows, pick] if h.steps.shape[1] else 0.0, 0.0)
    y = np.where(present, h.losses[rows, pick] if h.losses.shape[1] else 1.0, 1.0)
    weight = np.where(present, 1.0 / (y * y), 0.0)
    return x, y, weight


def forecast(h: Histories, s: Settings) -> Forecasts:
    """Forecast every container of `h` under the policy settings `s` (module docstring)."""
    notes = _problems(h, s)
    speed = fit_speed(steps_made=np.diff(h.steps, axis=1),
                      seconds=np.diff(h.times_seconds, axis=1), cores=h.cores[:, 1:],
                      allocation_cores=h.allocation_cores, max_cores=h.max_cores,
                      busy=h.busy[:, 1:])
    for i in np.flatnonzero(~_noted(notes) & ~speed.usable).tolist():
        notes[i] = ("no progress to measure: no interval with steps made and a CPU figure "
                    f"among {int(h.lengths[i])} samples")
    usable = ~_noted(notes)
    cores_now = speed.cores_now(h.allocation_cores)
    seconds_per_step = speed.seconds_per_step(cores_now)
    x_now = _last(h.steps, h.lengths)
    t_last = _last(h.times_seconds, h.lengths)
    known = np.isfinite(h.total_steps)
    declared = np.isfinite(h.target_loss)

    # The curve, only where something needs it: no total steps, or a target.
    x, y, weight = _curve_points(h, usable)
    present = weight > 0
    points = present.sum(axis=1)
    enough = points >= MIN_CURVE_POINTS
    # A loss that has not moved at all is converged by the rule (G = 0); no curve is fitted.
    top = np.max(np.where(present, y, -np.inf), axis=1, initial=-np.inf)
    bottom = np.min(np.where(present, y, np.inf), axis=1, initial=np.inf)
    flat = enough & (top - bottom <= FLAT_TOLERANCE * np.abs(top))
    # The remaining improvement (when asked) needs the curve of jobs with a known total too;
    # only where its points are steps a job can have done (>= 0).
    sane = np.all(~present | (x >= 0), axis=1)
    rows = np.flatnonzero(usable & enough & ~flat
                          & (~known | declared | (s.improvement & sane)))
    curve = fit_curves(x[rows], y[rows], weight[rows], h.smoothing_steps[rows])
    fitted = np.zeros(h.size, dtype=np.bool_)
    fitted[rows] = curve.ok
    per_interval = s.interval_seconds / seconds_per_step
    horizon = np.maximum(per_interval * HORIZON_INTERVALS, 1.0)
    # Where the job turns converged: read only where no total steps are declared (a declared
    # total is where the job ends, whatever its curve does).
    crossing = np.full(h.size, np.nan)
    searched = np.flatnonzero(~known[rows])
    at = rows[searched]
    crossing[at] = convergence_step(
        curve.take(searched), x_now=x_now[at], steps_per_interval=per_interval[at],
        cores=np.maximum(cores_now[at], MIN_CORES), alpha=s.alpha,
        normalization=s.normalization, horizon=horizon[at])
    crossing = np.where(flat, x_now, crossing)
    # Why a job with no total steps has no crossing; the masks pick the few rows, so that the
    # loop does not visit every job (10,000 without totals).
    searching = usable & ~known & ~flat
    for i in np.flatnonzero(searching & ~enough).tolist():
        notes[i] = (f"too few samples to fit the loss curve: {int(points[i])} "
                    f"(needs {MIN_CURVE_POINTS}) and no total steps declared")
    for i in np.flatnonzero(searching & enough & ~fitted).tolist():
        notes[i] = ("the loss does not decrease: no curve of the family fits, and no total "
                    "steps declared")
    for i in np.flatnonzero(searching & enough & fitted & np.isnan(crossing)).tolist():
        notes[i] = (f"the fitted curve still improves by alpha {s.alpha:g} per interval "
                    f"{HORIZON_INTERVALS:.0f} intervals from now; no total steps declared")
    remaining_steps = np.where(known, np.maximum(h.total_steps - x_now, 0.0), crossing - x_now)

    seconds = remaining_steps * seconds_per_step
    finish_at = t_last + seconds
    remaining_seconds = np.maximum(finish_at - s.now_seconds, 0.0)
    # The range (module docstring, 5): the speed either way, one interval's scatter and the
    # drift of its level over the window and the rest of the run added in quadrature (in log);
    # without total steps also the convergence step x* = x_now + remaining within a factor
    # CONVERGENCE_BAND either way.
    steady = 1.0 + SPEED_Z * np.maximum(speed.spread, MIN_SPREAD)
    with np.errstate(invalid="ignore", over="ignore"):
        rest = np.maximum(seconds, 0.0)
        drift = DRIFT_T * np.sqrt(speed.drift * (speed.window_seconds + rest) / 3.0)
        drift = np.where(np.isfinite(drift), drift, 0.0)
        scatter = np.log(steady)
        speed_factor = np.where(drift > 0, np.exp(np.sqrt(scatter * scatter + drift * drift)),
                                steady)
    crossing_at = x_now + remaining_steps
    low_steps = np.where(known, remaining_steps,
                         np.maximum(crossing_at / CONVERGENCE_BAND - x_now, 0.0))
    high_steps = np.where(known, remaining_steps, crossing_at * CONVERGENCE_BAND - x_now)
    with np.errstate(over="ignore"):  # an infinite end is noted below (`_unless_finite`)
        low = np.maximum(t_last + low_steps * seconds_per_step / speed_factor - s.now_seconds,
                         0.0)
        high = np.maximum(t_last + high_steps * seconds_per_step * speed_factor
                          - s.now_seconds, 0.0)

    target_eta = np.full(h.size, np.nan)
    remarks = [""] * h.size
    if declared.any():
        with_target = rows[declared[rows]]
        picked = np.flatnonzero(declared[rows])
        steps = np.full(h.size, np.nan)
        steps[with_target] = target_step(curve.take(picked), x_now=x_now[with_target],
                                         target=h.target_loss[with_target],
                                         horizon=horizon[with_target])
        target_eta, remarks = _target_eta(h, steps, fitted=fitted, x_now=x_now,
                                          seconds_per_step=seconds_per_step, t_last=t_last,
                                          s=s)

    improvement = None
    if s.improvement:
        improvement = _remaining_improvement(curve, rows, fitted=fitted, flat=flat,
                                             x_now=x_now, end=np.where(known, h.total_steps,
                                                                       crossing))
    with np.errstate(divide="ignore"):
        _unless_finite(notes, steps_done=x_now, remaining_steps=remaining_steps,
                       seconds_per_step=seconds_per_step, steps_per_second=1.0 / seconds_per_step,
                       finish_at=finish_at, low_seconds=low, high_seconds=high)
    judged = ~_noted(notes)
    nan = np.where(judged, 1.0, np.nan)
    return Forecasts(
        steps_done=x_now * nan, total_steps=h.total_steps * nan,
        remaining_steps=remaining_steps * nan, remaining_seconds=remaining_seconds * nan,
        finish_at=finish_at * nan, low_seconds=low * nan, high_seconds=high * nan,
        target_loss=h.target_loss * nan, target_eta_seconds=target_eta * nan,
        seconds_per_step=seconds_per_step * nan, speed=speed, settings=s, notes=tuple(notes),
        remarks=tuple(r if j else "" for r, j in zip(remarks, judged, strict=True)),
        remaining_improvement=None if improvement is None else improvement * nan,
    )


def _remaining_improvement(curve: CurveFit, rows: npt.NDArray[np.int64], *, fitted: BoolArray,
                           flat: BoolArray, x_now: FloatArray, end: FloatArray) -> FloatArray:
    """(M(x_now) - M(end)) / M(x_now) on the fitted curve, at least 0: how much of today's loss
    the rest of the run is still expected to take off (`end`: the total steps, or the step the
    job turns converged at); 0 for a flat loss, NaN where there is no curve."""
    out = np.where(flat, 0.0, np.nan)
    if rows.size:
        now = curve.reported(x_now[rows])
        later = curve.reported(np.maximum(end[rows], x_now[rows]))
        with np.errstate(invalid="ignore", divide="ignore"):
            value = np.maximum(now - later, 0.0) / np.abs(now)
        out[rows] = np.where(fitted[rows] & np.isfinite(value), value, np.nan)
    return out


def _unless_finite(notes: list[str], **values: FloatArray) -> None:
    """A note on every container not noted yet whose forecast has a value that is not a
    finite number: no forecast, never a NaN or an infinity presented as one (a decision's
    forecast refuses them, and a tick would fail on one)."""
    bad = ~_noted(notes) & ~np.all([np.isfinite(v) for v in values.values()], axis=0)
    for i in np.flatnonzero(bad).tolist():
        which = ", ".join(f"{name.replace('_', ' ')} {v[i]:g}" for name, v in values.items()
                          if not np.isfinite(v[i]))
        notes[i] = f"the forecast is not a number ({which}): no figure from these samples"


def _noted(notes: list[str]) -> BoolArray:
    return np.array([bool(n) for n in notes], dtype=np.bool_)


def _target_eta(h: Histories, steps: FloatArray, *, fitted: BoolArray, x_now: FloatArray,
                seconds_per_step: FloatArray, t_last: FloatArray,
                s: Settings) -> tuple[FloatArray, list[str]]:
    """Seconds from now until each declared target is reached (0 when it already is; NaN and
    a remark when the curve cannot say)."""
    target = h.target_loss
    declared = np.isfinite(target)
    now_loss = _last(h.losses, h.lengths)
    reached = declared & (now_loss <= target)
    eta = np.maximum(t_last + (steps - x_now) * seconds_per_step - s.now_seconds, 0.0)
    eta = np.where(reached, 0.0, eta)
    remarks = [""] * h.size
    for i in np.flatnonzero(declared & ~reached).tolist():
        if not fitted[i]:
            remarks[i] = ("target: no curve fitted (too few samples, or a loss that does not "
                          "decrease)")
        elif np.isnan(steps[i]):
            remarks[i] = (f"target {target[i]:g} is not reached by the fitted curve within "
                          f"{HORIZON_INTERVALS:.0f} intervals")
    return eta, remarks
