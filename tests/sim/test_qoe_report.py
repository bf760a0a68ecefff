"""What `simulate --output json` says of a run with QoE targets: time satisfied and allocation
churn over its QoE jobs, beside the counts; a run without QoE targets says nothing more."""

from __future__ import annotations

import pytest

from policyd.sim import scenarios
from policyd.sim.report import Outcome, qoe_summary, to_json
from policyd.sim.run import run
from policyd.sim.types import JobResult, RunResult, TargetResult


def target(*, satisfied: float | None, reversals: int, changes: int) -> TargetResult:
    return TargetResult(kind="qoe", declared="steps_per_second>=2", value=2.0, achieved=2.1,
                        met=True, time_satisfied=satisfied, direction_changes=reversals,
                        limit_changes=changes)


def run_with(*targets: TargetResult | None) -> RunResult:
    jobs = tuple(JobResult(id=f"job-{n}", model="m", submit=0.0, finish=10.0,
                           time_to_quality=5.0, nodes=("w1",), target=t)
                 for n, t in enumerate(targets, 1))
    return RunResult(strategy="policy", jobs=jobs, migrations=0)


def test_the_summary_averages_time_satisfied_and_counts_the_churn() -> None:
    loss = TargetResult(kind="loss", declared="policyd.io/target-loss=0.1", value=0.1,
                        achieved=0.2, met=False)
    got = qoe_summary(run_with(target(satisfied=0.5, reversals=3, changes=6),
                               target(satisfied=1.0, reversals=1, changes=2),
                               target(satisfied=None, reversals=0, changes=1), loss, None))
    assert got == {"time_satisfied": pytest.approx(0.75),
                   "limit_changes_per_job": pytest.approx(3.0),
                   "most_direction_changes": 3, "jobs_over_two_reversals": 1}


def test_a_run_without_qoe_targets_has_no_summary() -> None:
    assert qoe_summary(run_with(None, None)) is None


def test_simulate_json_reports_the_summary_of_a_qoe_run() -> None:
    scenario = scenarios.build("qoe-fixed-8")
    runs = {"policy": run(scenario, "policy"), "baseline": run(scenario, "baseline")}
    got = to_json([Outcome(scenario=scenario, runs=runs)])["scenarios"][0]["runs"]
    for name, result in runs.items():
        assert got[name]["qoe"] == qoe_summary(result)
    assert got["baseline"]["qoe"]["limit_changes_per_job"] == 0  # no policy, no change
