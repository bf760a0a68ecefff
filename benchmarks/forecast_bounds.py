"""What the best conceivable forecast of each kind would score on the protocol of
`forecast_accuracy.py`: bounds, not forecasts (issue 13).

Usage: python benchmarks/forecast_bounds.py [--development | --curves FILE [FILE ...]] [--cases]
       [--families]

Same runs, cuts and truth as `forecast_accuracy.py` (`forecast_jobs.py`, nothing changed);
by default the four held-out sets in turn. Three tables per set (four with --families), all
figures median absolute % error of remaining time over the set's cases at each cut (the
forecast's own as a reference):

1. Total known, the speed bound. The remaining steps are exact, so the error is the speed's
   alone: remaining steps x a step time estimated from the past, against the truth. Estimates:
   the forecast's own (its speed model at its cores now, so its error is the forecast's); the
   mean step time over every sample seen (the forecast's window is all of them: no model, a
   perfect measurement of the past); the mean over the last quarter of the seconds seen; a
   straight line fitted to the past's step times, extrapolated; one trailing share of the seconds
   seen per set and cut, the best in hindsight; and the best trailing mean per case in hindsight
   (the trailing stretch of samples whose mean step time comes closest to the rest of the run's:
   a lower bound for any trailing-mean estimate).
   `drift` is the rest of the run's mean step time / the mean over every sample seen.
2. Total unknown, the truth's own precision. The truth recomputed with the true curve's
   smoothing window halved and doubled, and with R measured over each interval (FlowCon's R_c)
   instead of the run's mean; per cut the median of |T_variant - T| / (T - the last sample
   seen). Also, for scale and outside the protocol's reason for smoothing, the reported running
   mean itself, unsmoothed (what FlowCon reads); and, as a sensitivity, not a reading, the
   true crossing at alpha x 1.1 and / 1.1 (the farther of the two): where a forecast that knew
   the true curve's improvement per interval to within 10 % could put it.
3. Total unknown, the best-in-family bound. The forecast's curve family fitted (its own fit,
   `curve_fit.fit_curves`) to the whole recording (every scraped sample to the end, the same
   reported series the forecast sees; also the CURVE_POINTS the forecast would pick from it),
   then the crossing read as the forecast reads it (`horizon.convergence_step`, same rule,
   alpha, interval, cores). Converted to seconds (a) as the forecast does, at its speed and
   cores at the cut (cases where the forecast has a speed), and (b) with the run's true speed
   and mean cores and the true step times (the curve's error alone).
4. Total unknown, every candidate family (--families; about a minute for the four sets, scipy
   fits). Each family of `forecast_family.py` (its definitions and its `fit`: robust relative
   least squares through the report window, several starts) fitted to every scraped sample of
   the whole recording (table 3's "all"), with table 3's "fit on all" of the forecast's own fit
   as a reference. The crossing by the forecast's rule (G over one interval below alpha,
   relative, / the run's mean cores, within HORIZON_INTERVALS intervals of the cut), read on
   every whole step (the script checks that on the forecast's own fit this reading equals
   `convergence_step`'s within a step), converted at the true speed as in table 3 (b), also
   with the truth's floor t >= one interval, and that floor on the cases whose truth is not the
   first instant the rule can judge (table 2's count), apart.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt

sys.path.insert(0, str(Path(__file__).resolve().parent))

import forecast_accuracy as fa
import forecast_family as ff
import forecast_jobs as fj

from policyd.engine.curve import CurveFit
from policyd.engine.curve_fit import fit_curves
from policyd.engine.forecast import HORIZON_INTERVALS, MIN_CORES, _curve_points, forecast
from policyd.engine.forecast_input import Histories, Settings
from policyd.engine.forecast_output import Forecasts
from policyd.engine.horizon import EPSILON, convergence_step
from policyd.model.snapshot import FloatArray

DATA = Path(__file__).resolve().parent / "data"
SETS = tuple(DATA / f"heldout{n}_curves.json" for n in ("", "2", "3", "4"))
RECENT_SHARE = 0.25  # the last quarter of the seconds seen
SHARES = tuple(np.round(np.arange(0.05, 1.0001, 0.05), 2).tolist())
"""Trailing shares of the seconds seen, among which one per set and cut is picked in hindsight."""


def _median(values: Sequence[float]) -> float:
    return float(np.median(values)) if len(values) else float("nan")


def _pct(value: float) -> str:
    return "-" if not np.isfinite(value) else f"{100 * value:.1f} %"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()


def _settings(rule: fj.Rule) -> Settings:
    return Settings(now_seconds=0.0, alpha=rule.alpha, interval_seconds=rule.interval_seconds,
                    normalization=rule.normalization)


def _forecasts(cases: list[fj.Case], rule: fj.Rule) -> Forecasts:
    return forecast(Histories.of([fa.history(c) for c in cases]), _settings(rule))


# 1. Total known: the speed bound.

@dataclass(frozen=True)
class SpeedCase:
    run: str
    fraction: float
    truth: float
    errors: dict[str, float]  # estimate -> |err| of remaining seconds
    drift: float  # the rest of the run's mean step time / the mean over every sample seen
    shares: dict[float, float]  # trailing share of the seconds seen -> |err|


def _trailing(s: fj.Samples, start: int) -> float:
    """Mean seconds per step from sample `start` to the last sample seen."""
    return float((s.times_seconds[-1] - s.times_seconds[start]) / (s.steps[-1] - s.steps[start]))


def _last_share(s: fj.Samples, share: float, moved: np.ndarray) -> float:
    """Mean seconds per step over the last `share` of the seconds seen (from the sample at or
    before its start; at least one interval with steps)."""
    start = int(np.searchsorted(s.times_seconds, s.times_seconds[-1] * (1 - share),
                                side="right")) - 1
    return _trailing(s, min(max(start, 0), int(moved[-1])))


def _trend(s: fj.Samples, remaining_steps: float) -> float:
    """Mean seconds per step over the rest of the run if the step time goes on changing along
    the straight line fitted to the past's intervals (weighted by their steps), at least half
    the past's mean: the rest's T solves T = remaining x s(t_last + T / 2) (fixed point)."""
    dt, dx = np.diff(s.times_seconds), np.diff(s.steps)
    good = dx > 0
    if good.sum() < 2:
        return _trailing(s, 0)
    mid = (s.times_seconds[1:] + s.times_seconds[:-1])[good] / 2
    slope, level = np.polyfit(mid, dt[good] / dx[good], 1, w=np.sqrt(dx[good]))
    floor, last = 0.5 * _trailing(s, 0), float(s.times_seconds[-1])
    per_step = max(level + slope * last, floor)
    for _ in range(50):
        per_step = max(level + slope * (last + remaining_steps * per_step / 2), floor)
    return float(per_step)


def speed_cases(runs: list[fj.Run]) -> list[SpeedCase]:
    cases = [c for c in fj.cases(runs, fj.RULES[0])[0] if c.basis == "total known"]
    result = _forecasts(cases, fj.RULES[0])
    out = []
    for i, case in enumerate(cases):
        s = case.samples
        assert case.total_steps is not None
        remaining = case.total_steps - float(s.steps[-1])
        future = case.truth_seconds / remaining  # the rest of the run's mean step time
        moved = np.flatnonzero(s.steps[:-1] < s.steps[-1])  # trailing stretches with steps
        errors: dict[str, float] = {}
        f = result.at(i)
        errors["forecast"] = (abs(f.remaining_seconds - case.truth_seconds) / case.truth_seconds
                              if f is not None else float("nan"))
        if moved.size == 0:
            out.append(SpeedCase(case.run, case.fraction, case.truth_seconds,
                                 {**errors, "past": np.nan, "recent": np.nan,
                                  "trend": np.nan, "hindsight": np.nan}, np.nan, {}))
            continue
        past = _trailing(s, 0)
        trailing = np.array([_trailing(s, int(j)) for j in moved])
        errors["past"] = abs(past / future - 1)
        errors["recent"] = abs(_last_share(s, RECENT_SHARE, moved) / future - 1)
        errors["trend"] = abs(_trend(s, remaining) / future - 1)
        errors["hindsight"] = float(np.min(np.abs(trailing / future - 1)))
        shares = {share: abs(_last_share(s, share, moved) / future - 1) for share in SHARES}
        out.append(SpeedCase(case.run, case.fraction, case.truth_seconds, errors, future / past,
                             shares))
    return out


def print_speed(runs: list[fj.Run], show_cases: bool) -> None:
    cases = speed_cases(runs)
    print("1. Total known, the speed bound (median |err| of remaining time; drift = the rest of "
          "the run's mean step time / the mean over every sample seen)\n")
    rows = []
    for fraction in fj.FRACTIONS:
        at = [c for c in cases if c.fraction == fraction]
        drifts = [c.drift for c in at if np.isfinite(c.drift)]
        by_share = {share: _median([c.shares[share] for c in at if c.shares])
                    for share in SHARES}
        best = min(by_share, key=lambda share: by_share[share])
        rows.append([f"{100 * fraction:.0f} %",
                     *(_pct(_median([c.errors[k] for c in at if np.isfinite(c.errors[k])]))
                       for k in ("forecast", "past", "recent", "trend")),
                     f"{_pct(by_share[best])} (last {100 * best:.0f} %)",
                     _pct(_median([c.errors["hindsight"] for c in at
                                   if np.isfinite(c.errors["hindsight"])])),
                     f"{_median(drifts):.3f}" if drifts else "-",
                     f"{min(drifts):.3f}-{max(drifts):.3f}" if drifts else "-"])
    _table(["cut", "forecast", "past mean", "last quarter", "linear trend",
            "best share for the set (hindsight)", "best trailing per case (hindsight)",
            "median drift", "drift range"], rows)
    if show_cases:
        for c in cases:
            print(f"  {c.fraction:4.2f} {c.run:26} truth {c.truth:6.1f} s  drift {c.drift:6.3f}  "
                  + "  ".join(f"{k} {100 * v:5.1f} %" for k, v in c.errors.items()))
        print()


# 2. Total unknown: the truth's own precision.

Variant = Callable[[fj.Run, fj.Rule], float | None]


def _variants() -> dict[str, Variant]:
    def smoothing(factor: float) -> Variant:
        return lambda run, rule: fj.convergence_time(
            run, rule, smoothing_steps=max(1, round(factor * fj.truth_smoothing_steps(run, rule))))

    return {
        "smoothing halved": smoothing(0.5),
        "smoothing doubled": smoothing(2.0),
        "R per interval": lambda run, rule: fj.convergence_time(run, rule, interval_cores=True),
        "unsmoothed (scale)": lambda run, rule: fj.convergence_time(run, rule, smoothing_steps=1),
        "slope 10 % off (sensitivity)": _slope_off,
    }


def _slope_off(run: fj.Run, rule: fj.Rule) -> float | None:
    """Not a reading of the truth: the farther of the true crossings at alpha / 1.1 and alpha
    x 1.1, i.e. where a forecast whose curve had the true one's improvement per interval to
    within 10 % could put it."""
    times = [fj.convergence_time(run, replace(rule, alpha=rule.alpha * k)) for k in (1 / 1.1, 1.1)]
    truth = fj.convergence_time(run, rule)
    if truth is None or any(t is None for t in times):
        return None
    return max((t for t in times if t is not None), key=lambda t: abs(t - truth))


def print_truth(runs: list[fj.Run], show_cases: bool) -> None:
    print("2. Total unknown, the truth's own precision (median over cases of |T_variant - T| / "
          "the true remaining time at the cut; in brackets the runs whose variant never "
          "converges, left out)\n")
    variants = _variants()
    for rule in fj.RULES:
        truths = {run.name: fj.convergence_time(run, rule) for run in runs}
        moved = {name: {run.name: v(run, rule) for run in runs} for name, v in variants.items()}
        cases = [c for c in fj.cases(runs, rule)[0] if c.basis == "total unknown"]
        windows = sorted({fj.truth_smoothing_steps(run, rule) for run in runs})
        print(f"{rule.name} (protocol's smoothing window {', '.join(map(str, windows))} steps)\n")
        rows = []
        for fraction in fj.FRACTIONS:
            row = [f"{100 * fraction:.0f} %"]
            for name in variants:
                errors = []
                for c in (c for c in cases if c.fraction == fraction):
                    t, tv = truths[c.run], moved[name][c.run]
                    if t is not None and tv is not None:
                        errors.append(abs(tv - t) / c.truth_seconds)
                lost = sum(1 for r in truths if truths[r] is not None and moved[name][r] is None)
                row.append(_pct(_median(errors)) + (f" ({lost})" if lost else ""))
            rows.append(row)
        _table(["cut", *variants], rows)
        first = [name for name, t in truths.items()
                 if t is not None and t < rule.interval_seconds + 1.0]
        each = ", ".join(f"{n} {t:.1f} s" if t is not None else f"{n} never"
                         for n, t in truths.items())
        print(f"T per run: {each}; converged the first instant it can be judged (T within 1 s "
              f"of one interval): {len(first)} of {sum(t is not None for t in truths.values())}\n")
        if show_cases:
            for name, t in truths.items():
                print(f"  {name:26} T {t if t is None else f'{t:6.1f}'} s  " + "  ".join(
                    f"{k} {'never' if m[name] is None else f'{m[name]:6.1f}'}"
                    for k, m in moved.items()))
            print()


# 3. Total unknown: the best-in-family bound.

def _whole_fit(runs: list[fj.Run], points: str) -> CurveFit:
    """The family fitted to each run's whole recording: every scraped sample ("all"), or the
    CURVE_POINTS the forecast would pick from it ("forecast's")."""
    histories = Histories.of([fa.history(fj.Case(
        run=run.name, basis="total unknown", rule=fj.RULES[0], fraction=1.0,
        samples=fj.scrape(run), total_steps=None, truth_seconds=0.0)) for run in runs])
    if points == "all":
        x, y = histories.steps, histories.losses
        weight = np.where(np.isfinite(y), 1.0 / (y * y), 0.0)
        x, y = np.nan_to_num(x), np.nan_to_num(y, nan=1.0)
    else:
        x, y, weight = _curve_points(histories, np.ones(len(runs), dtype=np.bool_))
    curve = fit_curves(x, y, weight, histories.smoothing_steps)
    assert curve.ok.all()
    return curve


def _cores_now(result: Forecasts, i: int) -> float:
    """The cores the forecast reads the job at (`SpeedModel.cores_now`)."""
    allocation = np.full(result.speed.cap_cores.shape, fj.ALLOCATION_CORES)
    return float(result.speed.cores_now(allocation)[i])


def _crossing(curve: CurveFit, row: int, *, x_now: float, per_interval: float, cores: float,
              rule: fj.Rule) -> float:
    return float(convergence_step(
        curve.take(np.array([row])), x_now=np.array([x_now]),
        steps_per_interval=np.array([per_interval]), cores=np.array([max(cores, MIN_CORES)]),
        alpha=rule.alpha, normalization=rule.normalization,
        horizon=np.array([max(per_interval * HORIZON_INTERVALS, 1.0)]))[0])


def _check_replica(cases: list[fj.Case], result: Forecasts, rule: fj.Rule) -> None:
    """The crossing read here on the forecast's own fit at the cut gives the forecast's
    remaining steps: the reading below is the forecast's."""
    for i, case in enumerate(cases):
        f = result.at(i)
        if f is None:
            continue
        h = Histories.of([fa.history(case)])
        x, y, weight = _curve_points(h, np.ones(1, dtype=np.bool_))
        curve = fit_curves(x, y, weight, h.smoothing_steps)
        x_now = float(case.samples.steps[-1])
        step = _crossing(curve, 0, x_now=x_now, cores=_cores_now(result, i), rule=rule,
                         per_interval=rule.interval_seconds / float(result.seconds_per_step[i]))
        assert np.isclose(step - x_now, f.remaining_steps, rtol=1e-9, atol=1e-6), (
            case.run, case.fraction, step - x_now, f.remaining_steps)


