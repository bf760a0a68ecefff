"""FlowCon2: FlowCon's limits, held jobs admitted where they grow fastest, converged jobs moved
when the forecast's gain beats the move's cost; the safety limits always hold."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from policyd.engine.flowcon2 import FlowCon2Policy, as_flowcon, as_predictive, plan
from policyd.engine.registry import KINDS
from policyd.engine.spec import API_VERSION
from policyd.model import (
    Admit,
    Container,
    Markers,
    Migrate,
    Node,
    PendingJob,
    Series,
    SetCpu,
    Snapshot,
)
from policyd.sim import scenarios

NOW = 1_700_001_000.0
SCRAPE = 5.0
SAMPLES = 100  # 500 s: more than FlowCon's window of 20 intervals of 20 s


def policy(**spec: Any) -> FlowCon2Policy:
    return FlowCon2Policy.model_validate({
        "apiVersion": API_VERSION, "kind": "FlowCon2", "metadata": {"name": "fc2"},
        "spec": spec})


def job(cid: str, node: str, *, converged: bool, cores: float, done: float = 1000.0,
        total: float = 5000.0, allocation: float = 1.0, labels: dict[str, str] | None = None,
        markers: Markers | None = None, age: float = 600.0) -> Container:
    """A job on `node` using `cores` over its last SAMPLES scrapes, at 10 steps a second per
    core used, now `done` of `total` steps; its loss flat (converged) or falling by 10 % every
    20 s (growing)."""
    t = NOW - SCRAPE * np.arange(SAMPLES - 1, -1, -1)
    steps = done - 10.0 * cores * (NOW - t)
    loss = (np.full(t.size, 0.5) if converged else 2.0 * 0.9 ** ((t - t[0]) / 20.0))
    return Container(
        id=cid, name=cid, node=node, started_at=NOW - age,
        evaluation=Series.of(t, loss), cpu_usage=Series.of(t[1:], [cores] * (SAMPLES - 1)),
        cpu_allocation=allocation, labels={"app": "train", **(labels or {})},
        markers=markers or Markers(), steps=Series.of(t, steps), total_steps=total)


def cluster(*containers: Container, nodes: dict[str, tuple[float, float | None]],
            pending: tuple[PendingJob, ...] = ()) -> Snapshot:
    return Snapshot(time=NOW, nodes=tuple(Node(name=n, cpu_capacity=c, speed=s)
                                          for n, (c, s) in nodes.items()),
                    containers=containers, pending=pending)


def crowded(**overrides: Any) -> Snapshot:
    """A 2-core worker with a converged job held at the floor beside two growing ones, and an
    empty worker."""
    return cluster(
        job("old", "busy", converged=True, cores=0.4, allocation=1 / 6, **overrides),
        job("g1", "busy", converged=False, cores=0.8),
        job("g2", "busy", converged=False, cores=0.8),
        nodes={"busy": (2.0, 1.0), "idle": (2.0, 1.0)})


def moves(decision: Any) -> list[Migrate]:
    return [a for a in decision.actions if isinstance(a, Migrate)]


def test_the_kind_is_registered_cluster_wide_and_acts_on_cpu_placement_and_admission() -> None:
    kind = KINDS["FlowCon2"]
    assert kind.scope_of(policy()) == "cluster"
    assert kind.acts_on_of(policy()) == {"cpu", "placement", "admission"}


def test_limits_are_flowcons() -> None:
    snapshot = crowded()
    ours = {a.container: a.fraction for a in plan(policy(migrate=False), snapshot).actions
            if isinstance(a, SetCpu)}
    flowcon = {a.container: a.fraction for a in KINDS["FlowCon"].plan(
        as_flowcon(policy(migrate=False)), snapshot).actions if isinstance(a, SetCpu)}
    assert ours == flowcon


def test_a_converged_job_moves_off_a_crowded_worker_and_the_reason_names_gain_and_cost() -> None:
    d = plan(policy(), crowded())
    (move,) = moves(d)
    assert (move.container, move.from_node, move.to_node) == ("old", "busy", "idle")
    assert "predicted gain" in move.reason and "> migration cost 30 s x (1 + 1)" in move.reason
    gain = float(move.reason.split("predicted gain ")[1].split(" s")[0])
    assert gain > 60.0
    assert not any(isinstance(a, SetCpu) and a.container == "old" for a in d.actions)


def test_under_quotas_the_floor_is_a_hard_cap_beside_jobs_of_equal_weight() -> None:
    """The converged job's floor (1/6 of 2 cores) as a weight gets it 0.15 of a core beside two
    growing jobs of weight 1 (0.92 each); as a quota, with every job at the same weight, it
    gets all of its 0.33 and the growing jobs 0.83 each. So under quotas the move frees more
    for the jobs left (they are sooner by more) and gains the job itself less (it ran faster
    where it was)."""
    def parts(mode: str) -> tuple[float, float]:
        (move,) = moves(plan(policy(mode=mode), crowded()))
        left = float(move.reason.split("sooner by ")[1].split(" s")[0])
        itself = float(move.reason.split("itself +")[1].split(" s")[0])
        return left, itself

    (left_shares, itself_shares), (left_quota, itself_quota) = parts("shares"), parts("quota")
    assert left_quota > left_shares and itself_quota < itself_shares


def test_no_move_when_the_gain_does_not_beat_the_cost() -> None:
    assert moves(plan(policy(migration_cost_seconds=3600, migration_margin=100),
                      crowded())) == []


def test_growing_jobs_are_never_moved() -> None:
    d = plan(policy(), cluster(job("g1", "busy", converged=False, cores=0.7),
                               job("g2", "busy", converged=False, cores=0.7),
                               job("g3", "busy", converged=False, cores=0.6),
                               nodes={"busy": (2.0, 1.0), "idle": (2.0, 1.0)}))
    assert moves(d) == []


SAFETY_CASES = [
    ({}, {"labels": {"policyd.io/opt-out": "true"}}),
    ({"safety": {"min_job_age_seconds": 3600}}, {}),
    ({"safety": {"cooldown_seconds": 600}}, {"markers": Markers(last_action_at=NOW - 60)}),
    ({"safety": {"max_migrations_per_cycle": 0}}, {}),
    ({"safety": {"max_migrations_per_node": 0}}, {}),
    ({}, {"markers": Markers(migrated=True)}),
    ({"migrate": False}, {}),
]
"""Each safety limit (policy spec, job overrides) that must stop a move the case would make."""
SAFETY_IDS = ["opt-out", "minimum age", "cooldown", "per cycle", "per node", "moved once", "off"]


@pytest.mark.parametrize(("spec", "overrides"), SAFETY_CASES, ids=SAFETY_IDS)
def test_the_safety_limits_hold(spec: dict[str, Any], overrides: dict[str, Any]) -> None:
    assert moves(plan(policy(**spec), crowded(**overrides))) == []


def test_the_budget_per_cycle_and_per_node_caps_many_candidates() -> None:
    jobs = [job(f"old{i}", "busy", converged=True, cores=0.2, allocation=0.1) for i in range(4)]
    jobs += [job("g1", "busy", converged=False, cores=0.6),
             job("g2", "busy", converged=False, cores=0.6)]
    snapshot = cluster(*jobs, nodes={"busy": (2.0, 1.0), "a": (2.0, 1.0), "b": (2.0, 1.0)})
    free = moves(plan(policy(safety={"max_migrations_per_cycle": 10,
                                     "max_migrations_per_node": 10}), snapshot))
    assert len(free) >= 2  # unbounded, several converged jobs leave
    for per_cycle, per_node in [(1, 10), (10, 1), (10, 2)]:
        found = moves(plan(policy(safety={"max_migrations_per_cycle": per_cycle,
                                          "max_migrations_per_node": per_node}), snapshot))
        assert len(found) <= per_cycle
        for node in ("busy", "a", "b"):
            assert sum(node in (m.from_node, m.to_node) for m in found) <= per_node


def held(pid: str, submitted: float = NOW - 30, labels: dict[str, str] | None = None
         ) -> PendingJob:
    return PendingJob(id=pid, name=pid, submitted_at=submitted, labels=labels or {})


def admits(decision: Any) -> dict[str, str]:
    return {a.container: a.node for a in decision.actions if isinstance(a, Admit)}


def test_a_held_job_starts_where_it_grows_fastest() -> None:
    # fast: 2 cores at speed 2 with one growing job; slow: 2 idle cores at speed 0.5
    d = plan(policy(), cluster(job("g", "fast", converged=False, cores=1.0),
                               nodes={"fast": (2.0, 2.0), "slow": (2.0, 0.5)},
                               pending=(held("new"),)))
    assert admits(d) == {"new": "fast"}
    reason = next(a.reason for a in d.actions if isinstance(a, Admit))
    assert "grows fastest on fast" in reason and "cores x speed 2" in reason


def test_held_jobs_spread_as_each_admission_joins_the_model() -> None:
    d = plan(policy(), cluster(nodes={"a": (2.0, 1.0), "b": (2.0, 1.0)},
                               pending=(held("j1", NOW - 30), held("j2", NOW - 20))))
    assert sorted(admits(d).values()) == ["a", "b"]


def test_an_unstated_speed_is_average_and_said_so() -> None:
    d = plan(policy(), cluster(nodes={"known": (2.0, 1.5), "unknown": (2.0, None)},
                               pending=(held("new"),)))
    assert any("unknown not stated" in n and "treated as average (1.5)" in n for n in d.notes)


def test_an_opted_out_held_job_waits_with_why() -> None:
    d = plan(policy(), cluster(nodes={"a": (2.0, 1.0)},
                               pending=(held("new", labels={"policyd.io/opt-out": "true"}),)))
    assert admits(d) == {}
    assert [(q.container, q.why) for q in d.queue] == [("new", "blocked")]


def test_admission_min_cores_holds_a_job_while_no_worker_offers_them() -> None:
    busy = [job(f"g{i}", "a", converged=False, cores=0.5) for i in range(4)]
    d = plan(policy(admission_min_cores=1.0), cluster(*busy, nodes={"a": (2.0, 1.0)},
                                                      pending=(held("new"),)))
    assert admits(d) == {}
    assert d.queue[0].why == "no_fit"


def test_a_converged_job_stays_where_the_growing_jobs_are_about_to_end() -> None:
    # At the floor beside a job 20 s from its end, the converged job soon has the fast worker
    # to itself: the worker drains (policyd.engine.drain), so the move to the idle slow worker
    # is not worth it. Priced at the floor for its whole run (the one-interval picture), it
    # looked like a gain of thousands of seconds.
    snapshot = cluster(
        job("old", "fast", converged=True, cores=0.25, allocation=0.25),
        job("g", "fast", converged=False, cores=1.75, done=4650.0, total=5000.0),
        nodes={"fast": (2.0, 1.5), "slow": (2.0, 0.6)})
    assert moves(plan(policy(), snapshot)) == []


def test_by_default_a_held_job_waits_for_a_whole_effective_core() -> None:
    d = plan(policy(), cluster(nodes={"slow": (2.0, 0.4)}, pending=(held("new"),)))
    assert admits(d) == {}
    assert d.queue[0].why == "no_fit" and "needs 1.00 free cores" in d.queue[0].reason
    assert admits(plan(policy(admission_min_cores=0), cluster(
        nodes={"slow": (2.0, 0.4)}, pending=(held("new"),)))) == {"new": "slow"}


def test_forecast_admission_starts_a_job_where_it_adds_least_to_completion_times() -> None:
    # fast: 2 cores at speed 2 shared by two converged jobs with long runs ahead (a newcomer
    # would get 2/3 of a core there, 1.33 effective: "fastest" picks it); calm: 2 cores at
    # speed 1 with one converged job near its end (1 effective core). Joining fast delays two
    # long jobs; joining calm, one short one.
    olds = [job(f"old{i}", "fast", converged=True, cores=1.0, done=1000.0) for i in range(2)]
    snapshot = cluster(*olds, job("end", "calm", converged=True, cores=1.0, done=4900.0),
                       nodes={"fast": (2.0, 2.0), "calm": (2.0, 1.0)}, pending=(held("new"),))
    assert admits(plan(policy(migrate=False), snapshot)) == {"new": "fast"}
    d = plan(policy(migrate=False, admission="forecast"), snapshot)
    assert admits(d) == {"new": "calm"}
    reason = next(a.reason for a in d.actions if isinstance(a, Admit))
    assert "adds least to the predicted completion times on calm" in reason


def test_admission_counts_converged_jobs_at_an_equal_share_not_at_their_floor() -> None:
    # fast: 2 cores at speed 1.5, one growing job and three converged ones at the floor 1/8;
    # by the limits a newcomer would get 0.84 of a core there (1.26 effective), but the floor
    # is soft: at an equal share it gets 0.4 (0.6 effective). calm: 2 cores at speed 1 beside
    # one growing job, 1 effective core.
    olds = [job(f"old{i}", "fast", converged=True, cores=0.1, allocation=1 / 8)
            for i in range(3)]
    snapshot = cluster(*olds, job("g", "fast", converged=False, cores=1.7),
                       job("h", "calm", converged=False, cores=1.0),
                       nodes={"fast": (2.0, 1.5), "calm": (2.0, 1.0)}, pending=(held("new"),))
    d = plan(policy(migrate=False), snapshot)
    assert admits(d) == {"new": "calm"}
    reason = next(a.reason for a in d.actions if isinstance(a, Admit))
    assert "grows fastest on calm: 1.00 effective cores" in reason
    assert "at an equal share beside 1 job(s)" in reason


def test_an_unlabelled_workers_speed_is_judged_from_a_shared_workload_and_said() -> None:
    """The same workload on a stated worker and an unlabelled one, stepping twice as fast
    there: the decision judges the unlabelled worker at 2 and says how."""
    shared = {"policyd.io/workload": "resnet"}
    here = job("a", "known", converged=False, cores=1.0, labels=shared)
    fast = job("b", "new", converged=False, cores=1.0, labels=shared)
    fast = replace(fast, steps=Series.of(fast.steps.times_seconds, 2 * fast.steps.values))
    decision = plan(policy(), cluster(here, fast, nodes={"known": (2.0, 1.0),
                                                         "new": (2.0, None)}))
    (note,) = [n for n in decision.notes if n.startswith("speed of new")]
    assert "not stated: judged 2 (" in note and "policyd.io/workload: resnet" in note


# --- order: remaining: each worker's limits by Predictive's plan --------------------------


def ranked(**overrides: Any) -> Snapshot:
    """A 1-core worker with a converged job near its end and two growing ones further from
    theirs (500, 2500 and 4700 steps left of 5000), and an empty 2-core worker."""
    return cluster(
        job("near", "busy", converged=True, cores=0.6, done=4500, allocation=1 / 6,
            **overrides),
        job("mid", "busy", converged=False, cores=0.6, done=2500, **overrides),
        job("far", "busy", converged=False, cores=0.6, done=300, **overrides),
        nodes={"busy": (1.0, 1.0), "idle": (2.0, 1.0)})


def limits(decision: Any) -> dict[str, float]:
    return {a.container: a.fraction for a in decision.actions if isinstance(a, SetCpu)}


def nexts(decision: Any) -> dict[str, float]:
    """Each job's next limit (an unchanged one sets nothing)."""
    return {a.container: a.cpu_fraction_next for a in decision.assessments}


