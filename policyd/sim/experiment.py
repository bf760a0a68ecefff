"""Run one scenario under its policy, its baseline and the oracle: the three runs a report
compares. They share the scenario's world (every random draw is made when it is built)."""

from __future__ import annotations

from policyd.sim.report import STRATEGIES, Outcome
from policyd.sim.run import run
from policyd.sim.types import RunResult, Scenario


def run_outcome(scenario: Scenario, *, label: str = "", timeline: bool = False) -> Outcome:
    """The policy, baseline and oracle runs of `scenario`."""
    runs: dict[str, RunResult] = {
        strategy: run(scenario, strategy, record_timeline=timeline) for strategy in STRATEGIES
    }
    return Outcome(scenario=scenario, runs=runs, label=label)
