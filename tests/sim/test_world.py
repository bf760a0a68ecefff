"""The simulated world: job speeds, CPU sharing, actions, scrapes and the policy schedule.

Profiles are made by hand (exponential decays with chosen rates, iteration times chosen so that
finishing times are easy to compute); no recorded curve is needed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from policyd.engine.flowcon import FlowConPolicy
from policyd.engine.spec import API_VERSION, PolicyDocument
from policyd.engine.specon import SpeConPolicy
from policyd.model import Action, Decision, MarkMigrated, Migrate, SetCpu
from policyd.sim import scenarios, world
from policyd.sim.job import quality_iteration
from policyd.sim.report import STRATEGIES, Outcome, to_json
from policyd.sim.run import run
from policyd.sim.source import EPOCH_SECONDS, Ring
from policyd.sim.types import JobSpec, NodeSpec, Profile, Scenario
from policyd.sim.world import World

# --- builders ---------------------------------------------------------------------------------


def profile(model: str = "m", *, iterations: int = 100, seconds: float = 1.0,
            parallel: float = 1.0, max_parallelism: float = 1.0, rate: float = 0.05,
            floor: float = 1.0, scale: float = 1.0) -> Profile:
    """Loss floor + scale * exp(-rate * i); `seconds` per iteration on one core."""
    i = np.arange(iterations + 1, dtype=np.float64)
    return Profile(model=model, source="fitted", losses=floor + scale * np.exp(-rate * i),
                   iteration_seconds_1core=seconds, parallel_fraction=parallel,
                   max_parallelism=max_parallelism)


def job(job_id: str, prof: Profile | None = None, *, submit: float = 0.0,
        node: str | None = None, work_scale: float = 1.0) -> JobSpec:
    return JobSpec(id=job_id, profile=prof or profile(), submit_seconds=submit, node=node,
                   work_scale=work_scale)


def flowcon(**spec: Any) -> FlowConPolicy:
    return FlowConPolicy.model_validate({
        "apiVersion": API_VERSION, "kind": "FlowCon", "metadata": {"name": "fc"},
        "spec": {"alpha": 0.05, "interval_seconds": 20.0, "beta": 2.0, **spec}})


def specon(**spec: Any) -> SpeConPolicy:
    return SpeConPolicy.model_validate({
        "apiVersion": API_VERSION, "kind": "SpeCon", "metadata": {"name": "sc"},
        "spec": {"alpha": 0.01, "interval_seconds": 30.0, **spec}})


def scenario(*jobs: JobSpec, nodes: Mapping[str, float] | None = None,
             policy: PolicyDocument | None = None, scrape: float = 5.0,
             migration: float = 5.0) -> Scenario:
    return Scenario(
        name="test", description="hand-made", seed=0,
        nodes=tuple(NodeSpec(name=n, cores=c) for n, c in (nodes or {"w1": 1.0}).items()),
        jobs=jobs, policies=(policy or flowcon(),), baseline="NA", scrape_seconds=scrape,
        migration_seconds=migration)


def decision(*actions: Action, dry_run: bool = False) -> Decision:
    return Decision(policy="fc", kind="FlowCon", time=0.0, actions=actions, assessments=(),
                    next_interval=20.0, dry_run=dry_run)


def set_cpu(container: str, fraction: float, mode: str, node: str = "w1") -> SetCpu:
    return SetCpu(policy="fc", container=container, node=node, fraction=fraction,
                  mode=mode, reason="test")  # type: ignore[arg-type]


# --- speed and sharing ------------------------------------------------------------------------


def test_a_job_alone_runs_at_its_max_parallelism_and_finishes_when_predicted() -> None:
    # 2 usable cores of 4: t(2) = 1 * (0.5 + 0.5 / 2) = 0.75 s, times work_scale 2 = 1.5 s.
    prof = profile(iterations=100, seconds=1.0, parallel=0.5, max_parallelism=2.0)
    world = World(scenario(job("a", prof, work_scale=2.0), nodes={"w1": 4.0}))
    world.run_until(10.0)
    assert world.job("a").cores == 2.0
    assert world.job("a").progress == pytest.approx(10.0 / 1.5)
    world.run()
    result = world.result("baseline").jobs[0]
    assert result.finish == pytest.approx(150.0)
    # 95% of the reported loss change (the exporter's 100-step running mean), by definition:
    reported = prof.reported
    target = reported[0] - 0.95 * (reported[0] - reported[-1])
    first = next(i for i, value in enumerate(reported) if value <= target)
    assert quality_iteration(reported) == first
    assert result.time_to_quality == pytest.approx(first * 1.5)
    assert result.nodes == ("w1",)


def test_two_equal_jobs_on_one_core_take_twice_as_long() -> None:
    alone = World(scenario(job("a")))
    alone.run()
    together = World(scenario(job("a"), job("b")))
    together.run()
    assert alone.result("baseline").jobs[0].finish == pytest.approx(100.0)
    assert [j.finish for j in together.result("baseline").jobs] == pytest.approx([200.0, 200.0])


def test_quota_caps_a_job_even_when_the_node_is_idle() -> None:
    world = World(scenario(job("a", profile(max_parallelism=4.0)), nodes={"w1": 4.0}))
    world.run_until(1.0)
    assert world.job("a").cores == 4.0
    world.apply(set_cpu("a", 0.25, "quota"), decision())
    assert world.job("a").cores == pytest.approx(1.0)
    assert world.snapshot([]).nodes[0].cpu_usage == pytest.approx(1.0)
    assert world.job("a").markers.last_action_at == EPOCH_SECONDS + 1.0


def test_shares_only_weight_a_job() -> None:
    world = World(scenario(job("a", profile(max_parallelism=4.0)), nodes={"w1": 4.0}))
    world.run_until(1.0)
    world.apply(set_cpu("a", 0.25, "shares"), decision())
    assert world.job("a").cores == 4.0  # alone: a weight limits nothing
    both = World(scenario(job("a", profile(max_parallelism=4.0)),
                          job("b", profile(max_parallelism=4.0)), nodes={"w1": 4.0}))
    both.run_until(1.0)
    both.apply(set_cpu("a", 0.25, "shares"), decision())
    assert (both.job("a").cores, both.job("b").cores) == pytest.approx((0.8, 3.2))


def test_a_dry_run_policy_decides_but_changes_nothing() -> None:
    # vae converges next to a new job: FlowCon limits it to the floor, but only on paper.
    vae = profile("vae", iterations=2000, max_parallelism=4.0, rate=0.001)
    mnist = profile("mnist", iterations=2000, max_parallelism=4.0, rate=0.02, scale=5.0)
    policy = flowcon(dry_run=True)
    world = World(scenario(job("vae", vae), job("mnist", mnist, submit=40.0),
                           nodes={"w1": 4.0}, policy=policy), policies=[policy])
    world.run_until(40.0)
    _, outcome = world.outcomes[-1]
    assert [(a.container, a.fraction) for a in outcome.decision.actions] == [("vae", 0.25)]
    assert outcome.decision.dry_run and outcome.failed == ()
    assert world.job("vae").fraction == 1.0  # the tick routed it to the dry-run actuator
    assert (world.job("vae").cores, world.job("mnist").cores) == pytest.approx((2.0, 2.0))


def test_fewest_jobs_placement_takes_the_least_allocated_node() -> None:
    world = World(scenario(
        job("one", profile(max_parallelism=1.0)), job("two", profile(max_parallelism=2.0),
                                                       submit=1.0),
        job("three", submit=2.0), job("pinned", submit=3.0, node="w2"),
        nodes={"w1": 4.0, "w2": 4.0}), placement="fewest")
    world.run_until(3.0)
    # one -> w1 (tie on everything: name); two -> w2 (fewest jobs); three -> w1 (1 job each,
    # w1 uses 1 core, w2 uses 2); pinned stays where its spec says.
    assert [world.job(j).node for j in ("one", "two", "three", "pinned")] == [
        "w1", "w2", "w1", "w2"]


def test_a_faster_worker_trains_faster_and_its_speed_is_in_the_snapshot() -> None:
    prof = profile(iterations=100, max_parallelism=1.0)
    nodes = (NodeSpec(name="fast", cores=1.0, speed=2.0), NodeSpec(name="plain", cores=1.0))
    world = World(replace(scenario(job("a", prof, node="fast"), job("b", prof, node="plain")),
                          nodes=nodes))
    world.run()
    finish = {j.id: j.finish for j in world.result("baseline").jobs}
    assert finish == pytest.approx({"a": 50.0, "b": 100.0})  # 1 s per iteration on speed 1
    world = World(replace(scenario(job("a", prof, node="fast")), nodes=nodes))
    world.run_until(1.0)
    assert {n.name: n.speed for n in world.snapshot([]).nodes} == {"fast": 2.0, "plain": None}


def test_default_scheduler_placement_is_seeded_and_prefers_the_emptier_node() -> None:
    prof = profile(iterations=100, max_parallelism=1.0)
    jobs = [job(f"j{i}", prof, submit=float(i)) for i in range(6)]
    nodes = (NodeSpec(name="big", cores=8.0), NodeSpec(name="small", cores=1.0))
    first = World(replace(scenario(*jobs), nodes=nodes))
    first.run_until(6.0)
    again = World(replace(scenario(*jobs), nodes=nodes))
    again.run_until(6.0)
    placed = [first.job(j.id).node for j in jobs]
    assert placed == [again.job(j.id).node for j in jobs]  # the same seed, the same ties
    # 100 m CPU per pod is 1/80 of big and 1/10 of small: big scores higher for every pod here
    assert placed.count("big") >= 5


# --- migrations and markers -------------------------------------------------------------------


def test_a_migration_pauses_the_job_and_keeps_its_progress() -> None:
    prof = profile(iterations=100)
    world = World(scenario(job("a", prof, node="w1"), nodes={"w1": 1.0, "w2": 1.0}))
    world.run_until(10.0)
    world.apply(Migrate(policy="sc", container="a", from_node="w1", to_node="w2",
                        reason="test", converged_at=EPOCH_SECONDS + 10.0), decision())
    a = world.job("a")
    assert (a.phase, a.cores, world.migrations) == ("migrating", 0.0, 1)
    world.run_until(14.9)
    assert a.progress == pytest.approx(10.0)
    assert world.snapshot([]).containers == ()  # no container while checkpointing
    world.run_until(15.0)
    assert (a.phase, a.node, a.started_at, a.cores) == ("running", "w2", 15.0, 1.0)
    assert a.markers.migrated and not a.markers.rebalanced
    assert a.markers.converged_at == EPOCH_SECONDS + 10.0
    world.run_until(20.0)
    (container,) = world.snapshot([]).containers
    assert container.started_at == EPOCH_SECONDS + 15.0
    # The loss continues from the checkpoint: 10 iterations at 10 s and at 15 s, 15 at 20 s.
    assert container.evaluation.values[-3:].tolist() == pytest.approx(
        prof.reported[[10, 10, 15]].tolist())
    # A rebalancing move back keeps converged_at (the action's None) and marks rebalanced.
    world.apply(Migrate(policy="sc", container="a", from_node="w2", to_node="w1",
                        reason="test", rebalance=True), decision())
    assert a.markers.rebalanced and a.markers.converged_at == EPOCH_SECONDS + 10.0
    world.run()
    result = world.result("policy")
    assert result.migrations == 2
    assert result.jobs[0].finish == pytest.approx(110.0)  # 100 s of work + two 5 s pauses
    assert result.jobs[0].nodes == ("w1", "w2", "w1")


def test_mark_migrated_writes_markers_only() -> None:
    world = World(scenario(job("a")))
    world.run_until(3.0)
    world.apply(MarkMigrated(policy="sc", container="a", node="w1",
                             converged_at=EPOCH_SECONDS + 3.0, reason="stays"), decision())
    a = world.job("a")
    assert (a.phase, a.node, world.migrations) == ("running", "w1", 0)
    assert a.markers.migrated and a.markers.converged_at == EPOCH_SECONDS + 3.0
    assert a.markers.last_action_at == EPOCH_SECONDS + 3.0


@pytest.mark.parametrize(("action", "error"), [
    (set_cpu("ghost", 0.5, "shares"), LookupError),
    (set_cpu("a", 0.5, "shares", node="w2"), ValueError),
    (Migrate(policy="sc", container="a", from_node="w1", to_node="w9", reason="x"),
     LookupError),
], ids=["unknown container", "wrong node", "unknown target node"])
def test_impossible_actions_raise(action: Action, error: type[Exception]) -> None:
    world = World(scenario(job("a", node="w1"), nodes={"w1": 1.0, "w2": 1.0}))
    world.run_until(1.0)
    with pytest.raises(error):
        world.apply(action, decision())


# --- what the policy sees ---------------------------------------------------------------------


def test_evaluation_holds_the_previous_value_between_iterations() -> None:
    prof = profile(iterations=10, seconds=12.0)  # one iteration every 12 s on its one core
    world = World(scenario(job("a", prof)))
    world.run_until(40.0)
    (container,) = world.snapshot([]).containers
    times = container.evaluation.times_seconds - EPOCH_SECONDS
    assert times.tolist() == [0, 5, 10, 15, 20, 25, 30, 35, 40]
    # Iterations complete at 12, 24, 36 s: each scrape returns the loss of the last one done.
    assert container.evaluation.values.tolist() == prof.reported[
        [0, 0, 0, 1, 1, 2, 2, 2, 3]].tolist()


def test_cpu_usage_averages_each_scrape_interval() -> None:
    world = World(scenario(job("a"), job("b", submit=2.5)))
    world.run_until(10.0)
    a, b = world.snapshot([]).containers
    # a: 1 core for 2.5 s, then half a core for 2.5 s; b: half a core while it existed.
    assert (a.cpu_usage.times_seconds - EPOCH_SECONDS).tolist() == [5.0, 10.0]
    assert a.cpu_usage.values.tolist() == pytest.approx([0.75, 0.5])
    assert b.cpu_usage.values.tolist() == pytest.approx([0.5, 0.5])
    assert b.started_at == EPOCH_SECONDS + 2.5


def test_the_snapshot_describes_jobs_nodes_and_the_interval() -> None:
    policy = flowcon(window_intervals=2)
    world = World(scenario(job("a", profile("vae", iterations=1000)), nodes={"w1": 2.0}))
    world.run_until(200.0)
    snap = world.snapshot([policy])  # a policy the world does not run: its base interval
    assert snap.time == EPOCH_SECONDS + 200.0
    assert [(n.name, n.cpu_capacity, n.cpu_usage) for n in snap.nodes] == [("w1", 2.0, 1.0)]
    (c,) = snap.containers
    assert (c.id, c.name, c.node, c.namespace, c.cpu_allocation) == (
        "a", "a-vae", "w1", "training", 1.0)
    assert dict(c.labels) == {"app": "train", "model": "vae", "policyd.io/workload": "vae"}
    assert snap.intervals == {"fc": 20.0}
    # Only the history the policy reads: 2 intervals of 20 s plus one interval of margin.
    assert c.evaluation.times_seconds[0] == EPOCH_SECONDS + 140.0
    assert len(c.evaluation) == 13


def test_the_snapshot_carries_the_policys_current_interval() -> None:
    policy = flowcon()
    world = World(scenario(job("a", profile(iterations=1000)), policy=policy), policies=[policy])
    world.run_until(200.0)
    # One job that has stopped improving is all CL: FlowCon backs off (20 -> 40 -> 80 s).
    decided = world.outcomes[-1][1].decision.next_interval
    assert decided > 20.0
    assert world.snapshot([policy]).intervals == {"fc": decided}


def test_the_ring_keeps_the_newest_samples() -> None:
    ring = Ring(3)
    for t in range(10):
        ring.append(float(t), 10.0 * t)
    times, values = ring.since(-math.inf)
    assert (times.tolist(), values.tolist(), len(ring)) == ([7, 8, 9], [70, 80, 90], 3)
    assert ring.since(8.5)[0].tolist() == [9.0]


# --- the policy's schedule --------------------------------------------------------------------


def tick_times(world: World) -> list[float]:
    return [at for at, _ in world.outcomes]


def test_flowcon_ticks_at_once_when_a_job_starts() -> None:
    policy = flowcon()
    world = World(scenario(job("a", profile(iterations=1000)),
                           job("b", profile(iterations=1000), submit=7.0), policy=policy),
                  policies=[policy])
    world.run_until(50.0)
    # Algorithm 2: a tick when each job starts (0 and 7 s), then every next_interval (20 s).
    assert tick_times(world) == [0.0, 7.0, 27.0, 47.0]


def test_flowcon_ticks_when_a_job_finishes() -> None:
    policy = flowcon()
    world = World(scenario(job("a", profile(iterations=10)), policy=policy), policies=[policy])
    world.run()
    assert tick_times(world) == [0.0, 10.0]


def test_specon_ticks_only_on_its_interval() -> None:
    policy = specon()
    world = World(scenario(job("a", profile(iterations=1000), submit=4.0),
                           job("b", profile(iterations=1000), submit=7.0), policy=policy),
                  policies=[policy])
    world.run_until(100.0)
    assert tick_times(world) == [34.0, 64.0, 94.0]


def test_flowcon_limits_the_converging_job_when_a_new_one_arrives() -> None:
    # vae improves slowly (CL after two intervals), mnist quickly: when mnist starts at 40 s,
    # FlowCon (beta 2, two jobs) gives vae the floor 1 / (2 * 2) = 0.25 and mnist 1.
    policy = flowcon()
    vae = profile("vae", iterations=2000, max_parallelism=4.0, rate=0.001)
    mnist = profile("mnist", iterations=2000, max_parallelism=4.0, rate=0.02, scale=5.0)
    world = World(scenario(job("vae", vae), job("mnist", mnist, submit=40.0),
                           nodes={"w1": 4.0}, policy=policy), policies=[policy])
    world.run_until(40.0)
    at, outcome = world.outcomes[-1]
    assert at == 40.0
    assert outcome.decision.categories == {"vae": "CL", "mnist": "NL"}
    assert [(a.container, a.fraction) for a in outcome.decision.actions
            if isinstance(a, SetCpu)] == [("vae", 0.25)]
    assert len(outcome.decision.actions) == 1
    assert (world.job("vae").cores, world.job("mnist").cores) == pytest.approx((0.8, 3.2))


def test_two_policies_on_one_container_the_owner_acts_the_other_yields() -> None:
    # Two live FlowCon policies select the same jobs; "boss" (priority 5) owns their CPU.
    vae = profile("vae", iterations=2000, max_parallelism=4.0, rate=0.001)
    mnist = profile("mnist", iterations=2000, max_parallelism=4.0, rate=0.02, scale=5.0)
    mine, boss = flowcon(), flowcon(priority=5)
    boss = boss.model_copy(update={"metadata": boss.metadata.model_copy(update={"name": "boss"})})
    world = World(scenario(job("vae", vae), job("mnist", mnist, submit=40.0),
                           nodes={"w1": 4.0}), policies=[mine, boss])
    world.run_until(40.0)
    by_policy: dict[str, list[Decision]] = {}
    for _, outcome in world.outcomes:
        by_policy.setdefault(outcome.decision.policy, []).append(outcome.decision)
    assert [p.name for p in world.policies] == ["boss", "fc"]  # the owner ticks first
    assert [(a.container, a.fraction) for d in by_policy["boss"] for a in d.actions] == [
        ("vae", 0.25)]
    assert all(d.actions == () for d in by_policy["fc"])
    last = by_policy["fc"][-1]
    assert {a.container: a.note.split(":")[0] for a in last.assessments} == {
        "vae": "cpu owned by policy boss (priority 5 vs 0)",
        "mnist": "cpu owned by policy boss (priority 5 vs 0)"}
    assert world.job("vae").fraction == 0.25  # applied once, by its owner


@pytest.mark.parametrize("name", ["flowcon-random-10", "specon-random-20-hetero",
                                  "flowcon2-4w-20"])
def test_a_node_whose_jobs_did_not_change_keeps_its_share_exactly(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`_share` skips a node whose jobs are as it left them: every run equals the run that
    shares every node at every instant, job for job, bit for bit."""
    scenario = scenarios.build(name)
    skipping = {s: run(scenario, s) for s in STRATEGIES}
    monkeypatch.setattr(world, "_share_state", lambda jobs: object())  # never the same state
    every_time = {s: run(scenario, s) for s in STRATEGIES}

    assert to_json([Outcome(scenario=scenario, runs=skipping)]) == to_json(
        [Outcome(scenario=scenario, runs=every_time)])