def _time_of(run: fj.Run, step: float) -> float:
    """When the run has made `step` steps (past its end: at its mean step time)."""
    ends = np.concatenate(([0.0], run.step_end_times))
    if step <= run.steps:
        return float(np.interp(step, np.arange(run.steps + 1), ends))
    return float(ends[-1] + (step - run.steps) * run.duration_seconds / run.steps)


def _true_speed(run: fj.Run, rule: fj.Rule) -> tuple[float, float]:
    """The run's mean steps per interval and mean cores: the truth's own (forecast_jobs)."""
    return run.steps * rule.interval_seconds / run.duration_seconds, run.mean_cores


def _at_true_speed(run: fj.Run, step: float, t_last: float, rule: fj.Rule) -> dict[str, float]:
    """The remaining seconds from `t_last` to the crossing at `step` on the run's recorded step
    times: as is, and with the truth's floor t >= one interval."""
    at = _time_of(run, step) if np.isfinite(step) else float("nan")
    return {"true speed": max(at - t_last, 0.0),
            "true speed, not before one interval": max(max(at, rule.interval_seconds) - t_last,
                                                       0.0)}


def print_family(runs: list[fj.Run], show_cases: bool) -> None:
    print("3. Total unknown, the best-in-family bound (the forecast's family fitted to the whole "
          "recording; median |err| of remaining time, cases in brackets)\n")
    fits = {points: _whole_fit(runs, points) for points in ("all", "forecast's")}
    row_of = {run.name: k for k, run in enumerate(runs)}
    by_name = {run.name: run for run in runs}
    for rule in fj.RULES:
        cases = [c for c in fj.cases(runs, rule)[0] if c.basis == "total unknown"]
        result = _forecasts(cases, rule)
        _check_replica(cases, result, rule)
        errors: dict[tuple[str, str, float], list[float]] = {}
        for i, case in enumerate(cases):
            run = by_name[case.run]
            x_now = float(case.samples.steps[-1])
            t_last = float(case.samples.times_seconds[-1])
            f = result.at(i)
            true_interval, true_cores = _true_speed(run, rule)
            line = []
            for points, curve in fits.items():
                k = row_of[case.run]
                step = _crossing(curve, k, x_now=x_now, per_interval=true_interval,
                                 cores=true_cores, rule=rule)
                got = _at_true_speed(run, step, t_last, rule)
                if f is not None:
                    per_step = float(result.seconds_per_step[i])
                    step_f = _crossing(curve, k, x_now=x_now, cores=_cores_now(result, i),
                                       per_interval=rule.interval_seconds / per_step, rule=rule)
                    got["forecast's speed"] = (step_f - x_now) * per_step
                for speed, remaining in got.items():
                    err = (abs(remaining - case.truth_seconds) / case.truth_seconds
                           if np.isfinite(remaining) else float("inf"))
                    errors.setdefault((points, speed, case.fraction), []).append(err)
                    line.append(f"{points}/{speed} {remaining:7.1f} s ({100 * err:6.1f} %)")
            own = "no forecast"
            if f is not None:
                err = abs(f.remaining_seconds - case.truth_seconds) / case.truth_seconds
                errors.setdefault(("forecast", "", case.fraction), []).append(err)
                own = f"{f.remaining_seconds:7.1f} s ({100 * err:6.1f} %)"
            if show_cases:
                print(f"  {rule.name:26} {case.fraction:4.2f} {case.run:26} truth "
                      f"{case.truth_seconds:6.1f} s  forecast {own}  " + "  ".join(line))
        if show_cases:
            print()
        print(f"{rule.name}\n")
        columns = [("forecast", ""), ("forecast's", "forecast's speed"),
                   ("all", "forecast's speed"), ("forecast's", "true speed"),
                   ("all", "true speed"), ("forecast's", "true speed, not before one interval")]
        rows = []
        for fraction in fj.FRACTIONS:
            row = [f"{100 * fraction:.0f} %"]
            for key in columns:
                values = errors.get((*key, fraction), [])
                row.append(f"{_pct(_median(values))} ({len(values)})")
            rows.append(row)
        _table(["cut", "the forecast", "fit on 10 points, its speed", "fit on all, its speed",
                "fit on 10 points, true speed", "fit on all, true speed",
                "10 points, true speed, t >= one interval"], rows)
        never = [r.name for r in runs if fj.convergence_time(r, rule) is None]
        if never:
            print(f"No truth (never converged in the recording): {', '.join(never)}\n")


