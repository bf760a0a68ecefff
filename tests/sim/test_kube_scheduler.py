"""The default scheduler's scores, checked against values worked out by hand from the
formulas (policyd/sim/kube_scheduler.py, docs/design.md)."""

from __future__ import annotations

import numpy as np

from policyd.sim import kube_scheduler as ks
from policyd.sim.types import NodeSpec

TWO = NodeSpec(name="a", cores=2.0, memory_gib=8.0)


def test_least_allocated_counts_the_non_zero_default_requests() -> None:
    # 3 pods + this one: 400 m of 2000 m -> 80; 800 MiB of 8192 MiB -> 90 (90.23 floored)
    assert ks.fit_score(TWO, 3) == (80 + 90) // 2


def test_least_allocated_is_zero_once_requests_exceed_the_node() -> None:
    # 200 m of 100 m: 0; 400 MiB of 4096 MiB: 90
    assert ks.fit_score(NodeSpec(name="tiny", cores=0.1, memory_gib=4.0), 1) == (0 + 90) // 2


def test_balanced_allocation_is_one_minus_half_the_gap() -> None:
    # cpu 400/2000 = 0.2, memory 800/8192 = 0.0977: 1 - 0.0512 -> 94
    assert ks.balanced_score(TWO, 3) == 94


def test_image_locality_scales_by_spread_and_clamps() -> None:
    assert ks.image_score(False, 3, 4) == 0
    # 1500 MiB on 1 of 4 nodes: 375 MiB -> 100 * (375 - 23) // 977 = 36
    assert ks.image_score(True, 1, 4) == 36
    assert ks.image_score(True, 4, 4) == 100  # above the 1000 MiB ceiling


def test_ties_are_broken_by_the_generator_and_all_tied_nodes_are_reachable() -> None:
    nodes = [NodeSpec(name=n, cores=2.0) for n in ("a", "b", "c")]
    rng = np.random.default_rng(0)
    chosen = {ks.choose(nodes, {}, "img", {}, rng) for _ in range(60)}
    assert chosen == {"a", "b", "c"}


def test_the_node_with_the_image_wins_over_an_equally_empty_one() -> None:
    nodes = [NodeSpec(name=n, cores=2.0) for n in ("a", "b")]
    rng = np.random.default_rng(0)
    assert all(ks.choose(nodes, {}, "img", {"b": {"img"}}, rng) == "b" for _ in range(10))


def test_a_crowded_node_loses_to_an_emptier_one() -> None:
    nodes = [NodeSpec(name=n, cores=2.0) for n in ("a", "b")]
    scores = ks.scores(nodes, {"a": 5, "b": 0}, "img", {})
    assert scores["b"] > scores["a"]
