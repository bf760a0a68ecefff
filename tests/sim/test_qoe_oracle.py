"""The QoE oracle and the simulator's scoring: the most targets met checked against every
subset, cores_for as the inverse of a job's speed, limit reversals counted after the first
minute, and the qoe-* scenarios' declared targets."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from policyd.sim import scenarios
from policyd.sim.profiles import load_profiles
from policyd.sim.qoe_oracle import OracleJob, cores_for, most_met, qoe_share
from policyd.sim.qoe_scenarios import target_job
from policyd.sim.targets import declared, direction_changes


def best_by_every_subset(needs: list[float | None], capacity: float) -> int:
    finite = [n for n in needs if n is not None and math.isfinite(n)]
    return max(k for k in range(len(finite) + 1)
               for subset in itertools.combinations(finite, k) if sum(subset) <= capacity + 1e-9)


@pytest.mark.parametrize("seed", range(30))
def test_most_met_is_as_many_as_any_subset(seed: int) -> None:
    rng = np.random.default_rng(seed)
    needs: list[float | None] = [float(x) for x in rng.uniform(0.2, 3.0, size=7)]
    needs[int(rng.integers(7))] = math.inf
    needs[int(rng.integers(7))] = None
    chosen = most_met(needs, 6.0)
    picked = [n for n, c in zip(needs, chosen, strict=True) if c]
    assert sum(n for n in picked if n is not None) <= 6.0 + 1e-9
    assert len(picked) == best_by_every_subset(needs, 6.0)


@pytest.mark.parametrize("cores", [0.4, 1.0, 1.7, 2.0])
def test_cores_for_inverts_the_speed(cores: float) -> None:
    job = target_job("j", load_profiles()["vae"], submit=0.0, need=1.0, node="w1")
    assert cores_for(job, job.rate_at(cores)) == pytest.approx(cores, rel=1e-6)
    assert cores_for(job, 10 * job.rate_at(job.profile.max_parallelism)) == math.inf


def test_the_oracle_share_gives_chosen_needs_and_never_more_than_the_node() -> None:
    cores = qoe_share(4.0, [OracleJob(demand=2.0, need=1.5), OracleJob(demand=2.0, need=3.0),
                            OracleJob(demand=1.0, need=None)])
    assert cores[0] >= 1.5 and cores[2] == pytest.approx(1.0)
    assert sum(cores) <= 4.0 + 1e-9


@pytest.mark.parametrize(("limits", "flips"), [
    pytest.param([(10.0, 0.5), (70.0, 0.6), (80.0, 0.4)], 1, id="early-change-not-counted"),
    pytest.param([(61.0, 0.5), (70.0, 0.6), (80.0, 0.4), (90.0, 0.7)], 3, id="down-up-down-up"),
    pytest.param([(61.0, 0.5), (70.0, 0.5), (80.0, 0.4)], 0, id="same-direction"),
])
def test_direction_changes(limits: list[tuple[float, float]], flips: int) -> None:
    assert direction_changes(limits, since=60.0) == flips


def test_every_qoe_scenario_declares_a_throughput_target_per_job() -> None:
    for name in ("qoe-fixed-8", "qoe-random-12", "qoe-random-32-4w", "qoe-burst-16-2w"):
        jobs = scenarios.build(name).jobs
        rates = [declared(j).rate for j in jobs]
        assert all(r is not None and r > 0 for r in rates), name
