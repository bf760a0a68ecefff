"""FlowCon2, SpeCon and Predictive against both default-scheduler baselines and the oracle, on
equal and unequal workers (benchmarks/README.md, "flowcon2.py"; issue 16).

    .venv/bin/python benchmarks/flowcon2.py [--scenario NAME ...] [--json]

Every scenario is played seven times in one world (its jobs drawn once from its seed): FlowCon2
at its defaults (`order: growth`, FlowCon's limits), FlowCon2 with `order: remaining` (each
worker's limits by Predictive's plan, otherwise its defaults: what the flowcon2-* scenarios
play, `scenarios.flowcon2_policy`), SpeCon (the thesis's settings), Predictive
(policies/predictive.yaml, moves on), the baseline (kube-scheduler's default scoring), the
second baseline (the fewest-jobs rule) and the oracle (per-worker SRPT on the baseline's
placement). Every job is handed over held: a run without a policy that admits starts it at its
submission on the default scheduler's node, exactly as if it were not held, so only FlowCon2's
runs differ by it. The simulator is deterministic: one run per scenario is the measurement.
Then the issue's targets on flowcon2-8w-60-hetero, each reached or not, for both FlowCon2 runs.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import repository  # noqa: F401  (the repository on sys.path, after PYTHONPATH's trees)

from policyd.policy import load_policies
from policyd.sim import scenarios
from policyd.sim.run import run
from policyd.sim.types import RunResult, Scenario

ROOT = Path(__file__).resolve().parents[1]
REMAINING = "FlowCon2 (order: remaining)"
DEFAULT = ("flowcon2-4w-20", "flowcon2-8w-60-hetero", "specon-random-20",
           "specon-random-20-hetero", "specon-random-50-8w", "specon-random-50-8w-hetero")


def change(value: float, base: float) -> float:
    return 100.0 * (value - base) / base if base else 0.0


def held(scenario: Scenario) -> Scenario:
    return replace(scenario, jobs=tuple(replace(j, held=True) for j in scenario.jobs))


def row(result: RunResult, kube: RunResult, fewest: RunResult,
        oracle: RunResult) -> dict[str, Any]:
    oracle_gain = kube.avg_jct - oracle.avg_jct
    return {
        "avg_jct": round(result.avg_jct, 1), "makespan": round(result.makespan, 1),
        "avg_jct_vs_kube_pct": round(change(result.avg_jct, kube.avg_jct), 1),
        "makespan_vs_kube_pct": round(change(result.makespan, kube.makespan), 1),
        "avg_jct_vs_fewest_pct": round(change(result.avg_jct, fewest.avg_jct), 1),
        "makespan_vs_fewest_pct": round(change(result.makespan, fewest.makespan), 1),
        "oracle_share_pct": (round(100.0 * (kube.avg_jct - result.avg_jct) / oracle_gain)
                             if oracle_gain > 0 else None),
        "migrations": result.migrations,
    }


def measure(name: str) -> dict[str, Any]:
    scenario = held(scenarios.build(name))
    predictive = load_policies(ROOT / "policies" / "predictive.yaml")
    runs = {
        "FlowCon2": run(scenario, "policy",
                        policies=[scenarios.flowcon2_policy(name, order="growth")]),
        REMAINING: run(scenario, "policy",
                       policies=[scenarios.flowcon2_policy(name, order="remaining")]),
        "SpeCon": run(scenario, "policy", policies=[scenarios.specon_policy(
            name, alpha=0.01, interval_seconds=30)]),
        "Predictive": run(scenario, "policy", policies=predictive),
        "baseline (kube)": run(scenario, "baseline"),
        "baseline (fewest)": run(scenario, "baseline_fewest"),
        "oracle": run(scenario, "oracle"),
    }
    kube, fewest, oracle = runs["baseline (kube)"], runs["baseline (fewest)"], runs["oracle"]
    return {"scenario": name, "workers": len(scenario.nodes), "jobs": len(scenario.jobs),
            "runs": {label: row(r, kube, fewest, oracle) for label, r in runs.items()}}


def targets(results: list[dict[str, Any]]) -> list[str]:
    by_name = {r["scenario"]: r["runs"] for r in results}
    hetero, homo = by_name.get("flowcon2-8w-60-hetero"), by_name.get("flowcon2-4w-20")
    if hetero is None:
        return []
    lines = []
    oracle_gain = -hetero["oracle"]["avg_jct_vs_kube_pct"]
    for label in ("FlowCon2", REMAINING):
        fc2 = hetero[label]
        lines += [
            f"{label}: avg JCT {fc2['avg_jct_vs_kube_pct']:+.1f} % vs kube (target <= -30 %): "
            f"{'reached' if fc2['avg_jct_vs_kube_pct'] <= -30 else 'NOT reached'}",
            f"{label}: makespan {fc2['makespan_vs_kube_pct']:+.1f} % vs kube (target <= "
            f"-18 %): {'reached' if fc2['makespan_vs_kube_pct'] <= -18 else 'NOT reached'}",
            f"{label}: of the oracle's avg-JCT gain ({-oracle_gain:+.1f} %): "
            f"{fc2['oracle_share_pct']} % (target >= 60 %): "
            f"{'reached' if (fc2['oracle_share_pct'] or 0) >= 60 else 'NOT reached'}",
        ]
        if homo is not None:
            other = homo[label]["makespan_vs_kube_pct"]
            lines.append(f"{label}: makespan gain larger than on flowcon2-4w-20 "
                         f"({other:+.1f} %): "
                         f"{'reached' if fc2['makespan_vs_kube_pct'] < other else 'NOT reached'}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", action="append")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = [measure(name) for name in (args.scenario or DEFAULT)]
    if args.json:
        print(json.dumps({"scenarios": results, "targets": targets(results)}, indent=1))
        return
    print("| scenario | run | avg JCT (s) | makespan (s) | vs kube: avg JCT / makespan "
          "| vs fewest: avg JCT / makespan | of the oracle's gain | migrations |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        for label, f in r["runs"].items():
            share = "-" if f["oracle_share_pct"] is None else f"{f['oracle_share_pct']} %"
            print(f"| {r['scenario']} | {label} | {f['avg_jct']:.0f} | {f['makespan']:.0f} "
                  f"| {f['avg_jct_vs_kube_pct']:+.1f} % / {f['makespan_vs_kube_pct']:+.1f} % "
                  f"| {f['avg_jct_vs_fewest_pct']:+.1f} % / {f['makespan_vs_fewest_pct']:+.1f} % "
                  f"| {share} | {f['migrations']} |")
    for line in targets(results):
        print(f"- {line}")


if __name__ == "__main__":
    main()
