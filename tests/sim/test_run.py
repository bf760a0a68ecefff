"""Whole runs: the three strategies, determinism, and the policies acting inside the world."""

from __future__ import annotations

import pytest

from policyd.sim.run import run
from policyd.sim.types import Scenario
from tests.sim.test_world import flowcon, job, profile, scenario, specon


def thesis_fixed_three(mode: str = "shares") -> Scenario:
    """Section 6.1.3's shape: three jobs on one node at 0, 40 and 80 s (VAE slow, MNISTs fast)."""
    vae = profile("vae", iterations=1000, max_parallelism=4.0, parallel=0.9, rate=0.002)
    mnist = profile("mnist", iterations=400, max_parallelism=4.0, parallel=0.9, rate=0.02,
                    scale=5.0)
    return scenario(job("vae", vae), job("mnist-p", mnist, submit=40.0),
                    job("mnist-t", mnist, submit=80.0), nodes={"w1": 4.0},
                    policy=flowcon(mode=mode))


def converging_next_to_busy_ones() -> Scenario:
    """SpeCon: `a` converges early on w1, next to two progressing jobs; w2 holds only one."""
    quick = profile("quick", iterations=300, rate=0.05, scale=0.2)
    slow = profile("slow", iterations=2000, rate=0.002, scale=10.0)
    return scenario(job("a", quick, node="w1"), job("b", slow, node="w1"),
                    job("c", slow, node="w1"), job("d", slow, node="w2"),
                    nodes={"w1": 2.0, "w2": 2.0}, policy=specon())


def test_runs_are_deterministic() -> None:
    for make in (thesis_fixed_three, converging_next_to_busy_ones):
        for strategy in ("policy", "baseline", "oracle"):
            first = run(make(), strategy, record_timeline=True)
            again = run(make(), strategy, record_timeline=True)
            assert first == again, (make.__name__, strategy)


def test_the_oracle_serves_the_shortest_job_first() -> None:
    # 10, 20 and 30 s of work on one core. Equal sharing finishes them at 30, 50, 60 s;
    # shortest-remaining-first at 10, 30, 60 s.
    jobs = [job(f"j{n}", profile(iterations=n)) for n in (10, 20, 30)]
    baseline = run(scenario(*jobs), "baseline")
    oracle = run(scenario(*jobs), "oracle")
    assert [j.finish for j in baseline.jobs] == pytest.approx([30.0, 50.0, 60.0])
    assert [j.finish for j in oracle.jobs] == pytest.approx([10.0, 30.0, 60.0])
    assert oracle.avg_jct <= baseline.avg_jct


def test_the_oracle_beats_the_baseline_on_the_contended_thesis_node() -> None:
    baseline = run(thesis_fixed_three(), "baseline")
    oracle = run(thesis_fixed_three(), "oracle")
    assert oracle.avg_jct <= baseline.avg_jct
    assert [j.nodes for j in oracle.jobs] == [j.nodes for j in baseline.jobs]


@pytest.mark.parametrize(("mode", "vae_cores"), [("shares", 0.8), ("quota", 1.0)])
def test_flowcon_changes_allocations_on_the_thesis_shape(mode: str, vae_cores: float) -> None:
    policy = run(thesis_fixed_three(mode), "policy", record_timeline=True)
    baseline = run(thesis_fixed_three(mode), "baseline", record_timeline=True)
    at_45 = {s.time: s for s in policy.timeline}[45.0].jobs
    # Between 40 and 45 s vae ran at 0.25 (256 shares against 1024: 0.8 of 4 cores; or a
    # quota of 1 core) and mnist-p took the rest; without a policy they split 2 : 2.
    assert at_45["vae"][2] == 0.25
    assert at_45["vae"][1] == pytest.approx(vae_cores)
    assert at_45["mnist-p"][1] == pytest.approx(4.0 - vae_cores)
    assert {s.time: s for s in baseline.timeline}[45.0].jobs["vae"][1:] == pytest.approx(
        (2.0, 1.0))
    assert policy.jobs != baseline.jobs
    assert policy.jobs[1].jct < baseline.jobs[1].jct  # the first MNIST finishes sooner


def test_specon_moves_the_converged_job_to_the_least_loaded_worker() -> None:
    policy = run(converging_next_to_busy_ones(), "policy")
    baseline = run(converging_next_to_busy_ones(), "baseline")
    assert policy.migrations == 1
    assert {j.id: j.nodes for j in policy.jobs}["a"] == ("w1", "w2")
    assert baseline.migrations == 0
    assert all(len(j.nodes) == 1 for j in baseline.jobs)


def test_an_explicit_policy_overrides_the_scenarios() -> None:
    scen = thesis_fixed_three()
    default = run(scen, "policy")
    slower = run(scen, "policy", policies=[flowcon(interval_seconds=60.0)])
    assert default != slower


def test_ties_seed_replays_the_same_jobs_under_other_placement_luck() -> None:
    # Four unpinned jobs on three equal workers: the default scheduler's scores tie, so where
    # they land is drawn; `ties_seed` draws it from another seed, the jobs staying the same.
    s = scenario(*(job(f"j{i}", submit=float(i)) for i in range(4)),
                 nodes={"w1": 1.0, "w2": 1.0, "w3": 1.0})
    assert run(s, "baseline", ties_seed=s.seed) == run(s, "baseline")
    placements = {tuple(j.nodes for j in run(s, "baseline", ties_seed=t).jobs)
                  for t in range(10)}
    assert len(placements) > 1
    for t in range(3):
        result = run(s, "oracle", ties_seed=t)
        assert [(j.id, j.submit) for j in result.jobs] == \
            [(j.id, j.submit_seconds) for j in s.jobs]
