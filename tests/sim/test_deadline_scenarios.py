"""The deadline scenarios: deterministic worlds of held jobs with deadlines, calibrated from the
baseline and the oracle only (the sufficient one is feasible and FCFS misses some; the
insufficient one is not), played under the Deadline policy to the end, and reported with the
deadline keys in JSON (only there)."""

from __future__ import annotations

import pytest

from policyd.sim import scenarios
from policyd.sim.deadline_scenarios import SETTINGS
from policyd.sim.report import Outcome, to_json
from policyd.sim.run import run
from policyd.sim.world import World


@pytest.mark.parametrize("name", list(SETTINGS))
def test_a_deadline_world_is_deterministic_and_drawn_from_its_setting(name: str) -> None:
    first, again = scenarios.build(name), scenarios.build(name)
    setting = SETTINGS[name]
    assert [(j.id, j.submit_seconds, j.deadline_seconds) for j in first.jobs] == [
        (j.id, j.submit_seconds, j.deadline_seconds) for j in again.jobs]
    assert (len(first.jobs), len(first.nodes)) == (setting.jobs, setting.workers)
    assert all(j.held and j.deadline_seconds is not None for j in first.jobs)
    for j in first.jobs:
        assert 0 <= j.submit_seconds <= setting.horizon_seconds
        alone = j.profile.iterations * j.profile.iteration_seconds(
            j.profile.max_parallelism) * j.work_scale
        low, high = setting.solo_seconds
        assert low - 1e-6 <= alone <= high + 1e-6
        assert j.deadline_seconds is not None
        tightness = (j.deadline_seconds - j.submit_seconds) / alone  # times rounded to 0.1 s
        assert setting.tightness[0] - 0.01 <= tightness <= setting.tightness[1] + 0.01
    assert first.policy.kind == "Deadline" and first.baseline == "FCFS"


def test_the_calibration_holds_for_the_default_worlds() -> None:
    sufficient = scenarios.build("deadline-sufficient")
    baseline, oracle = run(sufficient, "baseline"), run(sufficient, "oracle")
    assert oracle.deadlines_met == oracle.deadline_jobs
    assert baseline.deadlines_met < baseline.deadline_jobs
    insufficient = scenarios.build("deadline-insufficient")
    assert run(insufficient, "oracle").deadlines_met < len(insufficient.jobs)


def test_under_the_policy_every_held_job_is_admitted_and_finishes() -> None:
    world = scenarios.build("deadline-sufficient")
    result = run(world, "policy")
    assert len(result.jobs) == len(world.jobs)
    assert all(j.started is not None and j.started >= j.submit for j in result.jobs)
    assert all(j.finish > j.started for j in result.jobs if j.started is not None)
    assert 0 < result.allocated_cpu_used <= 1


def test_only_deadline_scenarios_report_deadline_keys() -> None:
    runs = {}
    for name in ("deadline-sufficient", "flowcon-fixed-3"):
        world = scenarios.build(name)
        (runs[name],) = to_json([Outcome(scenario=world, runs={
            s: run(world, s) for s in ("policy", "baseline", "oracle")})])["scenarios"]
    keys = {"deadline_jobs", "deadlines_met", "allocated_cpu_used", "completion_rate",
            "avg_lateness"}
    assert keys <= set(runs["deadline-sufficient"]["runs"]["baseline"])
    assert not keys & set(runs["flowcon-fixed-3"]["runs"]["baseline"])


def test_a_held_job_is_looked_at_as_it_arrives() -> None:
    """Every held job's submission wakes the Deadline policy (a Docker "create" event in the
    daemon): a tick runs at each submission instant, not up to an interval later."""
    world = scenarios.build("deadline-sufficient")
    played = World(world, policies=world.policies)
    played.run()
    ticks = {at for at, _ in played.outcomes}
    held = {j.submit_seconds for j in world.jobs if j.held}
    assert held and held <= ticks