def test_the_order_defaults_to_flowcons_growth() -> None:
    assert policy().spec.order == "growth"
    assert limits(plan(policy(migrate=False), ranked())) == limits(
        plan(policy(migrate=False, order="growth"), ranked()))


def test_under_remaining_the_limits_follow_predicted_remaining_time_not_growth() -> None:
    """FlowCon holds the converged job at the floor and serves the growing ones; by remaining
    time the job nearest its end is served and the others wait at the floor 1 / (2 x 3)."""
    growth = plan(policy(migrate=False), ranked())
    assert nexts(growth) == pytest.approx({"near": 1 / 6, "mid": 1.0, "far": 1.0})
    d = plan(policy(migrate=False, order="remaining"), ranked())
    assert nexts(d) == pytest.approx({"near": 1.0, "mid": 1 / 6, "far": 1 / 6})
    assert d.categories == {"near": "SERVED", "mid": "FLOOR", "far": "FLOOR"}
    reason = next(a.reason for a in d.actions if isinstance(a, SetCpu) and a.container == "near")
    assert reason.startswith("#1 of 3 by predicted remaining time: 50 s at its best")


def test_under_remaining_the_limits_are_predictives() -> None:
    ours = limits(plan(policy(migrate=False, order="remaining"), ranked()))
    theirs = limits(KINDS["Predictive"].plan(as_predictive(policy(order="remaining")), ranked()))
    assert ours == theirs


