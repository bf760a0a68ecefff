"""Which loss-curve family extrapolates best: the measurement behind the forecast's choice.

Usage: python benchmarks/forecast_family.py

On the *development* curves only (the simulator's six recordings; the held-out curves of
`forecast_accuracy.py` are never used to choose anything), with the protocol of
`forecast_jobs.py`: each run is cut at 10, 25, 50 and 75 % of its whole run, and of its life
under each convergence rule, every candidate family is fitted to the samples seen so far with
scipy's `least_squares` (relative residuals, soft-L1 robust loss, several starts), and judged on

* `tail`: the RMS of log(predicted / true) over the rest of the run (how well the family
  extrapolates the loss itself);
* `conv`: the absolute % error of the predicted remaining time until the job turns converged
  (the rule the forecast uses when total steps are unknown), at the measured step rate.

Candidates (x = steps done):
  exp       c + a exp(-x / tau)                      one time scale
  optimus   c + a / (1 + x / tau)                    Optimus's 1 / (b0 k + b1) + b2
  power     c + a (1 + x / tau) ** -gamma            shifted power law
  shoulder  c + a (1 + (x / tau) ** k) ** (-gamma/k) the simulator's family (policyd/sim)
  power0    a (1 + x / tau) ** -gamma                power law without a floor
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

sys.path.insert(0, str(Path(__file__).resolve().parent))

import forecast_jobs as fj

Family = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _exp(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    c, a, tau = q
    return c + a * np.exp(-x / tau)


def _optimus(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    c, a, tau = q
    return c + a / (1 + x / tau)


def _power(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    c, a, tau, gamma = q
    return c + a * (1 + x / tau) ** -gamma


def _shoulder(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    c, a, tau, gamma, k = q
    return c + a * (1 + (x / tau) ** k) ** (-gamma / k)


def _power0(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    a, tau, gamma = q
    return a * (1 + x / tau) ** -gamma


FAMILIES: dict[str, tuple[Family, Callable[[float, float, float], list[list[float]]],
                          tuple[list[float], list[float]]]] = {
    # name: (curve, starts(y0, y_last, x_last), (lower, upper) bounds)
    "exp": (_exp, lambda y0, yl, xl: [[0.5 * yl, y0 - 0.5 * yl, t * xl] for t in (0.1, 0.5, 2)],
            ([0, 0, 1e-3], [np.inf, np.inf, np.inf])),
    "optimus": (_optimus,
                lambda y0, yl, xl: [[0.5 * yl, y0 - 0.5 * yl, t * xl] for t in (0.01, 0.1, 1)],
                ([0, 0, 1e-3], [np.inf, np.inf, np.inf])),
    "power": (_power, lambda y0, yl, xl: [[0.5 * yl, y0 - 0.5 * yl, t * xl, g]
                                          for t in (0.01, 0.1, 1) for g in (0.5, 1.5)],
              ([0, 0, 1e-3, 1e-3], [np.inf, np.inf, np.inf, 20])),
    "shoulder": (_shoulder, lambda y0, yl, xl: [[0.5 * yl, y0 - 0.5 * yl, t * xl, g, k]
                                                for t in (0.01, 0.1) for g in (0.5, 1.5)
                                                for k in (1.0, 4.0)],
                 ([0, 0, 1e-3, 1e-3, 1.0], [np.inf, np.inf, np.inf, 20, 30])),
    "power0": (_power0, lambda y0, yl, xl: [[y0, t * xl, g] for t in (0.01, 0.1, 1)
                                            for g in (0.2, 1.0)],
               ([0, 1e-3, 1e-3], [np.inf, np.inf, 20])),
}


def reported(curve: Family, window: int) -> Family:
    """What the job's exporter shows: the mean of the last `window` step losses of `curve`
    (policyd.sim.types.running_mean), evaluated exactly on the integer steps."""

    def mean(x: np.ndarray, q: np.ndarray) -> np.ndarray:
        steps = np.arange(0.0, float(np.max(x)) + 1.0)
        losses = curve(steps, q)
        total = np.concatenate(([0.0], np.cumsum(losses[1:])))
        i = np.clip(np.round(x).astype(int), 0, steps.size - 1)
        w = np.minimum(i, window)
        with np.errstate(all="ignore"):
            return np.where(i > 0, (total[i] - total[i - w]) / np.maximum(w, 1), losses[0])

    return mean


def fit(name: str, x: np.ndarray, y: np.ndarray, window: int) -> np.ndarray | None:
    raw, starts, bounds = FAMILIES[name]
    curve = reported(raw, window)
    best = None
    for start in starts(float(y[0]), float(y[-1]), float(x[-1])):
        q0 = np.clip(start, np.asarray(bounds[0]) + 1e-9, bounds[1])
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            r = least_squares(lambda q: (curve(x, q) - y) / y, q0, bounds=bounds,
                              loss="soft_l1", f_scale=0.02, max_nfev=2000)
        if np.isfinite(r.cost) and (best is None or r.cost < best.cost):
            best = r
    return None if best is None else best.x


def predicted_convergence(curve: Family, q: np.ndarray, *, x_now: float, per_interval: float,
                          rule: fj.Rule, cores: float) -> float:
    """Steps from x_now until G < alpha on the fitted curve (inf if not within 1e4 lives)."""
    xs = x_now + np.concatenate(([0.0], np.geomspace(1.0, 30 * max(x_now, 1.0), 1500)))
    xs = xs[xs >= per_interval]
    with np.errstate(all="ignore"):
        before, after = curve(xs - per_interval, q), curve(xs, q)
        g = np.abs(before - after) / np.maximum(np.abs(before), 1e-12) / max(cores, 1e-3)
    below = np.flatnonzero(g < rule.alpha)
    return float(xs[below[0]] - x_now) if below.size else np.inf


WINDOW = fj.REPORT_WINDOW_ITERATIONS


def main() -> None:
    smoothed = "--raw" not in sys.argv
    runs = fj.development_runs()
    scores: dict[str, dict[str, list[float]]] = {f: {"tail": [], "conv": []} for f in FAMILIES}
    for rule in fj.RULES:
        cases, _ = fj.cases(runs, rule)
        by_name = {r.name: r for r in runs}
        for case in cases:
            s = case.samples
            ok = np.isfinite(s.losses) & (s.steps > 0)
            if ok.sum() < 6:
                continue
            x, y = s.steps[ok], s.losses[ok]
            run = by_name[case.run]
            rate = (s.steps[-1] - s.steps[max(0, s.steps.size - 5)]) / (
                s.times_seconds[-1] - s.times_seconds[max(0, s.steps.size - 5)])
            rest = np.arange(int(x[-1]), run.steps + 1, dtype=np.float64)
            truth_curve = run.reported[int(x[-1]):]
            for name, (raw, _, _) in FAMILIES.items():
                if not smoothed and name not in ("power", "shoulder"):
                    continue
                q = fit(name, x, y, WINDOW if smoothed else 1)
                if q is None:
                    continue
                curve = reported(raw, WINDOW if smoothed else 1)
                if case.basis == "total known" and rule is fj.RULES[0]:
                    with np.errstate(all="ignore"):
                        tail = np.log(curve(rest, q) / truth_curve)
                    scores[name]["tail"].append(float(np.sqrt(np.mean(tail**2))))
                if case.basis == "total unknown":
                    steps = predicted_convergence(curve, q, x_now=float(x[-1]),
                                                  per_interval=rate * rule.interval_seconds,
                                                  rule=rule, cores=1.0)
                    err = abs(steps / rate - case.truth_seconds) / case.truth_seconds
                    scores[name]["conv"].append(float(err))
    print("family    median RMS log tail error   median |% error| of time to convergence  (n)")
    for name, sc in scores.items():
        print(f"{name:9} {np.median(sc['tail']):10.3f} ({len(sc['tail'])})"
              f"{100 * np.median(sc['conv']):25.1f} % ({len(sc['conv'])})"
              f"   p75 {100 * np.percentile(sc['conv'], 75):.0f} %")


if __name__ == "__main__":
    main()
