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

Must not: read files or sockets (callers pass the bytes), or encode (writers keep the standard
library's encoder where their bytes must not change: it formats floats as `repr` does).
"""

from __future__ import annotations

import contextlib
import gc
import json
from collections.abc import Callable, Iterator
from typing import Any

import orjson


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection inside (the previous state is restored on leaving); for
    code that makes millions of objects without cycles, such as decoding a document and
    building a snapshot from it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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
