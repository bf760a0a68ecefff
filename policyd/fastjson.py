"""Decoding large JSON documents fast (orjson), with the standard library's results and errors.

Snapshot files and Prometheus answers run to tens of megabytes (a 10,000-container cycle is
~40 MB); the standard library's decoder spends over a second on one, orjson a fraction of it.
orjson is stricter than the standard library: it refuses NaN and Infinity, byte order marks,
UTF-16 and lone surrogates, which `json` accepts. So `loads` tries orjson and, only when
orjson refuses the document, decodes it again the old way: every document decodes to what it
always did, and a broken one fails with the standard library's exception and message (line
and column included), which callers turn into their messages.

Decoding 40 MB makes some four million Python objects, and the cyclic garbage collector,
which runs every few hundred allocations and ever more often over the older objects, traverses
them again and again: it took two thirds of the decoding time. A decoded document cannot hold a
reference cycle (nor can the snapshot built from it), so `loads` pauses the collector while it
decodes, and callers that build a snapshot from the result pause it over both
(`paused_gc`): the objects are still freed, by reference counting, when dropped.

One difference remains, on purpose: an integer beyond 64 bits is read as the nearest float
(the standard library keeps a Python int). Every number policyd reads from these documents is
used as a float anyway.

`dumps` encodes a large document (a 10,000-container decision is ~12 MB of indented text): the
standard library's encoder falls back to pure Python as soon as it indents, 0.6 s for that
decision, orjson 0.03 s. Its text means the same to any JSON reader, but the bytes differ:
floats in the shortest form (1e-05 is written 1e-5, 1e16 is 1e16, not 1e+16) and non-ASCII
characters as UTF-8, not \\u escapes. NaN and infinities, which JSON cannot express, are
refused as the standard library refuses them with allow_nan=False (a ValueError), never written
as null; what orjson cannot encode at all (a lone surrogate, an integer beyond 64 bits) is
encoded by the standard library.

Must not: read files or sockets (callers pass the bytes), or encode documents whose bytes must not
change (the simulator's JSON, compared byte for byte across versions, keeps the standard
library's encoder).
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import threading
from collections.abc import Callable, Iterator
from typing import Any

import orjson

_INDENTED = orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY


class _Pauses:
    """The pauses open now, in every thread (the collector is the interpreter's, not a
    thread's): it is disabled when the first one opens and its state restored when the last one
    closes, so that pauses that overlap out of order (a source's query threads decoding while
    its cycle's thread builds the snapshot, two policies' cycles at once) never re-enable it
    under one that is still open."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open = 0
        self.was_enabled = False

    def enter(self) -> None:
        with self.lock:
            if self.open == 0:
                self.was_enabled = gc.isenabled()
                gc.disable()
            self.open += 1

    def leave(self) -> None:
        with self.lock:
            self.open -= 1
            if self.open == 0 and self.was_enabled:
                gc.enable()


_PAUSES = _Pauses()


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection inside (the state found when no pause was open is restored
    when the last one closes, whatever thread opened it: `_Pauses`); for code that makes
    millions of objects without cycles, such as decoding a document and building a snapshot
    from it."""
    _PAUSES.enter()
    try:
        yield
    finally:
        _PAUSES.leave()


def loads(data: bytes | str, *, fallback: Callable[[], Any] | None = None) -> Any:
    """The decoded document; where orjson refuses it, `fallback()` (default `json.loads(data)`),
    whose result or exception is the caller's as before."""
    with paused_gc():
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            if fallback is not None:
                return fallback()
            return json.loads(data)


def dumps(document: Any) -> str:
    """`document` as JSON indented by two spaces (what `json.dumps(document, indent=2,
    allow_nan=False)` means, in orjson's bytes: see the module's docstring). A NaN or an
    infinity anywhere in it is a ValueError, as with the standard library."""
    try:
        text = orjson.dumps(document, option=_INDENTED)
    except orjson.JSONEncodeError:  # a lone surrogate, an integer beyond 64 bits
        return json.dumps(document, indent=2, allow_nan=False)
    if b"null" in text and _has_non_finite(document):
        raise ValueError("Out of range float values are not JSON compliant")
    return text.decode("utf-8")


_LEAVES = frozenset((str, int, bool, type(None)))
"""Types a decoded or built document holds that cannot be a non-finite float."""


def _has_non_finite(value: Any) -> bool:
    """Whether a float NaN or infinity is anywhere in `value` (orjson writes them as null; the
    walk runs only when the text holds a null at all). A 10,000-container decision holds
    ~150,000 values, most of them strings: the exact-type tests skip those without a call
    (0.01 s for the walk, 0.04 s with `isinstance` and generators)."""
    kind = type(value)
    if kind is float:
        number: float = value
        return number - number != 0.0  # NaN - NaN and inf - inf are NaN
    if kind is dict:
        items = value.values()
    elif kind is list or kind is tuple:
        items = value
    elif isinstance(value, float):
        return not math.isfinite(value)
    elif isinstance(value, dict):
        items = value.values()
    elif isinstance(value, list | tuple):
        items = value
    else:
        return False
    for item in items:
        if type(item) in _LEAVES:
            continue
        if _has_non_finite(item):
            return True
    return False
