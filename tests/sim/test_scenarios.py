"""The named scenarios: deterministic worlds shaped like the thesis's experiments."""

from __future__ import annotations

import pytest

from policyd.sim import scenarios
from policyd.sim.thesis import THESIS

THESIS_SCENARIOS = [n for n in scenarios.SCENARIOS if not n.startswith(("qoe-", "deadline-"))]


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
