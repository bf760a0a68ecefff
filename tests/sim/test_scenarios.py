"""The named scenarios: deterministic worlds shaped like the thesis's experiments."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from policyd.engine.forecasting import forecast_containers, settings_of
from policyd.engine.node_speed import node_speeds
from policyd.sim import scenarios
from policyd.sim.thesis import THESIS
from policyd.sim.world import World

THESIS_SCENARIOS = [n for n in scenarios.SCENARIOS
                    if not n.startswith(("qoe-", "deadline-", "flowcon2-"))
                    and not n.endswith("-hetero")]


@pytest.mark.parametrize("name", THESIS_SCENARIOS)
def test_every_scenario_is_deterministic_and_shaped_like_the_thesis(name: str) -> None:
    first, again = scenarios.build(name), scenarios.build(name)
    assert [(j.id, j.profile.model, j.submit_seconds) for j in first.jobs] == [
        (j.id, j.profile.model, j.submit_seconds) for j in again.jobs]
    assert all(a.profile.losses.tolist() == b.profile.losses.tolist()
               for a, b in zip(first.jobs, again.jobs, strict=True))
    assert first.thesis == THESIS[name]
    sizes = scenarios.STANDALONE_SECONDS[name]
    assert len(scenarios.CALIBRATION_TARGETS[name]) == len(sizes)
    for i, j in enumerate(first.jobs):  # each job alone on one core takes its standalone time
        alone = j.profile.iterations * j.profile.iteration_seconds(1.0) * j.work_scale
        assert alone == pytest.approx(sizes[i] if len(sizes) > 1 else sizes[0])
    submits = [j.submit_seconds for j in first.jobs]
    assert submits == sorted(submits)
    assert [j.id for j in first.jobs] == [f"job-{i + 1}" for i in range(len(first.jobs))]


@pytest.mark.parametrize(
    ("name", "jobs", "workers", "horizon", "kind"),
    [
        ("flowcon-fixed-3", 3, 1, 80, "FlowCon"),
        ("flowcon-random-5", 5, 1, 200, "FlowCon"),
        ("flowcon-random-10", 10, 1, 200, "FlowCon"),
        ("flowcon-random-15", 15, 1, 200, "FlowCon"),
        ("specon-fixed-20", 20, 4, 950, "SpeCon"),
        ("specon-random-20-vae", 20, 4, 300, "SpeCon"),
        ("specon-random-20", 20, 4, 300, "SpeCon"),
        ("specon-random-30", 30, 4, 300, "SpeCon"),
        ("specon-random-50-8w", 50, 8, 1200, "SpeCon"),
    ],
)
def test_scenario_sizes(name: str, jobs: int, workers: int, horizon: float, kind: str) -> None:
    s = scenarios.build(name)
    assert len(s.jobs) == jobs
    assert len(s.nodes) == workers
    assert max(j.submit_seconds for j in s.jobs) <= horizon
    assert s.policy.kind == kind
    assert s.baseline == ("NA" if kind == "FlowCon" else "DS")


def test_fixed_three_is_the_thesis_schedule() -> None:
    s = scenarios.build("flowcon-fixed-3")
    assert [(j.profile.model, j.submit_seconds, j.node) for j in s.jobs] == [
        ("vae", 0.0, "worker-1"), ("cnn", 40.0, "worker-1"), ("cnn", 80.0, "worker-1")]
    assert all(j.profile.source == "recorded" for j in s.jobs)
    assert s.policy.spec.alpha == 0.05  # type: ignore[attr-defined]


def test_another_seed_draws_another_world() -> None:
    a, b = scenarios.build("specon-random-20", 1), scenarios.build("specon-random-20", 2)
    assert [j.submit_seconds for j in a.jobs] != [j.submit_seconds for j in b.jobs]
    assert b.seed == 2


@pytest.mark.parametrize("name", list(scenarios.SWEEPS))
def test_sweeps_share_one_world_and_vary_one_field(name: str) -> None:
    sweep = scenarios.SWEEPS[name]
    variants = scenarios.sweep_variants(name)
    assert len(variants) == len(sweep.values)
    worlds = {tuple((j.id, j.submit_seconds) for j in s.jobs) for _, s in variants}
    assert len(worlds) == 1
    got = [getattr(s.policy.spec, sweep.field) for _, s in variants]
    assert got == [float(v) for v in sweep.values]


def test_with_policies_takes_any_kinds_and_keeps_the_world() -> None:
    flowcon = scenarios.build("flowcon-fixed-3")
    other = scenarios.specon_policy("x", alpha=0.01, interval_seconds=30)
    both = scenarios.with_policies(flowcon, [flowcon.policy, other])
    assert [p.kind for p in both.policies] == ["FlowCon", "SpeCon"]
    assert both.policy is flowcon.policy  # the report is named after the first
    assert (both.jobs, both.nodes, both.baseline) == (flowcon.jobs, flowcon.nodes, "NA")
    with pytest.raises(ValueError, match="at least one policy"):
        scenarios.with_policies(flowcon, [])


@pytest.mark.parametrize("name", ["flowcon2-4w-20", "flowcon2-8w-60-hetero",
                                  "specon-random-20-hetero", "specon-random-50-8w-hetero"])
def test_the_flowcon2_and_heterogeneous_scenarios_build(name: str) -> None:
    scenario, again = scenarios.build(name), scenarios.build(name)
    assert scenario.name == name
    assert [(j.id, j.profile.model, j.submit_seconds) for j in scenario.jobs] == [
        (j.id, j.profile.model, j.submit_seconds) for j in again.jobs]
    if name.startswith("flowcon2"):
        assert all(j.held for j in scenario.jobs) and scenario.policy.kind == "FlowCon2"
        assert len(scenario.jobs) == int(name.split("-")[2])
    if name.endswith("hetero"):
        assert len({n.speed for n in scenario.nodes}) > 1


def test_flowcon2_judges_unlabelled_workers_speeds_from_the_jobs_step_times() -> None:
    """The 8 unequal workers with no speed in their snapshots: every 150 s of a FlowCon2 run,
    the speeds judged (used or within the noise) from the step times of jobs of one model
    (`policyd.io/workload`) on several workers are within 15 % of the truth at the median
    (scaled as judged: with no speed stated, their geometric mean is the average), and the
    fast and slow workers, each used at least once, are never used on the wrong side of
    average."""
    base = scenarios.build("flowcon2-8w-60-hetero")
    nodes = tuple(replace(n, labelled=False) for n in base.nodes)
    truth = {n.name: n.core_speed for n in nodes}
    level = math.exp(sum(math.log(s) for s in truth.values()) / len(truth))
    world = World(scenarios.on_workers(base, nodes), policies=base.policies)
    policy = base.policy
    errors: list[float] = []
    judged: dict[str, list[float]] = {}
    for until in range(150, 1800, 150):
        world.run_until(float(until))
        snapshot = world.snapshot([policy])
        assert all(n.speed is None for n in snapshot.nodes)
        chosen = {c.id for c in snapshot.containers if policy.spec.selector.selects(c)}
        settings = settings_of(policy, snapshot, alpha=policy.spec.alpha,
                               interval_seconds=policy.spec.interval_seconds)
        speeds = node_speeds(snapshot, forecast_containers(settings, snapshot, chosen).by_id)
        for name, speed in speeds.judged.items():
            errors.append(abs(speed / (truth[name] / level) - 1.0))
            if name not in speeds.not_used:
                judged.setdefault(name, []).append(speed)
    assert sorted(errors)[len(errors) // 2] <= 0.15, errors
    for name in ("fast-1", "fast-2"):
        assert judged[name] and min(judged[name]) > 1.1, judged
    for name in ("slow-1", "slow-2"):
        assert judged[name] and max(judged[name]) < 0.9, judged
