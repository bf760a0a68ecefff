"""policyd.sources.matrix: the one-pass conversion of sample values reads every text as numpy's
own conversion does, and a text numpy refuses still spoils only its own series."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from policyd.sources.matrix import _numbers, read_matrix

# What Prometheus writes (Go's FormatFloat 'f' -1 and the exponent forms other PromQL engines
# use), and texts near them that are not numbers.
FINITE = st.floats(allow_nan=False, allow_infinity=False).filter(lambda v: v != 0.0)
VALUE_TEXTS = (FINITE.map(repr) | FINITE.map(lambda v: f"{v:f}") | FINITE.map(lambda v: f"{v:e}")
               | st.integers(-(10**30), 10**30).map(str)
               | st.sampled_from(["NaN", "+Inf", "-Inf", "0", "-0", "-0.0", "1e+06", "1E-3",
                                 "1e-0"]))
ODD_TEXTS = st.sampled_from(["", ".5", "+1.5", "1,2", "null", '"1"', "1..2", "0x10", "aNaN",
                             "NaN1", "1e", " 1"])


def numpy_reads(texts: list[Any]) -> np.ndarray | None:
    try:
        return np.array(texts, dtype=np.float64)
    except (TypeError, ValueError):
        return None


@given(texts=st.lists(VALUE_TEXTS, max_size=40))
def test_numbers_are_numpy_s_conversion_bit_for_bit(texts: list[str]) -> None:
    expected = numpy_reads(texts)
    assert expected is not None
    got = _numbers(texts)
    assert got.dtype == np.float64 and got.shape == expected.shape
    assert got.tobytes() == expected.tobytes()


@given(texts=st.lists(VALUE_TEXTS | ODD_TEXTS, max_size=20))
def test_texts_that_are_not_one_number_fail_as_numpy_fails(texts: list[str]) -> None:
    expected = numpy_reads(texts)
    if expected is None:
        with pytest.raises(ValueError):
            _numbers(texts)
    else:
        assert _numbers(texts).tobytes() == expected.tobytes()


def test_a_bad_value_spoils_only_its_own_series() -> None:
    result = [{"metric": {"pod": "a"}, "values": [[1.0, "0.5"], [2.0, "NaN"]]},
              {"metric": {"pod": "b"}, "values": [[1.0, "1,5"], [2.0, "2"]]},
              {"metric": {"pod": "c"}, "values": [[1.0, "+Inf"], [2.0, "1e+06"]]}]
    matrix = read_matrix(result)
    assert matrix.broken == (None, 'has a sample that is not a [time, "number"] pair', None)
    assert matrix.offsets.tolist() == [0, 2, 2, 4]
    assert matrix.values[0] == 0.5 and np.isnan(matrix.values[1])
    assert matrix.values[2:].tolist() == [np.inf, 1e6]
