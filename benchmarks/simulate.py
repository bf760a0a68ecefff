"""How fast the simulator plays the thesis's scenarios, and what it finds (issue 3's targets).

Usage: python benchmarks/simulate.py [--repeat 3]

Times (median of --repeat, in one process): specon-random-50-8w policy + baseline (target
<= 10 s), and the whole default set with its three runs each (target <= 60 s). Then prints, per
scenario, the policy's change against the baseline (the default scheduler's scoring) next to
the thesis's, and against the second baseline (the fewest-jobs placement), as a Markdown table
for benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import median_seconds

from policyd.sim import scenarios
from policyd.sim.experiment import run_outcome
from policyd.sim.report import Outcome, change_pct
from policyd.sim.run import run


def _default_set() -> list[Outcome]:
    return [run_outcome(scenarios.build(name)) for name, entry in scenarios.SCENARIOS.items()
            if entry.default]


def _thesis(outcome: Outcome, key: str) -> str:
    t = outcome.scenario.thesis
    if f"baseline_{key}" in t and f"policy_{key}" in t:
        base, policy = float(t[f"baseline_{key}"]), float(t[f"policy_{key}"])  # type: ignore[arg-type]
        return f"{change_pct(policy, base):+.1f}%"
    if f"{key}_change_pct" in t:
        value = t[f"{key}_change_pct"]
        return f"-{value}%" if isinstance(value, float | int) else f"-({value})%"
    return "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    big = scenarios.build("specon-random-50-8w")
    seconds = median_seconds(lambda: (run(big, "policy"), run(big, "baseline")), args.repeat)
    print(f"specon-random-50-8w policy + baseline: {seconds:.2f} s (median of {args.repeat})")
    seconds = median_seconds(_default_set, args.repeat)
    print(f"default set, policy + baseline + oracle each: {seconds:.2f} s "
          f"(median of {args.repeat})\n")
    print("| scenario | avg JCT policy / baseline / oracle (s) | avg JCT change (thesis) "
          "| makespan change (thesis) | jobs faster (thesis) | migrations "
          "| vs fewest-jobs placement: avg JCT / makespan |")
    print("|---|---|---|---|---|---|---|")
    for o in _default_set():
        p, b, x = o.runs["policy"], o.runs["baseline"], o.runs["oracle"]
        f = o.runs["baseline_fewest"]
        faster = sum(1 for pj, bj in zip(p.jobs, b.jobs, strict=True) if pj.jct < bj.jct)
        print(f"| {o.scenario.name} | {p.avg_jct:.0f} / {b.avg_jct:.0f} / {x.avg_jct:.0f} "
              f"| {change_pct(p.avg_jct, b.avg_jct):+.1f}% ({_thesis(o, 'avg_jct')}) "
              f"| {change_pct(p.makespan, b.makespan):+.1f}% ({_thesis(o, 'makespan')}) "
              f"| {faster}/{len(p.jobs)} ({o.scenario.thesis.get('jobs_faster', 'n/a')}) "
              f"| {p.migrations} | {change_pct(p.avg_jct, f.avg_jct):+.1f}% / "
              f"{change_pct(p.makespan, f.makespan):+.1f}% |")


if __name__ == "__main__":
    main()
