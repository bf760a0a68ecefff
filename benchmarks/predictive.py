"""Predictive beside FlowCon or SpeCon, the baseline and the oracle, in every simulated scenario
(benchmarks/README.md, "predictive.py").

    .venv/bin/python benchmarks/predictive.py [--policy FILE] [--scenario NAME ...] [--json]

Each scenario is played four times in the same world (its jobs drawn once from its seed): under
its own policy (the thesis's FlowCon or SpeCon), under the Predictive policy of `--policy`
(policies/predictive.yaml by default), under its baseline (NA or DS) and under the oracle.
Printed per run: average JCT, makespan, average time to quality (TTQ) and the worst job's
slowdown, each against the baseline, and the share of the oracle's average-JCT gain each policy
reaches. The simulator is deterministic: one run per scenario is the measurement.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import repository  # noqa: F401  (the repository on sys.path, after PYTHONPATH's trees)

from policyd.policy import load_policies
from policyd.sim import scenarios
from policyd.sim.run import run
from policyd.sim.types import RunResult

ROOT = Path(__file__).resolve().parents[1]


def change(value: float, base: float) -> float:
    return 100.0 * (value - base) / base if base else 0.0


def figures(result: RunResult, baseline: RunResult, oracle: RunResult) -> dict[str, float]:
    gain = baseline.avg_jct - result.avg_jct
    oracle_gain = baseline.avg_jct - oracle.avg_jct
    return {
        "avg_jct": round(result.avg_jct, 1),
        "avg_jct_change_pct": round(change(result.avg_jct, baseline.avg_jct), 1),
        "makespan_change_pct": round(change(result.makespan, baseline.makespan), 1),
        "ttq_change_pct": round(change(statistics.mean(j.time_to_quality for j in result.jobs),
                                       statistics.mean(j.time_to_quality
                                                       for j in baseline.jobs)), 1),
        "worst_job_pct": round(max(change(p.jct, b.jct) for p, b in
                                   zip(result.jobs, baseline.jobs, strict=True)), 1),
        "oracle_share_pct": round(100.0 * gain / oracle_gain, 0) if oracle_gain > 0 else 0.0,
        "migrations": result.migrations,
    }


def measure(name: str, predictive: Any) -> dict[str, Any]:
    scenario = scenarios.build(name)
    baseline = run(scenario, "baseline")
    oracle = run(scenario, "oracle")
    own = run(scenario, "policy")
    started = time.perf_counter()
    pred = run(scenario, "policy", policies=[predictive])
    return {
        "scenario": name, "own_kind": scenario.policy.kind, "baseline_kind": scenario.baseline,
        "baseline_avg_jct": round(baseline.avg_jct, 1),
        "own": figures(own, baseline, oracle), "predictive": figures(pred, baseline, oracle),
        "oracle": figures(oracle, baseline, oracle),
        "predictive_run_seconds": round(time.perf_counter() - started, 2),
    }


def table(rows: list[dict[str, Any]]) -> str:
    head = ("| scenario | run | avg JCT | makespan | TTQ | worst job | of the oracle's gain | "
            "migrations |\n|---|---|---:|---:|---:|---:|---:|---:|")
    lines = [head]
    for r in rows:
        for label, key in ((r["own_kind"], "own"), ("Predictive", "predictive"),
                           ("oracle", "oracle")):
            f = r[key]
            lines.append(f"| {r['scenario']} | {label} | {f['avg_jct_change_pct']:+.1f} % | "
                         f"{f['makespan_change_pct']:+.1f} % | {f['ttq_change_pct']:+.1f} % | "
                         f"{f['worst_job_pct']:+.1f} % | {f['oracle_share_pct']:.0f} % | "
                         f"{f['migrations']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", default=str(ROOT / "policies" / "predictive.yaml"))
    parser.add_argument("--scenario", action="append")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    (predictive,) = [p for p in load_policies(args.policy) if p.kind == "Predictive"]
    names = args.scenario or list(scenarios.SCENARIOS)
    rows = [measure(name, predictive) for name in names]
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"against each scenario's baseline (negative: sooner); policy {args.policy}")
        print(table(rows))


if __name__ == "__main__":
    main()
