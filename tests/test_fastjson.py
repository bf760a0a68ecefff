"""policyd.fastjson: every document decodes to what the standard library gives, and a broken
one fails with the standard library's exception and message."""

from __future__ import annotations

import gc
import json
import math
import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from policyd import fastjson

INT64 = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(st.characters(exclude_categories=()))  # lone surrogates included
SCALARS = st.none() | st.booleans() | INT64 | st.floats() | TEXT
DOCUMENTS = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(TEXT, inner, max_size=5),
    max_leaves=30,
)


def same(a: Any, b: Any) -> bool:
    """Equal, type for type, floats bit for bit (NaN included, -0.0 apart from 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a.hex() == b.hex() if not math.isnan(a) else math.isnan(b)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


@given(document=DOCUMENTS, ensure_ascii=st.booleans(), indent=st.sampled_from([None, 2]))
def test_decodes_what_the_standard_library_decodes(
        document: Any, ensure_ascii: bool, indent: int | None) -> None:
    text = json.dumps(document, ensure_ascii=ensure_ascii, indent=indent)
    for data in (text, text.encode("utf-8", "surrogatepass")):
        try:
            expected = json.loads(data)
        except UnicodeDecodeError:
            with pytest.raises(UnicodeDecodeError):
                fastjson.loads(data)
            continue
        assert same(fastjson.loads(data), expected)


BROKEN = [
    pytest.param(b'{"time": 1,\n "nodes": [}', id="syntax error, line 2"),
    pytest.param(b"", id="empty"),
    pytest.param(b"[1, 2,]", id="trailing comma"),
    pytest.param(b'{"a": 1} x', id="extra data"),
    pytest.param(b'"\xff"', id="not UTF-8"),
    pytest.param(b'{"a": "\x01"}', id="control character"),
    pytest.param(b"01", id="leading zero"),
]


@pytest.mark.parametrize("data", BROKEN)
def test_a_broken_document_fails_as_in_the_standard_library(data: bytes) -> None:
    with pytest.raises(ValueError) as expected:
        json.loads(data)
    with pytest.raises(ValueError) as got:
        fastjson.loads(data)
    assert type(got.value) is type(expected.value)
    assert str(got.value) == str(expected.value)


LENIENT = [
    pytest.param(b"[NaN, Infinity, -Infinity]", id="NaN and infinities"),
    pytest.param(b"[1e400]", id="overflow to infinity"),
    pytest.param(b'\xef\xbb\xbf{"a": 1}', id="UTF-8 byte order mark"),
    pytest.param('{"a": "Σ"}'.encode("utf-16"), id="UTF-16"),
    pytest.param(b'["\\ud800"]', id="lone surrogate"),
]


@pytest.mark.parametrize("data", LENIENT)
def test_what_only_the_standard_library_accepts_still_decodes(data: bytes) -> None:
    assert same(fastjson.loads(data), json.loads(data))


def test_the_fallback_decides_when_orjson_refuses() -> None:
    assert fastjson.loads(b"[1]", fallback=lambda: "unused") == [1]
    assert fastjson.loads(b"[NaN]", fallback=lambda: "fallback") == "fallback"


def test_integers_beyond_64_bits_are_read_as_floats() -> None:
    # The one documented difference (policyd.fastjson's docstring).
    assert fastjson.loads(b"[18446744073709551615, -9223372036854775808]") == [
        2**64 - 1, -(2**63)]
    assert fastjson.loads(b"[123456789012345678901234567890]") == [
        float(123456789012345678901234567890)]


def test_the_collector_is_paused_inside_and_restored_after() -> None:
    assert gc.isenabled()
    with fastjson.paused_gc():
        assert not gc.isenabled()
        with fastjson.paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner pause does not end the outer one
    assert gc.isenabled()
    with pytest.raises(ValueError), fastjson.paused_gc():
        raise ValueError
    assert gc.isenabled()
    gc.disable()
    try:
        with fastjson.paused_gc():
            pass
        assert not gc.isenabled()  # left as it was found
    finally:
        gc.enable()



def test_pauses_that_overlap_out_of_order_keep_the_collector_off_until_the_last_ends() -> None:
    # A query thread decoding while the cycle's thread builds the snapshot: whichever ends
    # first, the collector stays off for the other (the old save-and-restore turned it back on
    # under a pause still open when the first one to open closed first).
    first_opened, second_opened, first_closed = (threading.Event() for _ in range(3))
    seen: list[bool] = []

    def first() -> None:
        with fastjson.paused_gc():
            first_opened.set()
            second_opened.wait(5)
        first_closed.set()

    thread = threading.Thread(target=first)
    thread.start()
    first_opened.wait(5)
    with fastjson.paused_gc():
        second_opened.set()
        first_closed.wait(5)
        seen.append(gc.isenabled())
    thread.join(5)
    assert seen == [False] and gc.isenabled()

FINITE_DOCUMENTS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(TEXT, inner, max_size=5),
    max_leaves=30,
)


@given(document=FINITE_DOCUMENTS)
def test_dumps_means_what_the_standard_library_writes(document: Any) -> None:
    """Read back by the standard library, the text is the document json.dumps(indent=2) writes
    (bytes may differ: float forms, raw UTF-8), and it is indented the same way."""
    text = fastjson.dumps(document)
    assert same(json.loads(text), json.loads(json.dumps(document, indent=2)))
    expected = json.dumps(document, indent=2, ensure_ascii=False)
    assert [len(line) - len(line.lstrip(" ")) for line in text.split("\n")] == [
        len(line) - len(line.lstrip(" ")) for line in expected.split("\n")]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_dumps_refuses_what_json_cannot_say_as_the_standard_library_does(bad: float) -> None:
    """orjson would write null; policyd's documents never silently lose a number."""
    document = {"containers": [{"id": "a", "share": 0.5}, {"id": "b", "share": [1.0, bad]}]}
    with pytest.raises(ValueError, match="not JSON compliant"):
        json.dumps(document, allow_nan=False)
    with pytest.raises(ValueError, match="not JSON compliant"):
        fastjson.dumps(document)


def test_dumps_keeps_a_real_null() -> None:
    assert json.loads(fastjson.dumps({"share": None, "x": 1e-05})) == {"share": None, "x": 1e-05}


class _Ratio(float):
    """A float subclass (numpy's float64 is one too): not skipped by the walk's exact types."""


ANY_DOCUMENTS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXT
    | st.floats().map(_Ratio) | st.floats().map(np.float64),
    lambda inner: (st.lists(inner, max_size=5) | st.lists(inner, max_size=3).map(tuple)
                   | st.dictionaries(TEXT, inner, max_size=5)),
    max_leaves=30,
)


@given(document=ANY_DOCUMENTS)
def test_dumps_refuses_exactly_what_the_standard_library_refuses(document: Any) -> None:
    """Wherever a NaN or an infinity sits (in a tuple, a float subclass, numpy's float64),
    dumps refuses the document exactly when json.dumps(allow_nan=False) does."""
    try:
        json.dumps(document, allow_nan=False)
    except ValueError:
        with pytest.raises(ValueError, match="not JSON compliant"):
            fastjson.dumps(document)
    else:
        assert same(json.loads(fastjson.dumps(document)), json.loads(json.dumps(document)))
