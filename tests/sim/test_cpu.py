"""CPU sharing on one node: hand-computed water-filling cases, then the invariants."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from policyd.sim.cpu import _numpy_sum, share_cpu, share_node, weight_and_cap

INF = math.inf

SHARE_CASES = [
    # id, capacity, demands, weights, caps, expected cores
    ("zero jobs", 4.0, [], [], None, []),
    ("one job alone takes its demand", 4.0, [2.0], [1.0], None, [2.0]),
    ("one job wants more than the node", 2.0, [4.0], [1.0], None, [2.0]),
    # 1 core by weights 0.25 : 1 -> 0.25/1.25 and 1/1.25 (cpu_shares 256 vs 1024).
    ("weights 0.25 vs 1 on 1 core", 1.0, [1.0, 1.0], [0.25, 1.0], None, [0.2, 0.8]),
    ("equal weights split evenly", 1.0, [1.0, 1.0], [1.0, 1.0], None, [0.5, 0.5]),
    # Level 4/3 per job; the first is capped at 0.5, its leftover 0.83 goes to the others.
    ("capped job's leftover flows", 4.0, [4.0, 4.0, 4.0], [1.0, 1.0, 1.0], [0.5, INF, INF],
     [0.5, 1.75, 1.75]),
    ("demand below fair share", 4.0, [0.5, 4.0, 4.0], [1.0, 1.0, 1.0], None, [0.5, 1.75, 1.75]),
    # Level 1 per unit of weight: job 0 (demand 1) is exactly satisfied; 3 cores left for
    # weights 1 and 2.
    ("satisfied job then weights", 4.0, [1.0, 4.0, 4.0], [1.0, 1.0, 2.0], None, [1.0, 1.0, 2.0]),
    ("everyone satisfied leaves CPU idle", 8.0, [2.0, 3.0], [1.0, 1.0], None, [2.0, 3.0]),
    ("a quota cap leaves CPU idle", 4.0, [4.0], [1.0], [1.0], [1.0]),
    # Weight 0.1 of 1.1 entitles the first job to 0.36 cores: it wants 0.3, gets it all, and
    # the other takes the rest; wanting 0.5, it is held to its weighted 0.36.
    ("small weight, demand under its share", 4.0, [0.3, 4.0], [0.1, 1.0], None, [0.3, 3.7]),
    ("small weight, demand over its share", 4.0, [0.5, 4.0], [0.1, 1.0], None,
     [0.4 / 1.1, 4.0 / 1.1]),
]


@pytest.mark.parametrize(("capacity", "demands", "weights", "caps", "expected"),
                         [case[1:] for case in SHARE_CASES], ids=[c[0] for c in SHARE_CASES])
def test_share_cpu(capacity: float, demands: list[float], weights: list[float],
                   caps: list[float] | None, expected: list[float]) -> None:
    np.testing.assert_allclose(share_cpu(capacity, demands, weights, caps), expected, atol=1e-12)


NODE_CASES = [
    # id, capacity, demands, fractions, modes, expected
    ("NA: no limits, equal competition", 4.0, [4.0, 4.0], [1.0, 1.0], ["shares", "shares"],
     [2.0, 2.0]),
    ("shares: 0.25 is a weight (thesis: the CL job next to a new one)", 4.0, [4.0, 4.0],
     [0.25, 1.0], ["shares", "shares"], [0.8, 3.2]),
    ("shares: alone, a weight limits nothing", 4.0, [4.0], [0.25], ["shares"], [4.0]),
    ("quota: 0.25 of 4 cores is a 1-core cap", 4.0, [4.0, 4.0], [0.25, 1.0],
     ["quota", "quota"], [1.0, 3.0]),
    ("quota: alone, the cap leaves 3 cores idle", 4.0, [4.0], [0.25], ["quota"], [1.0]),
]


@pytest.mark.parametrize(("capacity", "demands", "fractions", "modes", "expected"),
                         [case[1:] for case in NODE_CASES], ids=[c[0] for c in NODE_CASES])
def test_share_node(capacity: float, demands: list[float], fractions: list[float],
                    modes: list[str], expected: list[float]) -> None:
    got = share_node(capacity, demands, fractions, modes)  # type: ignore[arg-type]
    np.testing.assert_allclose(got, expected, atol=1e-12)


def test_weight_and_cap_follow_docker() -> None:
    assert weight_and_cap(0.25, "shares", 4.0) == (0.25, INF)  # cpu_shares 256 of 1024
    assert weight_and_cap(0.25, "quota", 4.0) == (1.0, 1.0)  # --cpus 1
    with pytest.raises(ValueError, match="fraction"):
        weight_and_cap(0.0, "shares", 4.0)


@pytest.mark.parametrize(("demands", "weights", "caps", "match"), [
    ([1.0], [0.0], None, "weights"),
    ([-1.0], [1.0], None, "demands"),
    ([1.0, 1.0], [1.0], None, "equal length"),
    ([1.0], [1.0], [-1.0], "caps"),
], ids=["zero weight", "negative demand", "length mismatch", "negative cap"])
def test_share_cpu_rejects(demands: list[float], weights: list[float],
                           caps: list[float] | None, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        share_cpu(2.0, demands, weights, caps)


jobs = st.lists(
    st.tuples(st.floats(0, 8), st.floats(0.01, 4), st.one_of(st.just(INF), st.floats(0, 8))),
    max_size=8)


@given(capacity=st.floats(0, 16), jobs=jobs)
def test_share_cpu_is_fair_and_work_conserving(
        capacity: float, jobs: list[tuple[float, float, float]]) -> None:
    demands = [d for d, _, _ in jobs]
    weights = [w for _, w, _ in jobs]
    caps = [c for _, _, c in jobs]
    got = share_cpu(capacity, demands, weights, caps)
    limits = np.minimum(demands, caps)
    assert (got >= 0).all()
    assert (got <= limits + 1e-9).all()
    assert got.sum() <= capacity + 1e-9
    unsatisfied = got < limits - 1e-9
    if unsatisfied.any():
        # Work-conserving: nothing idles while a job wants more, and every unsatisfied job is
        # at the same level per unit of weight (no one below it could take more).
        assert got.sum() == pytest.approx(capacity, abs=1e-9)
        levels = got[unsatisfied] / np.asarray(weights)[unsatisfied]
        assert levels.max() - levels.min() <= 1e-9 * max(1.0, levels.max())


@given(values=st.lists(st.floats(1e-3, 1e3), max_size=20))
def test_the_sum_of_weights_is_numpys_to_the_last_bit(values: list[float]) -> None:
    # share_cpu adds a node's weights without numpy; its results must not change by a bit.
    assert _numpy_sum(values) == float(np.sum(np.array(values)))


@given(capacity=st.floats(0, 16), jobs=jobs)
def test_python_floats_and_arrays_share_alike(
        capacity: float, jobs: list[tuple[float, float, float]]) -> None:
    columns = [[job[k] for job in jobs] for k in range(3)]
    as_lists = share_cpu(capacity, *columns)
    as_arrays = share_cpu(capacity, *(np.array(c) for c in columns))
    assert as_lists.tobytes() == as_arrays.tobytes()
