"""policyd.sources.matrix_body: a range answer read from its bytes is the Matrix `read_matrix`
makes of the decoded answer, bit for bit; an answer it cannot be sure of is left to the decoder
(None), never read differently."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from policyd.sources.matrix import Matrix, read_matrix
from policyd.sources.matrix_body import read_matrix_body
from tests.sources.builders import envelope, series
from tests.sources.test_matrix import VALUE_TEXTS

RECORDED = Path(__file__).parent / "payloads" / "kubernetes_cluster"


def decoded(body: bytes) -> Matrix:
    return read_matrix(orjson.loads(body)["data"]["result"])


def assert_same(got: Matrix | None, expected: Matrix) -> None:
    assert got is not None
    assert got.labels == expected.labels
    assert got.times.tobytes() == expected.times.tobytes()
    assert got.values.tobytes() == expected.values.tobytes()  # NaN and -0.0 included
    assert got.offsets.tolist() == expected.offsets.tolist()
    assert got.broken == expected.broken


@pytest.mark.parametrize("name", ["evaluation", "cpu", "steps"])
def test_a_real_prometheus_answer_reads_as_the_decoded_one(name: str) -> None:
    body = (RECORDED / f"{name}.json").read_bytes().strip()
    got = read_matrix_body(body)
    assert got is not None and len(got) > 0
    assert_same(got, decoded(body))


LABELS = st.dictionaries(st.sampled_from(["pod", "values", "value", "namespace", "a_b"]),
                         st.text(max_size=8), max_size=3)
TIMES = st.integers(0, 2**40) | st.floats(0, 2e9, allow_nan=False)
SERIES = st.lists(st.tuples(TIMES, VALUE_TEXTS), max_size=6)


@given(entries=st.lists(st.tuples(LABELS, SERIES), max_size=6))
def test_any_compact_answer_reads_as_the_decoded_one_or_is_left_to_it(
        entries: list[tuple[dict[str, str], list[tuple[float, str]]]]) -> None:
    result = [{"metric": labels, "values": [[t, v] for t, v in samples]}
              for labels, samples in entries]
    body = orjson.dumps(envelope(result))
    got = read_matrix_body(body)
    texts = [v for _, samples in entries for _, v in samples]
    if not entries or any(v in {"-0", "+Inf", "-Inf"} for v in texts):
        assert got is None  # the decoder reads these (numpy's -0.0, the infinities)
    else:
        assert_same(got, decoded(body))


GOOD = orjson.dumps(envelope([series({"pod": "a"}, [0.5, float("nan")], [1.0, 2.5]),
                              series({"pod": "b"}, []),
                              series({"pod": "c"}, ["1e+06"], [3])]))


def test_empty_series_keep_their_place() -> None:
    got = read_matrix_body(GOOD)
    assert got is not None
    assert got.offsets.tolist() == [0, 2, 2, 3]
    assert_same(got, decoded(GOOD))


@pytest.mark.parametrize("body", [
    pytest.param(orjson.dumps(envelope([series({"pod": "a"}, [0.5])]),
                              option=orjson.OPT_INDENT_2), id="whitespace"),
    pytest.param(GOOD.replace(b'"1e+06"', b"1e+06"), id="a-value-not-a-string"),
    pytest.param(GOOD.replace(b'[3,"1e+06"]', b'["3","1e+06"]'), id="a-time-a-string"),
    pytest.param(GOOD.replace(b'[3,"1e+06"]', b'[3,"1e+06","2"]'), id="three-in-a-pair"),
    pytest.param(GOOD.replace(b'[3,"1e+06"]', b'[3]'), id="one-in-a-pair"),
    pytest.param(GOOD.replace(b'"1e+06"', b'"abc"'), id="not-a-number"),
    pytest.param(GOOD.replace(b'"1e+06"', b'"1e"'), id="a-broken-number"),
    pytest.param(GOOD.replace(b'"1e+06"', b'"aNaN"'), id="NaN-inside-letters"),
    pytest.param(GOOD.replace(b'"1e+06"', b'null'), id="null"),
    pytest.param(GOOD.replace(b'"values":[]', b'"value":[]'), id="an-entry-without-values"),
    pytest.param(GOOD.replace(b'"matrix"', b'"vector"'), id="not-a-matrix"),
    pytest.param(GOOD.replace(b'{"pod":"c"}', b'{"pod":"c"},"values":[[1,"2"]]'),
                 id="two-blocks-in-one-entry"),
    pytest.param(orjson.dumps(envelope([])), id="no-series"),
    pytest.param(b'{"status":"success","data":{"resultType":"matrix","result":[{"values":[',
                 id="cut-off"),
    pytest.param(b"<html>proxy</html>", id="not-json"),
])
def test_what_it_cannot_be_sure_of_is_left_to_the_decoder(body: bytes) -> None:
    assert read_matrix_body(body) is None


def test_a_label_that_reads_like_a_block_is_a_label() -> None:
    result: list[dict[str, Any]] = [series({"pod": '"values":[[1,"2"]]'}, [0.5], [1.0])]
    body = orjson.dumps(envelope(result))
    got = read_matrix_body(body)
    assert got is not None and got.labels == ({"pod": '"values":[[1,"2"]]'},)
    assert got.values.tolist() == [0.5]


def test_read_matrix_takes_a_matrix_read_from_bytes_as_it_is() -> None:
    got = read_matrix_body(GOOD)
    assert got is not None and read_matrix(got) is got
    assert np.isnan(got.values[1])


@given(entries=st.lists(st.tuples(LABELS, SERIES), min_size=1, max_size=8),
       chunk_pairs=st.integers(1, 5))
def test_read_in_pieces_it_reads_as_at_once(
        entries: list[tuple[dict[str, str], list[tuple[float, str]]]], chunk_pairs: int) -> None:
    result = [{"metric": labels, "values": [[t, v] for t, v in samples]}
              for labels, samples in entries]
    body = orjson.dumps(envelope(result))
    at_once = read_matrix_body(body, chunk_pairs=10**9)
    in_pieces = read_matrix_body(body, chunk_pairs=chunk_pairs)
    if at_once is None:
        assert in_pieces is None  # a bad pair in any piece leaves the whole answer to the decoder
    else:
        assert_same(in_pieces, at_once)


def test_a_bad_pair_in_a_later_piece_leaves_the_answer_to_the_decoder() -> None:
    body = GOOD.replace(b'"1e+06"', b'"abc"')
    assert read_matrix_body(GOOD, chunk_pairs=1) is not None
    assert read_matrix_body(body, chunk_pairs=1) is None
