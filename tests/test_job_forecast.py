"""`JobForecast`'s check, made one object at a time (`__post_init__`) and on whole arrays
(`valid`, what `Forecasted.jobs()` reads 10,000 forecasts with): the two must agree row for row,
or a forecast the engine should refuse would reach a decision."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from policyd.model import JobForecast
from policyd.model.forecast import CHECKED, valid

ODD = [0.0, 1.0, 5.0, -0.0, -1.0, math.nan, math.inf, -math.inf, 1e-12, 3.0]


def row(rng: np.random.Generator) -> dict[str, float]:
    out = {name: float(rng.choice(ODD)) for name in CHECKED}
    if rng.random() < 0.5:  # half the rows well-formed apart from the range
        out.update(steps_done=1.0, remaining_steps=2.0, finish_at=9.0, steps_per_second=4.0)
    return out


def built(fields: dict[str, Any]) -> bool:
    try:
        JobForecast(**fields, total_steps=None, basis="total steps")
    except ValueError:
        return False
    return True


def test_the_array_check_agrees_with_the_objects_check_row_for_row() -> None:
    rng = np.random.default_rng(7)
    rows = [row(rng) for _ in range(3000)]
    columns = {name: np.array([r[name] for r in rows]) for name in CHECKED}
    by_arrays = valid(columns).tolist()
    by_objects = [built(r) for r in rows]
    assert by_arrays == by_objects
    assert 100 < sum(by_arrays) < len(rows) - 100  # both kinds of row were tried


def test_a_checked_forecast_equals_one_built_the_checking_way() -> None:
    fields: dict[str, Any] = {
        "steps_done": 10.0, "total_steps": 100.0, "remaining_steps": 90.0,
        "remaining_seconds": 45.0, "finish_at": 1045.0, "low_seconds": 40.0,
        "high_seconds": 50.0, "steps_per_second": 2.0, "basis": "total steps",
        "target_loss": None, "target_eta_seconds": None, "note": "",
        "remaining_improvement": 0.1}
    assert JobForecast.checked(fields) == JobForecast(**fields)
    with pytest.raises(ValueError, match="must hold"):
        JobForecast(**{**fields, "low_seconds": 46.0})
