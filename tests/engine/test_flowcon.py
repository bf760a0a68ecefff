"""FlowCon (thesis Algorithms 1 and 2) as read by policyd.engine.flowcon.

Table-driven: each case names the algorithm and line whose branch it exercises. With the builders'
defaults (interval 20 s = the base interval, 1 core used) a container's growth efficiency G is
the relative gain of each interval, so `losses(0.2, 0.01)` reads "G = 0.2, then 0.01".
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from policyd.engine import decide
from policyd.engine.flowcon import CL, NL, WL, plan, replay
from policyd.engine.specon import SpeConPolicy
from policyd.model import Assessment, Container, Decision, Series, SetCpu, Snapshot
from policyd.model.codec import decision_to_dict, snapshot_from_dict
from tests.engine.flowcon_builders import (
    INTERVAL,
    NOW,
    POLICY,
    flowcon,
    job,
    losses,
    snapshot,
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "thesis-flowcon-two-jobs.json"
NAN, INF = float("nan"), float("inf")


def by_id(decision: Decision) -> dict[str, tuple[str | None, float | None]]:
    return {a.container: (a.category, a.cpu_fraction_next) for a in decision.assessments}


def assessment(decision: Decision, cid: str) -> Assessment:
    return next(a for a in decision.assessments if a.container == cid)


def set_cpu(decision: Decision) -> list[SetCpu]:
    """The decision's actions, which FlowCon only ever makes SetCpu."""
    assert all(isinstance(a, SetCpu) for a in decision.actions)
    return [a for a in decision.actions if isinstance(a, SetCpu)]


# --- Algorithm 1 and 2, branch by branch ------------------------------------------------------


@dataclass(frozen=True)
class Case:
    containers: tuple[Container, ...]
    expect: dict[str, tuple[str | None, float | None]]
    next_interval: float = INTERVAL
    spec: dict[str, Any] = field(default_factory=dict)
    intervals: dict[str, float] = field(default_factory=dict)


def _backed_off(interval: float) -> tuple[Container, ...]:
    """Two converged jobs sampled at a backed-off interval (G = g / 2 or less: deep in CL)."""
    return (job("a", losses(0.01, 0.01), interval=interval, allocation=0.25),
            job("b", losses(0.02, 0.02), interval=interval, allocation=0.4))


