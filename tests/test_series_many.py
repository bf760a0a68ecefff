"""Series.many builds, from two flat arrays and offsets, exactly the series Series.of builds
from each slice: the same arrays and the same problem (hypothesis-generated, NaN, Inf, repeats
and empty series included)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from policyd.model import Series

TIMES = st.sampled_from([0.0, 1.0, 2.0, 2.0, 3.5, -1.0, 1e9, math.nan, math.inf, -math.inf])
ONE = st.lists(st.tuples(TIMES, st.floats(allow_nan=True, allow_infinity=True)), max_size=6)


def assert_same(got: Series, expected: Series) -> None:
    assert got.problem == expected.problem
    for a, b in ((got.times_seconds, expected.times_seconds), (got.values, expected.values)):
        assert a.dtype == b.dtype == np.float64 and a.shape == b.shape
        assert a.tobytes() == b.tobytes()
        assert not a.flags.writeable


@given(series=st.lists(ONE, max_size=8), increasing=st.booleans())
def test_many_equals_of_on_each_slice(series: list[list[tuple[float, float]]],
                                      increasing: bool) -> None:
    if increasing:  # mostly well-formed series too, not only broken ones
        series = [[(float(k), v) for k, (_, v) in enumerate(s)] for s in series]
    times = [t for s in series for t, _ in s]
    values = [v for s in series for _, v in s]
    offsets = np.concatenate(([0], np.cumsum([len(s) for s in series]))).astype(np.int64)
    got = Series.many(np.array(times, dtype=np.float64), np.array(values, dtype=np.float64),
                      offsets)
    assert len(got) == len(series)
    for g, s in zip(got, series, strict=True):
        assert_same(g, Series.of([t for t, _ in s], [v for _, v in s]))


def test_a_step_back_across_two_series_is_no_problem() -> None:
    first, second = Series.many(np.array([5.0, 6.0, 1.0, 2.0, 2.0]), np.zeros(5), [0, 2, 5])
    assert first.problem is None
    assert second.problem == "sample times are not increasing at index 2 (t=2)"


@pytest.mark.parametrize(("offsets", "times"), [
    ([0, 3], [1.0, 2.0]),
    ([1, 2], [1.0, 2.0]),
    ([0, 2, 1, 2], [1.0, 2.0]),
    ([], [1.0]),
], ids=["past-the-end", "not-from-zero", "falling", "none"])
def test_offsets_must_cover_the_samples(offsets: list[int], times: list[float]) -> None:
    with pytest.raises(ValueError, match="offsets"):
        Series.many(np.array(times), np.zeros(len(times)), offsets)


@given(times=st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=8))
def test_of_reports_the_first_step_that_does_not_rise(times: list[float]) -> None:
    steps = [b - a for a, b in itertools.pairwise(times)]  # the definition
    at = next((k + 1 for k, step in enumerate(steps) if step <= 0), None)
    expected = None if at is None else (
        f"sample times are not increasing at index {at} (t={times[at]:g})")
    assert Series.of(times, [0.0] * len(times)).problem == expected
