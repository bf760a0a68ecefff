"""Deadline beside the FCFS baseline and the EDF oracle in the deadline scenarios
(benchmarks/README.md, "deadline.py").

    .venv/bin/python benchmarks/deadline.py [--seeds N] [--scenario NAME ...] [--json]

Each deadline scenario is played under its Deadline policy, under the baseline (first come first
served, equal shares, no admission control) and under the oracle (earliest deadline first with
exact knowledge of every job's work), at its default seed and, with `--seeds N`, at seeds 1..N
too (each seed draws another world from the same setting: how much the default seed's figures
depend on the draw). Printed per run: deadlines met, completion rate, average lateness of the
late jobs, average JCT, makespan and the share of allocated CPU-seconds used. The simulator is
deterministic: one run per world is the measurement.
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Any

import repository  # noqa: F401  (the repository on sys.path, after PYTHONPATH's trees)

from policyd.sim import scenarios
from policyd.sim.deadline_scenarios import PAPER, SETTINGS
from policyd.sim.run import run
from policyd.sim.types import RunResult

RUNS = ("policy", "baseline", "oracle")


def figures(result: RunResult) -> dict[str, float]:
    return {
        "deadlines_met": result.deadlines_met, "deadline_jobs": result.deadline_jobs,
        "completion_rate_pct": round(100.0 * result.deadlines_met / result.deadline_jobs, 1),
        "avg_lateness_seconds": round(result.avg_lateness, 1),
        "avg_jct_seconds": round(result.avg_jct, 1),
        "makespan_seconds": round(result.makespan, 1),
        "allocated_cpu_used_pct": round(100.0 * result.allocated_cpu_used, 1),
    }


def measure(name: str, seed: int) -> dict[str, Any]:
    world = scenarios.build(name, seed)
    return {"scenario": name, "seed": seed,
            **{strategy: figures(run(world, strategy)) for strategy in RUNS}}


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| scenario | seed | run | met | completion | lateness of late jobs | avg JCT | "
             "makespan | allocated CPU used |", "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        for strategy in RUNS:
            f = r[strategy]
            label = "Deadline" if strategy == "policy" else strategy
            lines.append(
                f"| {r['scenario']} | {r['seed']} | {label} | {f['deadlines_met']}/"
                f"{f['deadline_jobs']} | {f['completion_rate_pct']:.1f} % | "
                f"{f['avg_lateness_seconds']:.0f} s | {f['avg_jct_seconds']:.0f} s | "
                f"{f['makespan_seconds']:.0f} s | {f['allocated_cpu_used_pct']:.1f} % |")
    return "\n".join(lines)


def spread(rows: list[dict[str, Any]], name: str) -> str:
    """Over the seeds of `name`: completion points above the baseline and below the oracle,
    and allocated CPU used, as median [min, max]."""
    mine = [r for r in rows if r["scenario"] == name]

    def stat(values: list[float]) -> str:
        return f"{statistics.median(values):.1f} [{min(values):.1f}, {max(values):.1f}]"

    over = [r["policy"]["completion_rate_pct"] - r["baseline"]["completion_rate_pct"]
            for r in mine]
    under = [r["oracle"]["completion_rate_pct"] - r["policy"]["completion_rate_pct"]
             for r in mine]
    used = [r["policy"]["allocated_cpu_used_pct"] for r in mine]
    full = sum(r["policy"]["deadlines_met"] == r["policy"]["deadline_jobs"] for r in mine)
    return (f"{name} over {len(mine)} worlds: completion vs baseline {stat(over)} points, "
            f"oracle minus policy {stat(under)} points, allocated CPU used {stat(used)} %, "
            f"every deadline met in {full}; paper: {PAPER[name]['note']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", action="append", choices=list(SETTINGS))
    parser.add_argument("--seeds", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    names = args.scenario or list(SETTINGS)
    rows = []
    for name in names:
        default = scenarios.SCENARIOS[name].seed
        seeds = [default] + [s for s in range(1, args.seeds + 1) if s != default]
        rows += [measure(name, seed) for seed in seeds]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(table(rows))
    if args.seeds:
        for name in names:
            print(spread(rows, name))


if __name__ == "__main__":
    main()
