"""The Deadline kind's arithmetic: the cores a forecast needs to finish in time (Amdahl's law
inverted), and the split of a worker's cores in rounds (floors, needs earliest deadline first,
the rest up to what each job uses, hopeless jobs last)."""

from __future__ import annotations

import math

import pytest

from policyd.engine.deadline_cores import Ask, cores_for, parallel_share, split
from policyd.engine.forecast_output import Forecast


def forecast(*, steps: float, serial: float, parallel: float) -> Forecast:
    """`steps` left, each taking serial + parallel / cores seconds."""
    return Forecast(steps_done=0.0, total_steps=steps, remaining_steps=steps,
                    remaining_seconds=steps * (serial + parallel), finish_at=0.0,
                    low_seconds=0.0, high_seconds=0.0, target_loss=None,
                    target_eta_seconds=None, basis="total steps",
                    steps_per_second=1.0 / (serial + parallel),
                    parallel_fraction=parallel / (serial + parallel), serial_seconds=serial,
                    parallel_seconds=parallel, cap_cores=8.0)


@pytest.mark.parametrize(
    ("seconds", "cores"),
    [
        pytest.param(100.0, 1.0, id="one-core-exactly"),
        pytest.param(200.0, 0.5, id="half-a-core"),
        pytest.param(60.0, 2.0, id="two-cores"),  # 100 (0.2 + 0.8 / c) = 60 -> c = 2
        pytest.param(20.0, math.inf, id="below-the-serial-part"),
        pytest.param(0.0, math.inf, id="no-time"),
    ],
)
def test_cores_for_inverts_the_speed_model(seconds: float, cores: float) -> None:
    f = forecast(steps=100.0, serial=0.2, parallel=0.8)
    assert cores_for(f, seconds) == pytest.approx(cores)
    if math.isfinite(cores) and cores >= 1:
        assert 100.0 * f.seconds_per_step_at(cores) == pytest.approx(seconds)


def test_nothing_left_needs_no_cores() -> None:
    assert cores_for(forecast(steps=0.0, serial=0.2, parallel=0.8), 10.0) == 0.0


def ask(need: float = 0.0, *, floor: float = 0.1, most: float = 4.0, order: float = math.inf,
        rank: str = "extra", fill: float | None = None, probe: float | None = None) -> Ask:
    return Ask(floor=floor, need=need, most=most, order=order, rank=rank, fill=fill,
               probe=probe)


@pytest.mark.parametrize(
    ("asks", "capacity", "cores"),
    [
        # floors 0.1 each; the earlier deadline takes its 2.9 more, the later the 0.9 left
        pytest.param([ask(3.0, order=10), ask(3.0, order=5)], 4.0, [1.0, 3.0],
                     id="earliest-deadline-first"),
        pytest.param([ask(2.5, order=5), ask()], 4.0, [2.5, 1.5],
                     id="no-deadline-gets-what-is-left"),
        pytest.param([ask(most=1.0), ask(most=4.0)], 4.0, [1.0, 3.0],
                     id="nobody-beyond-what-it-can-use"),
        pytest.param([ask(rank="last"), ask(most=3.0)], 4.0, [1.0, 3.0],
                     id="hopeless-share-what-nobody-takes"),
        pytest.param([ask(rank="last"), ask(most=4.0)], 4.0, [0.1, 3.9],
                     id="hopeless-keep-the-floor"),
        pytest.param([ask(floor=2.0), ask(floor=6.0)], 4.0, [4 / 3, 8 / 3],  # 2 : 4 (most)
                     id="floors-that-do-not-fit-shrink-alike"),
        pytest.param([ask(fill=1.0, most=1.5), ask(fill=1.0, most=1.5)], 4.0, [1.5, 1.5],
                     id="growth-only-from-cores-left-over"),
        pytest.param([ask(fill=1.0, most=4.0), ask(most=1.5)], 4.0, [2.5, 1.5],
                     id="shown-use-first-then-growth"),
        pytest.param([ask(fill=2.0, most=3.0, probe=2.3)], 4.0, [2.3],
                     id="growth-on-trust-up-to-the-probe"),
        pytest.param([ask(3.0, order=1, fill=2.0, most=3.0, probe=2.3)], 4.0, [3.0],
                     id="a-need-is-not-bound-by-the-probe"),
        pytest.param([ask(fill=2.0, most=3.0, probe=1.0)], 4.0, [2.0],
                     id="a-probe-never-takes-back-shown-use"),
    ],
)
def test_split(asks: list[Ask], capacity: float, cores: list[float]) -> None:
    assert split(asks, capacity) == pytest.approx(cores)


@pytest.mark.parametrize(
    ("serial", "parallel", "cores", "share"),
    [
        pytest.param(0.5, 0.5, 2.0, 1 / 3, id="half-parallel-at-two-cores"),  # 0.25 / 0.75
        pytest.param(0.5, 0.5, 1.0, 0.5, id="half-parallel-at-one-core"),
        pytest.param(0.0, 1.0, 4.0, 1.0, id="all-parallel"),
        pytest.param(1.0, 0.0, 2.0, 0.0, id="all-serial"),
        pytest.param(0.5, 0.5, 0.5, 1.0, id="below-one-core-time-slicing-shortens-all"),
        pytest.param(math.nan, math.nan, 2.0, 1.0, id="no-model-yet"),
    ],
)
def test_parallel_share_is_what_more_cores_shorten_of_a_step(
        serial: float, parallel: float, cores: float, share: float) -> None:
    f = forecast(steps=100.0, serial=serial, parallel=parallel)
    assert parallel_share(f, cores) == pytest.approx(share)
