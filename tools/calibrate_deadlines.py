"""How the deadline scenarios' settings and default seeds were chosen: the baseline and the
deadline oracle only, never the policy (policyd/sim/deadline_scenarios.py).

Usage: .venv/bin/python tools/calibrate_deadlines.py [--seeds 20]

For each deadline scenario and seeds 1..N, it runs the FCFS baseline and the EDF oracle and
prints how many deadlines each meets. The settings were accepted when, over seeds 1-20, the
oracle met every deadline of `deadline-sufficient` (the cluster can meet them all) while the
baseline missed some, and the oracle missed some of `deadline-insufficient` (no schedule meets
them all). The default seed of each is the smallest seed whose baseline meets the median number
of deadlines over those seeds: a typical draw, chosen without the policy.
"""

from __future__ import annotations

import argparse
import statistics

from policyd.sim import scenarios
from policyd.sim.deadline_scenarios import SETTINGS
from policyd.sim.run import run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    args = parser.parse_args()
    for name in SETTINGS:
        rows = []
        for seed in range(1, args.seeds + 1):
            world = scenarios.build(name, seed)
            baseline, oracle = run(world, "baseline"), run(world, "oracle")
            rows.append((seed, baseline.deadlines_met, oracle.deadlines_met))
            print(f"{name} seed {seed}: baseline {baseline.deadlines_met}/"
                  f"{baseline.deadline_jobs}, oracle {oracle.deadlines_met}/"
                  f"{oracle.deadline_jobs}")
        median = statistics.median_low(b for _, b, _ in rows)
        chosen = min(seed for seed, b, _ in rows if b == median)
        print(f"{name}: baseline median {median}; default seed {chosen} "
              f"(scenarios.SCENARIOS has {scenarios.SCENARIOS[name].seed})")


if __name__ == "__main__":
    main()
