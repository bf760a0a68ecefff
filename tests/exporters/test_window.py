"""The smoothing window behind policyd_training_loss."""

from __future__ import annotations

import math

import pytest
from policyd_exporters.window import DEFAULT_SMOOTHING_STEPS, RunningMean


def test_default_matches_the_simulator() -> None:
    # policyd.sim.types.REPORT_WINDOW_ITERATIONS models the exporter: keep them equal.
    assert DEFAULT_SMOOTHING_STEPS == 100


@pytest.mark.parametrize(
    ("size", "values", "expected"),
    [
        pytest.param(3, [], None, id="empty"),
        pytest.param(3, [4.0], 4.0, id="fewer-than-size"),
        pytest.param(3, [1.0, 2.0, 3.0, 10.0], 5.0, id="oldest-drops-out"),
        pytest.param(1, [1.0, 7.0], 7.0, id="size-1-is-raw"),
        pytest.param(3, [1.0, math.nan, 3.0], 2.0, id="nan-skipped"),
        pytest.param(3, [1.0, math.inf, -math.inf], 1.0, id="inf-skipped"),
        pytest.param(2, [1.0, math.nan, math.nan], None, id="all-invalid"),
        pytest.param(2, [math.nan, math.nan, 5.0], 5.0, id="recovers"),
    ],
)
def test_mean(size: int, values: list[float], expected: float | None) -> None:
    w = RunningMean(size)
    for v in values:
        w.add(v)
    assert w.mean() == (None if expected is None else pytest.approx(expected))


def test_slots_round_trip() -> None:
    w = RunningMean(3)
    for v in [1.0, math.nan, 2.0, 4.0]:
        w.add(v)
    again = RunningMean(3)
    again.restore(w.slots())
    assert again.slots() == [None, 2.0, 4.0]
    assert again.mean() == 3.0


def test_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="smoothing_steps must be >= 1"):
        RunningMean(0)
