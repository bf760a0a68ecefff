"""A range query's answer read straight from its bytes into a `Matrix`, without a Python
object per sample.

Decoded as JSON, a 10,000-container range answer is 600,000 `[t, "v"]` pairs: a list, a float
and a string each, which the decoder makes and `read_matrix` then flattens into arrays again;
together most of a Prometheus cycle. Prometheus (and the servers that speak its API) write the
answer compactly, `{"metric":{...},"values":[[1700000000,"0.5"],[1700000015,"NaN"]]}`, so the
samples of every series can be cut out of the bytes as they stand:

* each `"values":[...]` block is found by its key (a key's quotes cannot occur inside a JSON
  string, where quotes are escaped) and its end, the first `]]`;
* what is left, the answer with every block emptied, is decoded as usual: the label sets;
* the blocks' samples are read a few thousand pairs at a time (whole blocks): the brackets and
  quotes dropped, "NaN" as null, by orjson's number parser (the same parser, and so the same
  floats, as `read_matrix`'s).

Anything this cannot be sure of gives None, and the caller decodes the whole answer as before
(`read_matrix` then reads it and reports what is wrong): whitespace between the tokens (not
the compact form), a pair that is not exactly `[number,"number"]`, an infinity, a "-0" (which
JSON reads as the integer 0, and numpy as -0.0), an entry without its block, a block elsewhere.
Pure: bytes in, a Matrix (or None) out.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np
import orjson

from policyd.sources.matrix import Matrix

_VALUES = b'"values":['
"""A block's key: its quotes cannot occur inside a JSON string, where quotes are escaped."""
_NOT_STRUCTURE = b"0123456789.eE+-Na"
"""What a compact block holds besides its structure: digits, signs, exponents and NaN."""
_PAIR = b'[,""]'
"""A pair once its numbers are deleted: a block of k pairs is k of these joined by commas."""
CHUNK_PAIRS = 8192
"""About how many pairs `_samples` reads at a time (whole blocks: a block is never split)."""


def read_matrix_body(body: bytes, *, chunk_pairs: int = CHUNK_PAIRS) -> Matrix | None:
    """The `data.result` of a range query's answer `body` as a Matrix, read from the bytes
    about `chunk_pairs` pairs at a time; None when the answer is not in the compact form this
    reads (module docstring)."""
    cut = _cut(body)
    if cut is None:
        return None
    emptied, blocks, counts = cut
    labels = _labels(emptied, len(blocks))
    if labels is None:
        return None
    offsets = np.zeros(len(blocks) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    samples = _samples(blocks, offsets, chunk_pairs)
    if samples is None:
        return None
    return Matrix(labels=labels, times=samples[:, 0].copy(), values=samples[:, 1].copy(),
                  offsets=offsets, broken=(None,) * len(blocks))


def _cut(body: bytes) -> tuple[bytes, list[bytes], list[int]] | None:
    """The answer with every block emptied, the blocks' samples (each `[t,"v"],...`, empty for
    an empty block) and the pairs in each; None when a block is not `[...]]` or there is none.

    Each key is found by `bytes.find` from the end of the block before: a regular expression's
    scan of the whole body, blocks included, was three quarters of the cutting's instructions
    (259 M against 195 M per 13 MB answer, valgrind)."""
    pieces, blocks, counts = [], [], []
    find, at = body.find, 0
    found = find(_VALUES)
    while found >= 0:
        start = found + len(_VALUES)
        first = body[start:start + 1]
        if first == b"]":
            end = start
        else:
            end = find(b"]]", start) + 1
            if end == 0 or first != b"[":
                return None
        pieces.append(body[at:start])
        block = body[start:end]
        blocks.append(block)
        counts.append(block.count(b"["))
        at = end
        found = find(_VALUES, end)
    if not blocks:
        return None
    pieces.append(body[at:])
    return b"".join(pieces), blocks, counts


def _labels(emptied: bytes, entries: int) -> tuple[Any, ...] | None:
    """The label sets of the answer with every block emptied, if its `data.result` is
    `entries` matrix entries, each with its (emptied) block."""
    try:
        document = orjson.loads(emptied)
        data = document["data"]
        result = data["result"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    if data.get("resultType") != "matrix" or not isinstance(result, list) \
            or len(result) != entries:
        return None
    labels = []
    for entry in result:
        metric = entry.get("metric") if isinstance(entry, dict) else None
        if not isinstance(metric, dict) or entry.get("values") != []:
            return None
        labels.append(metric)
    return tuple(labels)


def _samples(blocks: list[bytes], offsets: np.ndarray[Any, np.dtype[np.int64]],
             chunk_pairs: int) -> np.ndarray[Any, np.dtype[np.float64]] | None:
    """The (time, value) rows of every block's pairs (block i's at `offsets[i]` on), or None.

    Read a few thousand pairs at a time (`chunk_pairs`, whole blocks), not all at once: each
    piece's Python numbers are freed before the next piece makes its own, so the interpreter
    reuses the memory they took instead of asking the kernel for megabytes of fresh pages for
    every answer (and a piece's text stays in the processor's cache while it is read)."""
    rows = np.empty((int(offsets[-1]), 2), dtype=np.float64)
    # The block holding every chunk_pairs-th pair starts a piece (once, however long it is).
    starts = np.searchsorted(offsets, np.arange(0, offsets[-1], chunk_pairs), side="right") - 1
    edges = [*np.unique(starts).tolist(), len(blocks)]
    for first, last in pairwise(edges):
        joined = b",".join(block for block in blocks[first:last] if block)
        lo, hi = int(offsets[first]), int(offsets[last])
        if not _pairs_into(joined, rows[lo:hi]):
            return None
    return rows


def _pairs_into(joined: bytes, rows: np.ndarray[Any, np.dtype[np.float64]]) -> bool:
    """Whether `joined` (blocks' samples joined by commas) is exactly `len(rows)` pairs, read
    into `rows` when it is."""
    pairs = len(rows)
    if joined.translate(None, _NOT_STRUCTURE) != ((_PAIR + b",") * pairs)[:-1] \
            or b'"-0"' in joined:
        return False
    numbers = joined.translate(None, b'[]"').replace(b"NaN", b"null")
    try:
        parsed = orjson.loads(b"[" + numbers + b"]")
    except orjson.JSONDecodeError:
        return False
    if len(parsed) != 2 * pairs:
        return False
    rows[:] = np.array(parsed, dtype=np.float64).reshape(-1, 2)
    return True