# 4. Total unknown: every candidate family of forecast_family.py, fitted to the whole run.

OWN = "power (its fit)"
"""The forecast's own family and fit (`curve_fit.fit_curves`, table 3's "fit on all")."""


def _family_fits(runs: list[fj.Run]) -> dict[str, list[np.ndarray | None]]:
    """Per candidate family of forecast_family.py, per run, its parameters fitted (that script's
    `fit`: robust relative least squares through the report window, several starts) to every
    scraped sample of the whole recording, future included (table 3's "all")."""
    fits: dict[str, list[np.ndarray | None]] = {name: [] for name in ff.FAMILIES}
    for run in runs:
        s = fj.scrape(run)
        ok = np.isfinite(s.losses)
        for name in ff.FAMILIES:
            fits[name].append(ff.fit(name, s.steps[ok], s.losses[ok], ff.WINDOW))
    return fits


def _fit_error(run: fj.Run, name: str, q: np.ndarray | None) -> float:
    """The RMS relative residual of a whole-run fit over the samples it was fitted to."""
    if q is None:
        return float("nan")
    s = fj.scrape(run)
    ok = np.isfinite(s.losses)
    with np.errstate(all="ignore"):
        model = ff.reported(ff.FAMILIES[name][0], ff.WINDOW)(s.steps[ok], q)
    return float(np.sqrt(np.mean(((model - s.losses[ok]) / s.losses[ok]) ** 2)))


