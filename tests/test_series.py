"""The shared readings of the evaluation function (policyd.engine.series).

The batched implementation is checked against a plain per-container reading written straight
from the definition, on hand-made cases and on hypothesis-generated ones.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policyd.engine.series import boundaries, gains, mean_cpu_cores, sample_window
from policyd.model import Container, Series

NAN = float("nan")


def job(times: list[float], values: list[float], *, cpu_times: list[float] | None = None,
        cpu: list[float] | None = None, cid: str = "c") -> Container:
    return Container(
        id=cid, name=cid, node="w", started_at=times[0] if times else 0.0,
        evaluation=Series.of(times, values),
        cpu_usage=Series.of(cpu_times or [], cpu or []),
    )


def read(c: Container, now: float, interval: float, steps: int) -> list[float]:
    """E(t_m) by the definition: the last sample at or before t_m."""
    out = []
    for t_m in boundaries(now, interval, steps):
        held = [v for t, v in zip(c.evaluation.times_seconds, c.evaluation.values, strict=True)
                if t <= t_m]
        out.append(held[-1] if held else NAN)
    return out


def test_reading_holds_the_previous_value_between_samples() -> None:
    c = job([0, 10, 25], [4.0, 3.0, 2.0])
    w = sample_window([c], now=30, interval_seconds=10, intervals=3, max_sample_age_seconds=20)
    assert w.boundaries.tolist() == [0, 10, 20, 30]
    assert w.values.tolist() == [[4.0, 3.0, 3.0, 2.0]]
    assert w.first.tolist() == [0]
    assert w.problems == (None,)


def test_boundaries_before_the_first_sample_are_unreadable_not_a_problem() -> None:
    c = job([15, 25], [4.0, 3.0])
    w = sample_window([c], now=30, interval_seconds=10, intervals=3, max_sample_age_seconds=20)
    assert np.isnan(w.values[0, :2]).all()
    assert w.values[0, 2:].tolist() == [4.0, 3.0]
    assert w.first.tolist() == [2]
    assert w.problems == (None,)


def test_a_sample_before_the_window_supplies_t0() -> None:
    c = job([-500, 15], [9.0, 3.0])
    w = sample_window([c], now=30, interval_seconds=10, intervals=3, max_sample_age_seconds=600)
    assert w.values.tolist() == [[9.0, 9.0, 3.0, 3.0]]


@pytest.mark.parametrize(
    ("times", "values", "expected"),
    [
        pytest.param([0, 10, 20, 30], [4, NAN, 2, 1], "evaluation is nan at t=10", id="nan"),
        pytest.param([0, 10, 20, 30], [4, 3, math.inf, 1], "evaluation is inf at t=20", id="inf"),
        pytest.param([-5, 30], [4, 2], "gap: no evaluation sample for 25 s before t=20 "
                     "(more than 20 s)", id="gap"),
        pytest.param([0, 20, 10, 30], [4, 3, 2, 1],
                     "sample times are not increasing at index 2 (t=10)", id="unsorted"),
        pytest.param([0, 10, 10, 30], [4, 3, 2, 1],
                     "sample times are not increasing at index 2 (t=10)", id="duplicate-time"),
    ],
)
def test_problems_name_the_place(times: list[float], values: list[float], expected: str) -> None:
    healthy = job([0, 10, 20, 30], [4, 3, 2, 1], cid="ok")
    broken = job(times, values, cid="bad")
    w = sample_window([healthy, broken, healthy.__class__(**{**healthy.__dict__, "id": "ok2"})],
                      now=30, interval_seconds=10, intervals=3, max_sample_age_seconds=20)
    assert w.problems == (None, expected, None)
    assert w.values[0].tolist() == [4, 3, 2, 1]
    assert w.values[2].tolist() == [4, 3, 2, 1]


def test_nan_outside_the_readings_does_not_matter() -> None:
    c = job([0, 5, 10, 20, 30], [4, NAN, 3, 2, 1])
    w = sample_window([c], now=30, interval_seconds=10, intervals=3, max_sample_age_seconds=20)
    assert w.problems == (None,)


def test_gains_relative_and_absolute() -> None:
    c = job([0, 10, 20], [4.0, 2.0, 1.0])
    w = sample_window([c], now=20, interval_seconds=10, intervals=2, max_sample_age_seconds=20)
    assert gains(w, "relative").tolist() == [[0.5, 0.5]]
    assert gains(w, "absolute").tolist() == [[2.0, 1.0]]


@pytest.mark.parametrize(("direction", "expected"), [
    pytest.param("minimize", [[0.5, 0.0, 0.0]], id="loss-a-rise-is-no-gain"),
    pytest.param("maximize", [[0.0, 1.0, 0.0]], id="accuracy-a-fall-is-no-gain"),
])
def test_gain_improvement_counts_only_the_better_direction(
        direction: str, expected: list[list[float]]) -> None:
    c = job([0, 10, 20, 30], [4.0, 2.0, 4.0, NAN])
    w = sample_window([c], now=30, interval_seconds=10, intervals=3, max_sample_age_seconds=20)
    got = gains(w, "relative", gain="improvement", direction=direction)  # type: ignore[arg-type]
    assert got[:, :2].tolist() == [row[:2] for row in expected]
    assert math.isnan(got[0, 2])  # no reading stays no reading, never a zero gain
    assert gains(w, "relative")[:, :2].tolist() == [[0.5, 1.0]]  # magnitude: either way


def test_relative_gain_of_a_zero_reading_does_not_divide_by_zero() -> None:
    c = job([0, 10], [0.0, 1.0])
    w = sample_window([c], now=10, interval_seconds=10, intervals=1, max_sample_age_seconds=20)
    assert gains(w, "relative")[0, 0] == pytest.approx(1e12)


def test_mean_cpu_is_the_mean_inside_the_interval_else_the_held_sample() -> None:
    c = job([0, 10, 20, 30], [4, 3, 2, 1], cpu_times=[5, 10, 12, 18, 22], cpu=[1, 3, 0.5, 0.5, 2])
    w = sample_window([c], now=30, interval_seconds=10, intervals=3, max_sample_age_seconds=20)
    cores = mean_cpu_cores([c], w, now=30).cores
    # (0, 10]: samples at 5 and 10 -> 2.0; (10, 20]: 12 and 18 -> 0.5; (20, 30]: 22 -> 2.0
    assert cores.tolist() == [[2.0, 0.5, 2.0]]


def test_mean_cpu_without_samples_in_an_interval_holds_the_last_one() -> None:
    c = job([0, 10, 20, 30], [4, 3, 2, 1], cpu_times=[9], cpu=[1.5])
    w = sample_window([c], now=30, interval_seconds=10, intervals=3, max_sample_age_seconds=20)
    assert mean_cpu_cores([c], w, now=30).cores.tolist() == [[1.5, 1.5, 1.5]]


def test_mean_cpu_is_nan_without_any_sample() -> None:
    c = job([0, 10], [4, 3])
    w = sample_window([c], now=10, interval_seconds=10, intervals=1, max_sample_age_seconds=20)
    assert np.isnan(mean_cpu_cores([c], w, now=10).cores).all()


def test_empty_container_list() -> None:
    w = sample_window([], now=10, interval_seconds=10, intervals=2, max_sample_age_seconds=20)
    assert w.values.shape == (0, 3)
    assert gains(w, "relative").shape == (0, 2)


sample_lists = st.lists(
    st.tuples(st.integers(-50, 130), st.floats(0.01, 100.0)), min_size=0, max_size=12,
    unique_by=lambda p: p[0],
).map(sorted)


@settings(max_examples=200, deadline=None)
@given(st.lists(sample_lists, min_size=1, max_size=6), st.sampled_from([5.0, 10.0, 17.5]),
       st.integers(1, 8))
def test_batched_reading_equals_the_definition(series: list[list[tuple[int, float]]],
                                               interval: float, steps: int) -> None:
    containers = [
        job([float(t) for t, _ in s], [v for _, v in s], cid=f"c{i}")
        for i, s in enumerate(series)
    ]
    now = 120.0
    w = sample_window(containers, now=now, interval_seconds=interval, intervals=steps,
                      max_sample_age_seconds=1e9)
    for i, c in enumerate(containers):
        expected = read(c, now, interval, steps)
        np.testing.assert_array_equal(w.values[i], np.array(expected))


@pytest.mark.parametrize("bad", [
    pytest.param([NAN, 1.0], id="nan"),
    # Finite, but two of them overflow the prefix sums every container's samples share: each
    # container packed after read NaN cores (inf - inf) before such figures were broken ones.
    pytest.param([1e308, 1e308], id="beyond-a-million-cores"),
])
def test_a_bad_cpu_sample_spoils_only_its_own_interval_and_container(bad: list[float]) -> None:
    first = job([0, 10, 20], [4, 3, 2], cpu_times=[5, 15], cpu=bad, cid="a")
    second = job([0, 10, 20], [4, 3, 2], cpu_times=[5, 15], cpu=[2.0, 2.0], cid="b")
    w = sample_window([first, second], now=20, interval_seconds=10, intervals=2,
                      max_sample_age_seconds=20)
    cpu = mean_cpu_cores([first, second], w, now=20)
    assert np.isnan(cpu.cores[0]).all()
    assert cpu.problems == ("cpu_usage is not a finite number in (0, 10]", None)
    assert cpu.cores[1].tolist() == [2.0, 2.0]


def test_unordered_cpu_times_make_the_cpu_unknown() -> None:
    c = job([0, 10, 20], [4, 3, 2], cpu_times=[15, 5], cpu=[1.0, 1.0])
    w = sample_window([c], now=20, interval_seconds=10, intervals=2, max_sample_age_seconds=20)
    cpu = mean_cpu_cores([c], w, now=20)
    assert np.isnan(cpu.cores).all()
    assert cpu.problems == ("cpu_usage series: sample times are not increasing at index 1 (t=5)",)
