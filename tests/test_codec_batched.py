"""Reading a snapshot converts every container's series in one batch: each series is the one
`Series.from_pairs` reads alone, and one malformed pair anywhere still gets its own message
(hypothesis-generated documents)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policyd.model import Series
from policyd.model.codec import SnapshotError, snapshot_from_dict

# What numpy reads as a number, as np.array(pairs) reads it: None is NaN, "1.5" is 1.5.
NUMBER = (st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(10**20), 10**20)
          | st.none() | st.booleans() | st.sampled_from(["1.5", " -2e3 ", "NaN", "+Inf"]))
PAIR = st.tuples(NUMBER, NUMBER).map(list)
BAD_PAIR = st.sampled_from([[1.0], [1.0, 2.0, 3.0], ["x", 1.0], [None, [1.0]], [], "12",
                            [10**400, 1.0], {"t": 1}, 7])
SERIES = st.lists(PAIR, max_size=5)


def document(series: list[tuple[list[Any], list[Any]]]) -> dict[str, Any]:
    return {
        "time": 1e9, "nodes": [{"name": "w", "cpu_capacity": 4.0}],
        "containers": [{"id": f"c{i}", "node": "w", "started_at": 0.0, "evaluation": e,
                        "cpu_usage": u} for i, (e, u) in enumerate(series)],
    }


def alone(pairs: list[Any]) -> Series:
    return Series.from_pairs(pairs)


def same(a: Series, b: Series) -> bool:
    return (a.problem == b.problem and a.times_seconds.tobytes() == b.times_seconds.tobytes()
            and a.values.tobytes() == b.values.tobytes())


@given(series=st.lists(st.tuples(SERIES, SERIES), max_size=6))
def test_each_series_is_what_it_reads_as_alone(series: list[tuple[list[Any], list[Any]]]
                                               ) -> None:
    snapshot = snapshot_from_dict(document(series))
    for container, (evaluation, usage) in zip(snapshot.containers, series, strict=True):
        assert same(container.evaluation, alone(evaluation))
        assert same(container.cpu_usage, alone(usage))


@given(series=st.lists(st.tuples(SERIES, SERIES), min_size=1, max_size=4),
       where=st.integers(0, 100), bad=BAD_PAIR, usage=st.booleans())
def test_a_malformed_pair_is_reported_where_it_is(
        series: list[tuple[list[Any], list[Any]]], where: int, bad: Any, usage: bool) -> None:
    i = where % len(series)
    broken = [*series[i][1 if usage else 0], bad]
    series[i] = (series[i][0], broken) if usage else (broken, series[i][1])
    key = "cpu_usage" if usage else "evaluation"
    try:
        expected = alone(broken)
    except (TypeError, ValueError, OverflowError) as exc:  # [[1, 2], [1]]; [[]] is empty
        with pytest.raises(SnapshotError) as info:
            snapshot_from_dict(document(series))
        assert info.value.problems == [f"containers[{i}].{key}: {exc}"]
    else:
        container = snapshot_from_dict(document(series)).containers[i]
        assert same(container.cpu_usage if usage else container.evaluation, expected)


def test_an_empty_document_has_no_series_to_convert() -> None:
    snapshot = snapshot_from_dict(document([([], [])]))
    assert len(snapshot.containers[0].evaluation) == 0
    assert math.isfinite(snapshot.time)