def _efficiency(reported: FloatArray, *, per_interval: float, cores: float,
                rule: fj.Rule) -> FloatArray:
    """G at every whole step x of a curve given by its reported values at steps 0, 1, ...
    (linear between them): horizon.convergence_step's G, |M(max(x - S, 0)) - M(x)|, relative to
    |M(max(x - S, 0))| under relative normalization, / R with R floored at MIN_CORES."""
    steps = np.arange(reported.size, dtype=np.float64)
    before = np.interp(np.maximum(steps - per_interval, 0.0), steps, reported)
    change = np.abs(before - reported)
    if rule.normalization == "relative":
        change = change / np.maximum(np.abs(before), EPSILON)
    return np.asarray(change / max(cores, MIN_CORES), dtype=np.float64)


def _below(g: FloatArray, alpha: float, last: int) -> npt.NDArray[np.int64]:
    """The whole steps up to `last` where G < alpha, and the first one after it if any: all
    that `_first_below` needs for a cut at or before step `last` (kept instead of G, which
    spans millions of steps)."""
    below = np.flatnonzero(g < alpha)
    return below[:int(np.searchsorted(below, last, side="right")) + 1].copy()  # not a view


def _first_below(below: npt.NDArray[np.int64], *, x_now: float, horizon: float) -> float:
    """The first whole step in [x_now, x_now + horizon] where G < alpha (NaN if none): the
    forecast's rule read on every whole step instead of its geometric grid and bisection."""
    j = int(np.searchsorted(below, np.ceil(x_now - 1e-9)))
    return float(below[j]) if j < below.size and below[j] <= x_now + horizon else float("nan")