@pytest.mark.parametrize("beta", [1.0, 2.0, 4.0])
def test_under_remaining_no_limit_falls_below_the_floor(beta: float) -> None:
    jobs = [job(f"j{i}", "busy", converged=i % 2 == 0, cores=0.3, done=500.0 * (i + 1))
            for i in range(6)]
    d = plan(policy(migrate=False, order="remaining", beta=beta),
             cluster(*jobs, nodes={"busy": (2.0, 1.0)}))
    assert {a.container for a in d.assessments} == {f"j{i}" for i in range(6)}
    assert min(a.cpu_fraction_next for a in d.assessments) >= 1 / (beta * 6) - 1e-9


def test_under_remaining_the_job_served_last_moves_and_the_reason_names_its_forecast() -> None:
    """Under growth the converged job (nearest its end) leaves; under remaining it is served
    where it is, and the job with the most time left, at the floor, moves to the empty
    worker."""
    (growth,) = moves(plan(policy(), ranked()))
    assert growth.container == "near"
    (move,) = moves(plan(policy(order="remaining"), ranked()))
    assert (move.container, move.from_node, move.to_node) == ("far", "busy", "idle")
    assert move.reason.startswith(
        "served last, at the floor (FLOOR), on busy (speed 1): 470 s of predicted remaining "
        "time at its best (1 cores), 4700 steps left (total steps); limit 1 on idle; "
        "predicted gain")
    assert "> migration cost 30 s x (1 + 1)" in move.reason


def test_under_remaining_a_served_job_is_never_moved() -> None:
    d = plan(policy(order="remaining", safety={"max_migrations_per_cycle": 10,
                                                "max_migrations_per_node": 10}), ranked())
    assert "near" not in {m.container for m in moves(d)}
    assert moves(d)


@pytest.mark.parametrize(("spec", "overrides"), SAFETY_CASES, ids=SAFETY_IDS)
def test_under_remaining_the_safety_limits_hold(spec: dict[str, Any],
                                                overrides: dict[str, Any]) -> None:
    assert moves(plan(policy(order="remaining"), ranked()))  # the case moves without them
    assert moves(plan(policy(order="remaining", **spec), ranked(**overrides))) == []


def test_the_summary_names_the_order() -> None:
    for order in ("growth", "remaining"):
        p = scenarios.flowcon2_policy("flowcon2-4w-20", order=order)
        assert KINDS.of(p).summary(p).startswith(f"order {order}, alpha 0.05")
