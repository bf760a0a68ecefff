"""Recompute `policyd.sim.scenarios.STANDALONE_SECONDS`: per scenario, how long each job would
take alone on one core, chosen so that the *baseline* run (no policy) matches the thesis.

Usage: .venv/bin/python tools/calibrate_scenarios.py [--rounds 40] [NAME ...]

Only the baseline is run, so the calibration cannot favour a policy. With one target (the
thesis's baseline makespan) every job gets the same figure, found by bisection on its log (the
makespan grows with it; submission times stay fixed). With one target per job (flowcon-fixed-3:
each job's NA completion time) the figures are found by a fixed-point iteration
s_j <- s_j * target_j / jct_j. Prints the table to paste into scenarios.py.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace

from policyd.sim import scenarios
from policyd.sim.run import run
from policyd.sim.types import RunResult, Scenario


def _baseline(base: Scenario, seconds: tuple[float, ...]) -> RunResult:
    jobs = tuple(
        replace(j, work_scale=scenarios.work_scale(j.profile, seconds[i % len(seconds)]))
        for i, j in enumerate(base.jobs)
    )
    return run(replace(base, jobs=jobs), "baseline")


def calibrate(name: str, rounds: int) -> tuple[tuple[float, ...], RunResult]:
    """The standalone seconds whose baseline meets the thesis's targets, and that baseline."""
    targets = scenarios.CALIBRATION_TARGETS[name]
    base = scenarios.build(name)
    if len(targets) == 1:
        low, high = math.log(1.0), math.log(1e5)
        for _ in range(rounds):
            middle = (low + high) / 2
            if _baseline(base, (math.exp(middle),)).makespan < targets[0]:
                low = middle
            else:
                high = middle
        seconds: tuple[float, ...] = (math.exp((low + high) / 2),)
    else:
        seconds = targets
        for _ in range(rounds):
            result = _baseline(base, seconds)
            seconds = tuple(s * t / j.jct for s, t, j in
                            zip(seconds, targets, result.jobs, strict=True))
    return seconds, _baseline(base, seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("names", nargs="*", default=list(scenarios.SCENARIOS))
    args = parser.parse_args()
    for name in args.names:
        seconds, result = calibrate(name, args.rounds)
        figures = ", ".join(f"{s:.1f}" for s in seconds)
        got = (", ".join(f"{j.jct:.1f}" for j in result.jobs) if len(seconds) > 1
               else f"{result.makespan:.1f}")
        want = ", ".join(f"{t:g}" for t in scenarios.CALIBRATION_TARGETS[name])
        print(f'    "{name}": ({figures},),  # baseline {got} s (thesis {want} s)', flush=True)


if __name__ == "__main__":
    main()
