"""Judging unlabelled workers' speeds from the jobs' step times: how close, and what it is worth
to FlowCon2 (benchmarks/README.md, "node_speed.py"; issue 16).

    .venv/bin/python benchmarks/node_speed.py [--scenario NAME] [--seeds N] [--json]

Each seed (the scenario's own, then 1..N) draws the scenario's jobs and plays FlowCon2 (its
defaults, every job held as in flowcon2.py) three ways on the same unequal workers:

* stated: every worker carries its `policyd.io/speed` (the scenario as shipped);
* judged: no worker does (`labelled: false`); FlowCon2 judges them from the step times of
  jobs of one model (`policyd.io/workload`) on several workers (`policyd.engine.node_speed`);
* average: no worker does and nothing is judged (every worker taken as average, what FlowCon2
  did before judging was built; the benchmark swaps the judging out, policyd has no switch).

beside the default-scheduler baseline. It also samples the judged speeds every 300 s of the
judged run (a snapshot and the forecasts FlowCon2 makes from it) against the truth, scaled as
the judging scales them (their geometric mean is the average, no speed being stated): the
error of every judged figure (those within the noise too, which FlowCon2 then takes as
average), how often the truth lies within one and two of the errors the judgements state, the
share of worker samples judged, and of those used.
The simulator is deterministic: one run per seed and way is the measurement.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

import repository  # noqa: F401  (the repository on sys.path, after PYTHONPATH's trees)

sys.path.insert(0, str(Path(__file__).resolve().parent))

from flowcon2 import change, held  # the FlowCon2 benchmark's: every job held, % against a base

from policyd.engine import flowcon2, node_speed
from policyd.engine.forecasting import forecast_containers, settings_of
from policyd.model import Snapshot
from policyd.sim import scenarios
from policyd.sim.run import run
from policyd.sim.types import Scenario
from policyd.sim.world import World

SAMPLE_SECONDS = 300.0
WAYS = ("stated", "judged", "average")


def unlabelled(scenario: Scenario) -> Scenario:
    return replace(scenario, nodes=tuple(replace(n, labelled=False) for n in scenario.nodes))


def never_judged(snapshot: Snapshot, forecasts: Any = None) -> node_speed.NodeSpeeds:
    return node_speed.node_speeds(snapshot)


def accuracy(scenario: Scenario) -> dict[str, float]:
    """The judged speeds against the truth, sampled along a judged run."""
    policy = scenario.policies[0]
    truth = {n.name: n.core_speed for n in scenario.nodes}
    level = math.exp(sum(math.log(s) for s in truth.values()) / len(truth))
    world = World(scenario, policies=scenario.policies)
    errors: list[float] = []
    standard: list[float] = []  # each judgement's error in its stated standard errors
    judged = used = seen = 0
    at = SAMPLE_SECONDS
    while not world.finished:
        world.run_until(at)
        at += SAMPLE_SECONDS
        snapshot = world.snapshot([policy])
        chosen = [c for c in snapshot.containers if policy.spec.selector.selects(c)]
        settings = settings_of(policy, snapshot, alpha=policy.spec.alpha,
                               interval_seconds=policy.spec.interval_seconds)
        speeds = node_speed.node_speeds(
            snapshot, forecast_containers(settings, snapshot, {c.id for c in chosen}).by_id)
        seen += len(speeds.notes)
        judged += len(speeds.judged)
        used += len(set(speeds.judged) - speeds.not_used)
        for n, s in speeds.judged.items():
            errors.append(abs(s / (truth[n] / level) - 1.0))
            standard.append(abs(math.log(s / (truth[n] / level))) / speeds.log_errors[n])
    return {"samples": seen, "judged_pct": 100.0 * judged / max(seen, 1),
            "used_pct": 100.0 * used / max(seen, 1),
            "median_error_pct": 100.0 * statistics.median(errors) if errors else math.nan,
            "p90_error_pct": (100.0 * statistics.quantiles(errors, n=10)[-1]
                              if len(errors) > 1 else math.nan),
            "within_1_error": sum(z <= 1 for z in standard), "within_2_errors": sum(
                z <= 2 for z in standard), "judgements": len(standard)}


def measure(name: str, seed: int) -> dict[str, Any]:
    stated = held(scenarios.build(name, seed))
    blind = unlabelled(stated)
    policy = [scenarios.flowcon2_policy(name, order="growth")]  # as recorded
    stated = replace(stated, policies=tuple(policy))
    blind = replace(blind, policies=tuple(policy))
    kube = run(stated, "baseline")
    runs = {"stated": run(stated, "policy"), "judged": run(blind, "policy")}
    with mock.patch.object(flowcon2, "node_speeds", never_judged):
        runs["average"] = run(blind, "policy")
    return {"seed": seed, "kube_avg_jct": round(kube.avg_jct, 1),
            **{f"{k}_avg_jct_pct": round(change(r.avg_jct, kube.avg_jct), 1)
               for k, r in runs.items()},
            **{f"{k}_makespan_pct": round(change(r.makespan, kube.makespan), 1)
               for k, r in runs.items()},
            **{f"{k}_migrations": r.migrations for k, r in runs.items()},
            "accuracy": accuracy(blind)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="flowcon2-8w-60-hetero")
    parser.add_argument("--seeds", type=int, default=10,
                        help="the scenario's own seed and seeds 1..N (default 10)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    shipped = scenarios.SCENARIOS[args.scenario].seed
    rows = []
    for seed in [shipped, *(s for s in range(1, args.seeds + 1) if s != shipped)]:
        rows.append(measure(args.scenario, seed))
        print(f"seed {seed} done ({len(rows)} of {args.seeds + 1})", file=sys.stderr,
              flush=True)
    if args.json:
        print(json.dumps({"scenario": args.scenario, "seeds": rows}, indent=1))
        return
    print(f"{args.scenario}: FlowCon2 against the default-scheduler baseline, its own seed "
          f"({shipped}, first row) and seeds 1-{args.seeds}")
    print("| seed | stated: avg JCT / makespan | judged | average | judged speeds: "
          "median / p90 error, judged / used |")
    print("|---:|---:|---:|---:|---:|")
    for r in rows:
        a = r["accuracy"]
        print(f"| {r['seed']} "
              f"| {r['stated_avg_jct_pct']:+.1f} % / {r['stated_makespan_pct']:+.1f} %"
              f" | {r['judged_avg_jct_pct']:+.1f} % / {r['judged_makespan_pct']:+.1f} %"
              f" | {r['average_avg_jct_pct']:+.1f} % / {r['average_makespan_pct']:+.1f} %"
              f" | {a['median_error_pct']:.1f} % / {a['p90_error_pct']:.1f} %, "
              f"{a['judged_pct']:.0f} % / {a['used_pct']:.0f} % |")
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0] if k.endswith("_pct")}
    print(f"| median | {med['stated_avg_jct_pct']:+.1f} % / {med['stated_makespan_pct']:+.1f} % "
          f"| {med['judged_avg_jct_pct']:+.1f} % / {med['judged_makespan_pct']:+.1f} % "
          f"| {med['average_avg_jct_pct']:+.1f} % / {med['average_makespan_pct']:+.1f} % | |")
    total = sum(r["accuracy"]["judgements"] for r in rows)
    print(f"the truth within one stated error in "
          f"{100 * sum(r['accuracy']['within_1_error'] for r in rows) / max(total, 1):.0f} % "
          f"of the {total} judgements, within two in "
          f"{100 * sum(r['accuracy']['within_2_errors'] for r in rows) / max(total, 1):.0f} %")
    print("migrations, median over seeds: " + ", ".join(
        f"{way} {statistics.median(r[f'{way}_migrations'] for r in rows):g}" for way in WAYS))
    for metric in ("avg_jct", "makespan"):
        best = {way: sum(r[f"{way}_{metric}_pct"] < min(r[f"{o}_{metric}_pct"] for o in WAYS
                                                        if o != way) for r in rows)
                for way in WAYS}
        print(f"{metric}: lowest on " + ", ".join(f"{n} seed(s) {way}" for way, n in best.items()))

if __name__ == "__main__":
    main()