def _grid_size(run: fj.Run, per_interval: float) -> int:
    """Whole steps that cover every cut's horizon (the last cut is at most the run's end)."""
    return run.steps + int(np.ceil(max(per_interval * HORIZON_INTERVALS, 1.0))) + 2


def print_families(runs: list[fj.Run], show_cases: bool) -> None:
    print("4. Total unknown, every candidate family of forecast_family.py fitted to the whole "
          "recording (every scraped sample; the crossing by the forecast's rule on every whole "
          "step within its horizon; median |err| of remaining time at the true speed, cases in "
          "brackets)\n")
    fits = _family_fits(runs)
    own = _whole_fit(runs, "all")
    columns = [OWN, *ff.FAMILIES]
    residuals = {name: _median([_fit_error(run, name, q)
                                for run, q in zip(runs, fits[name], strict=True)])
                 for name in ff.FAMILIES}
    print("Whole-run fit, median over runs of the RMS relative residual: "
          + ", ".join(f"{name} {100 * r:.2f} %" for name, r in residuals.items()) + "\n")
    by_name = {run.name: run for run in runs}
    speeds = ("true speed", "true speed, not before one interval")
    later = "not before one interval, truth later than its first instant"
    for rule in fj.RULES:
        cases = [c for c in fj.cases(runs, rule)[0] if c.basis == "total unknown"]
        crossings: dict[tuple[str, str], npt.NDArray[np.int64] | None] = {}
        agree, checked, worst = 0, 0, 0.0
        for k, run in enumerate(runs):
            per_interval, cores = _true_speed(run, rule)
            grid = np.arange(_grid_size(run, per_interval), dtype=np.float64)
            for name in columns:  # one curve of millions of steps at a time
                with np.errstate(all="ignore"):
                    if name == OWN:
                        reported: FloatArray | None = own.reported(grid[None, :],
                                                                   np.array([k]))[0]
                    else:
                        q = fits[name][k]
                        reported = (None if q is None else
                                    ff.reported(ff.FAMILIES[name][0], ff.WINDOW)(grid, q))
                crossings[run.name, name] = None if reported is None else _below(
                    _efficiency(reported, per_interval=per_interval, cores=cores, rule=rule),
                    rule.alpha, run.steps)
                del reported
        errors: dict[tuple[str, str, float], list[float]] = {}
        # Table 2's first-instant truths (within 1 s of one interval), which the floor makes
        # exact for any curve that calls the job converged at the cut: the rest, apart.
        first = {run.name: (t := fj.convergence_time(run, rule)) is not None
                 and t < rule.interval_seconds + 1.0 for run in runs}
        for case in cases:
            run = by_name[case.run]
            k = runs.index(run)
            per_interval, cores = _true_speed(run, rule)
            horizon = max(per_interval * HORIZON_INTERVALS, 1.0)
            x_now = float(case.samples.steps[-1])
            t_last = float(case.samples.times_seconds[-1])
            line = []
            for name in columns:
                below = crossings[run.name, name]
                if below is None:
                    line.append(f"{name} no fit")
                    continue
                step = _first_below(below, x_now=x_now, horizon=horizon)
                if name == OWN:
                    # Read by the forecast's own reading (table 3's figure), after checking that
                    # the reading on every whole step gives the same crossing within a step.
                    exact = _crossing(own, k, x_now=x_now, per_interval=per_interval,
                                      cores=cores, rule=rule)
                    checked += 1
                    same = (np.isnan(step) and np.isnan(exact)) or abs(step - exact) <= 1.0
                    agree += bool(same)
                    if np.isfinite(step) and np.isfinite(exact):
                        worst = max(worst, abs(step - exact))
                    step = exact
                shown = []
                for speed, remaining in _at_true_speed(run, step, t_last, rule).items():
                    err = (abs(remaining - case.truth_seconds) / case.truth_seconds
                           if np.isfinite(remaining) else float("inf"))
                    errors.setdefault((name, speed, case.fraction), []).append(err)
                    if speed == speeds[1] and not first[run.name]:
                        errors.setdefault((name, later, case.fraction), []).append(err)
                    shown.append(f"{remaining:7.1f} s ({100 * err:6.1f} %)")
                line.append(f"{name} {shown[0]}, floored {shown[1]}")
            if show_cases:
                print(f"  {rule.name:26} {case.fraction:4.2f} {case.run:26} truth "
                      f"{case.truth_seconds:6.1f} s  " + "  ".join(line))
        if show_cases:
            print()
        print(f"{rule.name}: the crossing on every whole step agrees with convergence_step's on "
              f"the forecast's own fit within one step in {agree} of {checked} cases (largest "
              f"gap {worst:.2f} steps)\n")
        for speed in (*speeds, later):
            rows = []
            for fraction in fj.FRACTIONS:
                medians = {name: _median(errors.get((name, speed, fraction), []))
                           for name in columns}
                best = min((n for n in columns if np.isfinite(medians[n])),
                           key=lambda n: medians[n], default=None)
                rows.append([f"{100 * fraction:.0f} %",
                             *(f"{_pct(medians[n])} ({len(errors.get((n, speed, fraction), []))})"
                               for n in columns),
                             "-" if best is None else f"{best} {_pct(medians[best])}"])
            _table([f"cut ({speed})", *columns, "best"], rows)


def report(runs: list[fj.Run], title: str, show_cases: bool, families: bool = False) -> None:
    print(f"## {title}\n")
    print_speed(runs, show_cases)
    print_truth(runs, show_cases)
    print_family(runs, show_cases)
    if families:
        print_families(runs, show_cases)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--development", action="store_true")
    parser.add_argument("--curves", type=Path, nargs="+", default=list(SETS),
                        help="held-out recordings (default: the four in benchmarks/data)")
    parser.add_argument("--cases", action="store_true")
    parser.add_argument("--families", action="store_true",
                        help="add table 4, every candidate family (slow: scipy fits)")
    args = parser.parse_args()
    if args.development:
        report(fj.development_runs(), "development (the simulator's six curves)", args.cases,
               args.families)
        return
    for path in args.curves:
        report(fj.heldout_runs(path), path.name, args.cases, args.families)


if __name__ == "__main__":
    main()