CASES = {
    "alg1-l4-NL-to-WL": Case(
        (job("a", losses(0.2, 0.01), allocation=0.6), job("b", losses(0.3, 0.3))),
        {"a": ("WL", 0.6), "b": ("NL", 1.0)},
    ),
    "alg1-l7-WL-to-CL": Case(
        (job("a", losses(0.2, 0.01, 0.01)), job("b", losses(0.3, 0.3, 0.3))),
        {"a": ("CL", 0.25), "b": ("NL", 1.0)},
    ),
    "alg1-l7-CL-stays-CL": Case(
        (job("a", losses(0.01, 0.01, 0.01, 0.01)), job("b", losses(0.3))),
        {"a": ("CL", 0.25), "b": ("NL", 1.0)},
    ),
    "alg1-l10-back-to-NL": Case(
        (job("a", losses(0.01, 0.01, 0.2), allocation=0.25),
         job("b", losses(0.01, 0.01, 0.01), allocation=0.25)),
        {"a": ("NL", 1.0), "b": ("CL", 0.25)},
    ),
    "alg1-l10-G-equal-to-alpha-is-NL": Case(
        # 1.0 -> 0.9375 is a gain of exactly 0.0625 in binary floating point.
        (job("a", [1.0, 0.9375], allocation=0.5), job("b", losses(0.01, 0.01))),
        {"a": ("NL", 1.0), "b": ("CL", 0.25)},
        spec={"alpha": 0.0625},
    ),
    "alg1-l14-all-CL-free-competition": Case(
        (job("a", losses(0.01, 0.01), allocation=0.25),
         job("b", losses(0.02, 0.02), allocation=0.4)),
        {"a": ("CL", 1.0), "b": ("CL", 1.0)},
        next_interval=40.0,
    ),
    "alg1-l14-all-categorised-CL-ignores-skipped": Case(
        (job("a", losses(0.01, 0.01), allocation=0.25), job("b", losses(0.02, 0.02)),
         job("c", [2.0, NAN, 1.0])),
        {"a": ("CL", 1.0), "b": ("CL", 1.0), "c": (None, None)},
        next_interval=40.0,
    ),
    "alg1-l17-backoff-doubles": Case(
        _backed_off(40.0), {"a": ("CL", 1.0), "b": ("CL", 1.0)},
        next_interval=80.0, intervals={POLICY: 40.0},
    ),
    "alg1-l17-backoff-capped": Case(
        _backed_off(200.0), {"a": ("CL", 1.0), "b": ("CL", 1.0)},
        next_interval=320.0, intervals={POLICY: 200.0}, spec={"max_interval_seconds": 320.0},
    ),
    "alg1-l21-CL-share": Case(
        # Σ G = 0.04 + 0.01: the CL job's share 0.8 is above the floor 1/(2*2).
        (job("a", losses(0.2, 0.04, 0.04), allocation=0.25),
         job("b", losses(0.2, 0.01), allocation=0.5)),
        {"a": ("CL", 0.8), "b": ("WL", 0.5)},
    ),
    "alg1-l22-floor": Case(
        (job("a", losses(0.01, 0.01)), job("b", losses(0.3)), job("c", losses(0.3))),
        {"a": ("CL", 1 / 6), "b": ("NL", 1.0), "c": ("NL", 1.0)},
    ),
    "alg1-l22-floor-counts-skipped-containers": Case(
        (job("a", losses(0.01, 0.01)), job("b", losses(0.3)), job("c", [2.0, INF, 1.0])),
        {"a": ("CL", 1 / 6), "b": ("NL", 1.0), "c": (None, None)},
    ),
    "alg1-l24-WL-unchanged": Case(
        (job("a", losses(0.3, 0.01), allocation=0.37), job("b", losses(0.3))),
        {"a": ("WL", 0.37), "b": ("NL", 1.0)},
    ),
    "alg1-l26-NL-gets-1": Case(
        (job("a", losses(0.01, 0.3), allocation=0.3), job("b", losses(0.01, 0.01))),
        {"a": ("NL", 1.0), "b": ("CL", 0.25)},
    ),
    "alg2-l7-young-container-is-NL": Case(
        # Without b, a's share would be 0.04/0.04 = 1; a job without a G yet outgrows it.
        (job("a", losses(0.01, 0.04)), job("b", [], started_at=NOW - 30)),
        {"a": ("CL", 0.25), "b": ("NL", 1.0)},
    ),
    "alg2-l7-young-container-with-one-sample-is-NL": Case(
        (job("a", losses(0.01, 0.04)), job("b", [2.3], started_at=NOW - 40)),
        {"a": ("CL", 0.25), "b": ("NL", 1.0)},
    ),
    "alg2-l8-new-container-resets-interval": Case(
        (*_backed_off(80.0), job("c", [], started_at=NOW - 5)),
        {"a": ("CL", 1 / 6), "b": ("CL", 1 / 6), "c": ("NL", 1.0)},
        next_interval=INTERVAL, intervals={POLICY: 80.0},
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_algorithm_branches(case: Case) -> None:
    decision = plan(flowcon(**case.spec), snapshot(*case.containers, intervals=case.intervals))

    got = by_id(decision)
    assert got.keys() == case.expect.keys()
    for cid, (category, limit) in case.expect.items():
        assert got[cid][0] == category, cid
        assert got[cid][1] == (None if limit is None else pytest.approx(limit)), cid
    assert decision.next_interval == case.next_interval
    # An action exactly where the limit moves, carrying that limit and a reason.
    allocations = {c.id: c.cpu_allocation for c in case.containers}
    moved = {cid: limit for cid, (_, limit) in case.expect.items()
             if limit is not None and abs(limit - allocations[cid]) > 1e-6}
    assert {a.container: a.fraction for a in set_cpu(decision)} == pytest.approx(moved)
    assert all(a.reason and a.mode == "shares" and a.policy == POLICY for a in set_cpu(decision))


def test_reasons_name_the_numbers() -> None:
    decision = plan(flowcon(), snapshot(job("a", losses(0.2, 0.012, 0.012)),
                                        job("b", losses(0.3, 0.31))))
    reasons = {a.container: a.reason for a in decision.actions}
    assert reasons["a"].startswith("CL on w1: G=0.012 of ΣG=0.322")
    assert reasons["a"].endswith("-> 0.25 (floor 1/(2*2)=0.25)")
    assert assessment(decision, "b").note == "NL: growing (G=0.31 >= alpha=0.05) -> 1"

    all_cl = plan(flowcon(), snapshot(job("a", losses(0.01, 0.01), allocation=0.5),
                                      job("b", losses(0.01, 0.01))))
    assert all_cl.actions[0].reason == (
        "all 2 containers on w1 in CL: free competition, interval 20 s -> 40 s"
    )


def test_next_interval_is_the_minimum_over_nodes() -> None:
    converged = (job("a", losses(0.01, 0.01), node="w1"), job("b", losses(0.01, 0.01), node="w1"))
    growing = job("c", losses(0.3, 0.3), node="w2")
    assert plan(flowcon(), snapshot(*converged)).next_interval == 40.0
    assert plan(flowcon(), snapshot(*converged, growing)).next_interval == INTERVAL
    # A node whose containers are all skipped takes no part; an empty cluster gets itval_0.
    broken = job("d", [1.0, NAN, 0.5], node="w3")
    assert plan(flowcon(), snapshot(*converged, broken)).next_interval == 40.0
    empty = plan(flowcon(), snapshot(intervals={POLICY: 160.0}))
    assert (empty.next_interval, empty.actions, empty.assessments) == (INTERVAL, (), ())


def test_unselected_containers_are_invisible() -> None:
    other = job("x", losses(0.3, 0.3), labels={"app": "serving"})
    decision = plan(flowcon(selector={"labels": {"app": "train"}}),
                    snapshot(job("a", losses(0.01, 0.01)), job("b", losses(0.3)), other))
    assert set(by_id(decision)) == {"a", "b"}
    assert by_id(decision)["a"] == ("CL", 0.25)  # n = 2: x does not count


def test_only_flowcon_policies_are_accepted() -> None:
    specon = SpeConPolicy.model_validate({"apiVersion": "policyd.io/v1alpha1", "kind": "SpeCon",
                                          "metadata": {"name": "s"}, "spec": {}})
    with pytest.raises(TypeError, match="FlowCon"):
        plan(specon, snapshot())


# --- The thesis example (section 6.1.3) -------------------------------------------------------

T0 = 1_700_000_000.0
VAE_LOSS = [141.0, 131.7, 126.9, 121.4, 118.0, 116.1, 114.8, 113.9, 113.2]  # every 10 s from T0
VAE_CPU = [3.91, 3.88, 3.9, 3.89, 1.97, 1.94, 1.96, 1.95]  # alone on 4 cores, then sharing


def _vae(until: float) -> Container:
    n = int((until - T0) // 10) + 1
    return job("vae", VAE_LOSS[:n], times=[T0 + 10 * k for k in range(n)], cpu=VAE_CPU[:n - 1],
               started_at=T0)


def _mnist(now: float, *, measured: bool) -> Container:
    if not measured:
        return job("mnist", [], started_at=T0 + 40)
    times = [T0 + 45, T0 + 55, T0 + 65, T0 + 75]
    return Container(
        id="mnist", name="mnist", node="w1", started_at=T0 + 40,
        evaluation=Series.of(times, [2.297, 1.412, 0.683, 0.441]),
        cpu_usage=Series.of([T0 + 50, T0 + 60, T0 + 70, T0 + 80], [1.93, 1.96, 1.95, 1.96]),
    )


@pytest.mark.parametrize(
    ("now", "measured"),
    [(T0 + 40, False), (T0 + 80, False), (T0 + 80, True)],
    ids=["at-launch-alg2-l8", "mnist-no-measurement-yet", "mnist-one-interval-large-gain"],
)
def test_thesis_example_vae_quarter_mnist_all(now: float, measured: bool) -> None:
    """VAE since 0 s and converging, MNIST launched at 40 s; beta = 2: VAE 0.25, MNIST 1."""
    snap = snapshot(_vae(now), _mnist(now, measured=measured), now=now)
    decision = plan(flowcon(alpha=0.05, interval_seconds=20, beta=2), snap)

    assert by_id(decision) == {"vae": ("CL", 0.25), "mnist": ("NL", 1.0)}
    assert [(a.container, a.fraction) for a in set_cpu(decision)] == [("vae", 0.25)]
    assert decision.next_interval == INTERVAL
    launched_now = any("a container appeared" in line for line in decision.notes)
    assert launched_now == (now == T0 + 40)  # Algorithm 2, line 8
    mnist_gain = assessment(decision, "mnist").gain
    assert (mnist_gain is not None) == measured
    if mnist_gain is not None:
        assert mnist_gain > 0.05


def test_thesis_example_file() -> None:
    snap = snapshot_from_dict(json.loads(EXAMPLE.read_text()))
    policy = flowcon(name="thesis-flowcon", alpha=0.05, interval_seconds=20, beta=2)
    decision = decide(policy, snap)
    assert by_id(decision) == {"vae-pytorch": ("CL", 0.25), "mnist-pytorch": ("NL", 1.0)}
    assert [(a.container, a.fraction) for a in set_cpu(decision)] == [("vae-pytorch", 0.25)]


# --- Bad series: no action for that container, a note why, the others unaffected -------------


def _gap() -> Container:
    return job("bad", losses(0.3, 0.3), times=[NOW - 140, NOW - 120, NOW - 100])


NOT_FINITE_CPU = "cpu_usage is not a finite number"
BAD = {
    "nan": (job("bad", [2.0, 1.9, NAN, 1.7]), "evaluation is nan"),
    "inf": (job("bad", [2.0, INF, 1.8]), "evaluation is inf"),
    "gap": (_gap(), "gap: no evaluation sample for 60 s before t=1700000360"),
    "unsorted-timestamps": (
        job("bad", [2.0, 1.9, 1.8], times=[NOW - 40, NOW, NOW - 20]), "not increasing"),
    "too-few-samples": (
        job("bad", [2.0], started_at=NOW - 1000),
        "too few evaluation samples: 1 in the last 400 s"),
    "no-cpu-usage": (job("bad", losses(0.3, 0.3), cpu=[]), "no CPU usage"),
    "nan-cpu-usage": (job("bad", losses(0.3, 0.3), cpu=[1.0, NAN]), NOT_FINITE_CPU),
    "inf-cpu-usage": (job("bad", losses(0.3, 0.3), cpu=[INF, 1.0]), NOT_FINITE_CPU),
}


@pytest.mark.parametrize(("bad", "why"), BAD.values(), ids=BAD.keys())
def test_bad_series_get_no_action(bad: Container, why: str) -> None:
    # "bad" sorts before "ok", so a defect that leaked through the shared arrays would show.
    ok = (job("ok", losses(0.01, 0.02), allocation=0.9), job("ok2", losses(0.3, 0.3)))
    alone = plan(flowcon(), snapshot(*ok))
    decision = plan(flowcon(), snapshot(bad, *ok))

    skipped = assessment(decision, "bad")
    assert skipped.category is None
    assert skipped.note.startswith("no action: ")
    assert why in skipped.note
    assert "bad" not in {a.container for a in decision.actions}
    for cid in ("ok", "ok2"):
        before, after = assessment(alone, cid), assessment(decision, cid)
        assert (after.category, after.gain) == (before.category, before.gain)
    # n counts the skipped container: the CL floor is 1/(2*3).
    category, limit = by_id(decision)["ok"]
    assert category == "CL"
    assert limit == pytest.approx(1 / 6)


# --- Safety knobs ---------------------------------------------------------------------------


SAFETY = {
    "opt-out-label": ({}, {"labels": {"app": "train", "policyd.io/opt-out": "true"}}, "opted out"),
    "min-job-age": ({"safety": {"min_job_age_seconds": 3600}}, {}, "younger than min_job_age"),
    "cooldown": ({"safety": {"cooldown_seconds": 60}}, {"last_action_at": NOW - 10}, "in cooldown"),
}


@pytest.mark.parametrize(("spec", "extra", "why"), SAFETY.values(), ids=SAFETY.keys())
def test_guards_block_actions(spec: dict[str, Any], extra: dict[str, Any], why: str) -> None:
    guarded = job("a", losses(0.01, 0.01), **extra)
    decision = plan(flowcon(**spec), snapshot(guarded, job("b", losses(0.3))))
    a = assessment(decision, "a")
    assert (a.category, a.cpu_fraction_next) == ("CL", 0.25)
    assert a.note.startswith(f"no action ({why}")
    assert decision.actions == ()


def test_the_decision_names_its_policys_opt_out_key_for_the_actuators() -> None:
    snap = snapshot(job("a", losses(0.01, 0.01)), job("b", losses(0.3)))
    custom = flowcon(selector={"labels": {"app": "train"},
                               "opt_out_key": "example.com/no-policyd"})
    assert decide(custom, snap).opt_out_key == "example.com/no-policyd"
    assert decide(flowcon(), snap).opt_out_key == "policyd.io/opt-out"
    assert "opt_out_key" not in decision_to_dict(decide(custom, snap))  # a setting, not output


def test_dry_run_lands_on_the_decision() -> None:
    snap = snapshot(job("a", losses(0.01, 0.01)), job("b", losses(0.3)))
    assert plan(flowcon(dry_run=True), snap).dry_run is True
    assert plan(flowcon(), snap).dry_run is False


# --- Properties -----------------------------------------------------------------------------


def replay_by_the_listing(category: int, efficiencies: list[float], alpha: float) -> int:
    """Algorithm 1, lines 4-13, transliterated for one container."""
    for g in efficiencies:
        if g < alpha and category == NL:
            category = WL
        elif g < alpha and category == WL:
            category = CL
        elif g >= alpha:
            category = NL
    return category


ReplayCase = tuple[npt.NDArray[np.int8], npt.NDArray[np.float64], int, float]
efficiency_values = st.one_of(st.floats(0.0, 0.3), st.just(NAN))


@st.composite
def replays(draw: st.DrawFn) -> ReplayCase:
    n, m = draw(st.integers(0, 6)), draw(st.integers(0, 8))
    cats = draw(hnp.arrays(np.int8, n, elements=st.sampled_from([NL, WL, CL])))
    effs = draw(hnp.arrays(np.float64, (n, m), elements=efficiency_values))
    return cats, effs, draw(st.integers(0, m)), draw(st.sampled_from([0.01, 0.05, 0.1]))


@given(replays())
def test_replay_in_two_pieces_equals_one_go(case: ReplayCase) -> None:
    cats, effs, k, alpha = case
    whole = replay(cats, effs, alpha)
    assert np.array_equal(replay(replay(cats, effs[:, :k], alpha), effs[:, k:], alpha), whole)
    expected = [replay_by_the_listing(int(c), row.tolist(), alpha)
                for c, row in zip(cats, effs, strict=True)]
    assert whole.tolist() == expected


def test_replay_rejects_bad_shapes_and_codes() -> None:
    with pytest.raises(ValueError, match="efficiencies"):
        replay(np.zeros(2, np.int8), np.zeros((3, 1)), 0.05)
    with pytest.raises(ValueError, match="NL"):
        replay(np.array([3], np.int8), np.zeros((1, 1)), 0.05)


@st.composite
def clusters(draw: st.DrawFn) -> tuple[Snapshot, float, float]:
    interval = draw(st.sampled_from([20.0, 40.0, 80.0]))
    nodes = draw(st.integers(1, 3))
    built = []
    for i in range(draw(st.integers(0, 7))):
        size = draw(st.integers(0, 8))
        loss = draw(st.lists(st.one_of(st.floats(0.01, 10.0), st.just(NAN)),
                             min_size=size, max_size=size))
        cpu = draw(st.lists(st.floats(0.0, 4.0), min_size=max(size - 1, 0),
                            max_size=max(size - 1, 0)))
        built.append(job(
            f"c{i}", loss, node=f"w{draw(st.integers(0, nodes - 1))}", interval=interval, cpu=cpu,
            allocation=draw(st.floats(0.01, 1.0)),
            started_at=NOW - draw(st.floats(0.0, 20 * interval)) - (size * interval),
        ))
    snap = snapshot(*built, intervals={POLICY: interval})
    return snap, draw(st.floats(0.001, 0.5)), draw(st.floats(1.0, 4.0))


@settings(max_examples=150, deadline=None)
@given(clusters())
def test_limits_are_fractions_and_cl_keeps_its_floor(case: tuple[Snapshot, float, float]) -> None:
    snap, alpha, beta = case
    decision = plan(flowcon(alpha=alpha, beta=beta), snap)
    per_node = {n.name: sum(c.node == n.name for c in snap.containers) for n in snap.nodes}
    for a in decision.assessments:
        if a.cpu_fraction_next is None:
            assert a.category is None and a.note.startswith("no action: ")
            continue
        assert 0 < a.cpu_fraction_next <= 1
        if a.category == "CL":
            assert a.cpu_fraction_next >= 1 / (beta * per_node[a.node]) - 1e-12
    assert all(0 < a.fraction <= 1 for a in set_cpu(decision))
    assert len(decision.assessments) == len(snap.containers)


@settings(max_examples=75, deadline=None)
@given(clusters())
def test_same_snapshot_same_decision(case: tuple[Snapshot, float, float]) -> None:
    snap, alpha, beta = case
    policy = flowcon(alpha=alpha, beta=beta)
    first = decision_to_dict(plan(policy, snap))
    assert decision_to_dict(plan(policy, snap)) == first
    shuffled = Snapshot(time=snap.time, nodes=snap.nodes[::-1], containers=snap.containers[::-1],
                        intervals=snap.intervals)
    assert decision_to_dict(plan(policy, shuffled)) == first
    assert not any(isinstance(v, float) and math.isnan(v) for v in first.values())
