"""How accurate the forecast of remaining time is, on real training curves (issue 13, 5a).

Usage: python benchmarks/forecast_accuracy.py [--development | --curves FILE] [--cases]

Plays each held-out recording (`benchmarks/data/heldout_curves.json`, made by
`tools/record_heldout.py`, never used to fit or tune anything) as a monitored job, cuts it at 10,
25, 50 and 75 % of its life and compares the forecast's remaining time with the truth, by the
protocol of `forecast_jobs.py` (fixed before the forecast first ran on these curves): life and
truth are the run's end when total steps are known, and the time the true smoothed curve turns
converged under the policy's alpha and interval when they are not. Prints per rule, basis and
cut: the median absolute % error of remaining time, how often the truth lies in [low, high],
and how many cases got a forecast (the others got a note, counted apart).
`--development` runs the same protocol on the simulator's six curves (what the forecast was
developed on); `--curves FILE` on another recording of `tools/record_heldout.py` (the second
held-out set, `benchmarks/data/heldout2_curves.json`). `--cases` prints every case. Also
checks the speed model on each recording's speed check (1 thread, then 2 threads).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import forecast_jobs as fj

from policyd.engine.forecast import forecast
from policyd.engine.forecast_input import Histories, History, Settings
from policyd.engine.speed import fit_speed


def history(case: fj.Case) -> History:
    s = case.samples
    last = float(s.times_seconds[-1])
    return History(times_seconds=s.times_seconds - last, losses=s.losses, steps=s.steps,
                   cores=s.cores, allocation_cores=fj.ALLOCATION_CORES,
                   max_cores=fj.NODE_CORES,
                   total_steps=None if case.total_steps is None else float(case.total_steps))


def evaluate(runs: list[fj.Run], show_cases: bool) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for rule in fj.RULES:
        cases, never = fj.cases(runs, rule)
        settings = Settings(now_seconds=0.0, alpha=rule.alpha,
                            interval_seconds=rule.interval_seconds,
                            normalization=rule.normalization)
        result = forecast(Histories.of([history(c) for c in cases]), settings)
        for basis in ("total known", "total unknown"):
            for fraction in fj.FRACTIONS:
                errors, inside, notes = [], [], []
                for i, case in enumerate(cases):
                    if case.basis != basis or case.fraction != fraction:
                        continue
                    f = result.at(i)
                    if f is None:
                        notes.append(f"{case.run}: {result.notes[i]}")
                        continue
                    truth = case.truth_seconds
                    errors.append(abs(f.remaining_seconds - truth) / truth)
                    inside.append(f.low_seconds <= truth <= f.high_seconds)
                    if show_cases:
                        print(f"  {rule.name:26} {basis:13} {fraction:4.2f} {case.run:26} "
                              f"truth {truth:7.1f} s  forecast {f.remaining_seconds:7.1f} s "
                              f"[{f.low_seconds:7.1f}, {f.high_seconds:7.1f}]  "
                              f"err {100 * errors[-1]:6.1f} %")
                rows.append({
                    "rule": rule.name, "basis": basis, "cut": fraction,
                    "median_ape": float(np.median(errors)) if errors else float("nan"),
                    "coverage": float(np.mean(inside)) if inside else float("nan"),
                    "forecasts": len(errors), "notes": notes,
                    "never_converged": never if basis == "total unknown" else [],
                })
    return rows


def _fitted_speed(steps: np.ndarray, seconds: np.ndarray, cores: np.ndarray,
                  allocation: float) -> tuple[float, float]:
    """(seconds per step at 2 cores, parallel fraction) of the speed model fitted to one job's
    intervals, its allocation during the last of them being `allocation` cores."""
    m = fit_speed(steps_made=steps[None, :], seconds=seconds[None, :], cores=cores[None, :],
                  allocation_cores=np.array([allocation]), max_cores=np.array([2.0]))
    return float(m.seconds_per_step(np.array([2.0]))[0]), float(m.parallel_fraction[0])


def speed_check(path: Path) -> None:
    """Predict each recording's 2-thread step time from its 1-thread stretch (the prior alone),
    and fit p from both stretches."""
    document = json.loads(path.read_text())
    print("\nSpeed model on the speed checks (median ms per step; 1-thread stretch -> 2 threads):")
    for name, job in document["jobs"].items():
        check = job["speed_check"]
        threads = np.asarray(check["threads"])
        wall = np.asarray(check["wall_microseconds"], dtype=np.float64) * 1e-6
        cpu = np.asarray(check["cpu_microseconds"], dtype=np.float64) * 1e-6
        # Intervals of 10 steps, as a scraper would see them.
        chunks = wall.size // 10
        w = wall[: chunks * 10].reshape(chunks, 10).sum(1)
        c = cpu[: chunks * 10].reshape(chunks, 10).sum(1)
        t = threads[: chunks * 10].reshape(chunks, 10)[:, 0]
        one = t == 1
        measured_2 = float(np.median(wall[threads == 2]))
        measured_1 = float(np.median(wall[threads == 1]))

        prior_2, _ = _fitted_speed(np.where(one, 10.0, np.nan), w, c / w, 1.0)
        _, p_both = _fitted_speed(np.full(w.size, 10.0), w, c / w, 2.0)
        used = float(c[one].sum() / w[one].sum())
        print(f"  {name:26} 1 thread {1e3 * measured_1:6.2f} ({used:4.2f} cores used)  "
              f"2 threads {1e3 * measured_2:6.2f}"
              f" (p = {2 * (1 - measured_2 / measured_1):5.2f})  predicted from 1 thread "
              f"{1e3 * prior_2:6.2f} ({100 * (prior_2 / measured_2 - 1):+5.1f} %)  "
              f"p fitted on both {p_both:4.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--development", action="store_true")
    parser.add_argument("--curves", type=Path, default=fj.HELDOUT,
                        help="a held-out recording (default: benchmarks/data/heldout_curves.json)")
    parser.add_argument("--cases", action="store_true")
    args = parser.parse_args()
    runs = fj.development_runs() if args.development else fj.heldout_runs(args.curves)
    rows = evaluate(runs, args.cases)
    print(f"\n{'rule':26} {'basis':13} {'cut':>4}  {'median |err|':>12}  {'in range':>8}  "
          f"forecasts")
    for row in rows:
        print(f"{row['rule']:26} {row['basis']:13} {row['cut']:4.2f}  "
              f"{100 * row['median_ape']:10.1f} %  {100 * row['coverage']:6.0f} %  "
              f"{row['forecasts']}  {'; '.join(row['notes'])}")
    for rule in fj.RULES:
        never = next(r["never_converged"] for r in rows
                     if r["rule"] == rule.name and r["basis"] == "total unknown")
        if never:
            print(f"{rule.name}: never converged in the recording (no truth): {never}")
    if not args.development:
        speed_check(args.curves)


if __name__ == "__main__":
    main()
