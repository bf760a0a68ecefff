"""QoE targets and stopping delivered jobs in the simulated cluster (benchmarks/README.md,
"qoe.py"; issue 15).

    .venv/bin/python benchmarks/qoe.py [targets|stop|all] [--baseline-oracle-only] [--json]
        [--scenario NAME ...] [--policy FILE] [--converged-below X]

`targets`: every qoe-* scenario under the QoE policy (its own, or the first of `--policy`),
the baseline (equal shares) and the oracle (the most targets met, every speed known): targets
met, the mean share of each job's run its rate met its target (time satisfied), CPU-limit
changes per job and the most direction reversals of one job's limit after its first minute.
`--baseline-oracle-only` plays only the baseline and the oracle.

`stop`: every thesis scenario under its own policy as shipped (`on_converged: notify`, the
default, which changes nothing) and with `on_converged: stop`: makespan, average JCT, the
CPU-hours the stops saved, and the loss given up, per stopped job (final loss against the loss
its whole run ends at) and its mean and worst over the scenario. Beside it, the bound a policy
cannot beat at that loss: each job cut exactly where its loss first comes within 2 % of its
final loss for good, known from its curve ("cut at 2 %"): how much shorter the makespan could
be while giving up no more than 2 %.

The simulator is deterministic: one run per scenario is the measurement.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import repository  # noqa: F401  (the repository on sys.path, after PYTHONPATH's trees)

from policyd.engine.spec import PolicyDocument
from policyd.policy import load_policies
from policyd.sim import scenarios
from policyd.sim.report import qoe_summary
from policyd.sim.run import run
from policyd.sim.types import JobSpec, Profile, RunResult, Scenario

QOE = ("qoe-fixed-8", "qoe-random-12", "qoe-random-32-4w", "qoe-burst-16-2w")
CUT_LOSS = 0.02


def targets_row(run_: RunResult) -> dict[str, Any]:
    """The counts, and the time satisfied and churn `simulate --output json` reports."""
    qoe = qoe_summary(run_) or {"time_satisfied": None, "limit_changes_per_job": 0.0,
                                "most_direction_changes": 0, "jobs_over_two_reversals": 0}
    satisfied = qoe["time_satisfied"]
    return {"met": run_.targets_met, "jobs": run_.target_jobs,
            "time_satisfied": None if satisfied is None else round(satisfied, 3),
            "limit_changes_per_job": round(qoe["limit_changes_per_job"], 1),
            "max_direction_changes": qoe["most_direction_changes"],
            "jobs_over_two_reversals": qoe["jobs_over_two_reversals"],
            "makespan": round(run_.makespan, 1), "avg_jct": round(run_.avg_jct, 1)}


def targets(names: list[str], policy: PolicyDocument | None, *,
            only_reference: bool) -> list[dict[str, Any]]:
    rows = []
    for name in names:
        scenario = scenarios.build(name)
        row: dict[str, Any] = {"scenario": name,
                               "baseline": targets_row(run(scenario, "baseline")),
                               "oracle": targets_row(run(scenario, "oracle"))}
        if not only_reference:
            chosen = [policy] if policy is not None else list(scenario.policies)
            row["policy"] = targets_row(run(scenario, "policy", policies=chosen))
            row["policy"]["per_job"] = [
                {"id": j.id, "declared": j.target.declared, "achieved": round(
                    j.target.achieved, 4), "met": j.target.met,
                 "time_satisfied": j.target.time_satisfied,
                 "direction_changes": j.target.direction_changes}
                for j in run(scenario, "policy", policies=chosen).jobs if j.target is not None]
        rows.append(row)
    return rows


def with_response(scenario: Scenario, response: str, below: float | None) -> Scenario:
    policies = []
    for p in scenario.policies:
        spec = {**p.spec.model_dump(mode="json", by_alias=True), "on_converged": response}
        if below is not None:
            spec["converged_below"] = below
        policies.append(scenarios.policy_document(p.kind, p.name, spec))
    return scenarios.with_policies(scenario, policies)


def cut_iterations(profile: Profile, within: float) -> int:
    """The first iteration from which the reported loss stays within `within` of its final."""
    reported = profile.reported
    final = float(reported[-1])
    above = np.flatnonzero(np.abs(reported - final) > within * abs(final))
    return int(above[-1] + 1) if above.size else 0


def cut_scenario(scenario: Scenario, within: float) -> Scenario:
    """Every job's run truncated where its loss comes within `within` of its final for good:
    the same jobs with the tail of their curve removed."""
    jobs = []
    for j in scenario.jobs:
        p = j.profile
        keep = max(cut_iterations(p, within), 2)
        short = replace(p, losses=p.losses[:keep + 1]) if keep < p.iterations else p
        jobs.append(JobSpec(id=j.id, profile=short, submit_seconds=j.submit_seconds,
                            work_scale=j.work_scale, node=j.node,
                            reports_total=j.reports_total, labels=j.labels))
    return replace(scenario, jobs=tuple(jobs))


def loss_given_up(run_: RunResult) -> list[float]:
    return [(j.final_loss - j.full_loss) / abs(j.full_loss) for j in run_.jobs
            if j.stopped is not None]


def change(value: float, base: float) -> float:
    return 100.0 * (value - base) / base if base else 0.0


def stop(names: list[str], below: float | None) -> list[dict[str, Any]]:
    rows = []
    for name in names:
        scenario = scenarios.build(name)
        notify = run(with_response(scenario, "notify", below), "policy")
        stopped = run(with_response(scenario, "stop", below), "policy")
        cut = run(cut_scenario(scenario, CUT_LOSS), "policy")
        given = loss_given_up(stopped)
        rows.append({
            "scenario": name, "kind": scenario.policy.kind,
            "makespan_notify": round(notify.makespan, 1),
            "makespan_stop": round(stopped.makespan, 1),
            "makespan_change_pct": round(change(stopped.makespan, notify.makespan), 1),
            "avg_jct_change_pct": round(change(stopped.avg_jct, notify.avg_jct), 1),
            "core_hours_saved": round((notify.core_seconds - stopped.core_seconds) / 3600, 3),
            "core_seconds_saved_pct": round(-change(stopped.core_seconds,
                                                    notify.core_seconds), 1),
            "stopped": len(given), "jobs": len(stopped.jobs),
            "loss_given_up_mean_pct": round(100 * statistics.mean(given), 2) if given else 0.0,
            "loss_given_up_max_pct": round(100 * max(given), 2) if given else 0.0,
            "cut_at_2pct_makespan_change_pct": round(change(cut.makespan, notify.makespan), 1),
        })
    return rows


def targets_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| scenario | run | met | time satisfied | limit changes / job | most reversals "
             "| jobs > 2 reversals |", "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        for label in ("baseline", "oracle", "policy"):
            if label not in r:
                continue
            f = r[label]
            ts = "-" if f["time_satisfied"] is None else f"{100 * f['time_satisfied']:.0f} %"
            lines.append(f"| {r['scenario']} | {label} | {f['met']} / {f['jobs']} | {ts} | "
                         f"{f['limit_changes_per_job']:g} | {f['max_direction_changes']} | "
                         f"{f['jobs_over_two_reversals']} |")
    return "\n".join(lines)


def stop_table(rows: list[dict[str, Any]]) -> str:
    lines = ["| scenario | makespan notify -> stop | avg JCT | core-hours saved | stopped | "
             "loss given up mean / max | cut at 2 % (bound) |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['scenario']} | {r['makespan_notify']:.0f} -> {r['makespan_stop']:.0f} s "
            f"({r['makespan_change_pct']:+.1f} %) | {r['avg_jct_change_pct']:+.1f} % | "
            f"{r['core_hours_saved']:.3f} ({r['core_seconds_saved_pct']:.1f} %) | "
            f"{r['stopped']} / {r['jobs']} | {r['loss_given_up_mean_pct']:.2f} / "
            f"{r['loss_given_up_max_pct']:.2f} % | {r['cut_at_2pct_makespan_change_pct']:+.1f} % |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", nargs="?", choices=("targets", "stop", "all"), default="all")
    parser.add_argument("--scenario", action="append")
    parser.add_argument("--policy", type=Path, help="the QoE policy file (its first policy)")
    parser.add_argument("--baseline-oracle-only", action="store_true")
    parser.add_argument("--converged-below", type=float)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    policy = load_policies(args.policy)[0] if args.policy else None
    out: dict[str, Any] = {}
    if args.what in ("targets", "all"):
        names = [n for n in (args.scenario or QOE) if n in QOE]
        out["targets"] = targets(names, policy, only_reference=args.baseline_oracle_only)
    if args.what in ("stop", "all") and not args.baseline_oracle_only:
        names = [n for n in (args.scenario or [n for n, e in scenarios.SCENARIOS.items()
                                               if e.default]) if n not in QOE]
        out["stop"] = stop(names, args.converged_below)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    if "targets" in out:
        print(targets_table(out["targets"]))
    if "stop" in out:
        print(stop_table(out["stop"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
