"""Prometheus result lists as numpy: many series' `[t, "v"]` pairs converted in one pass.

`data.result` of a range query is a list of `{"metric": {...}, "values": [[t, "v"], ...]}`;
values are strings ("1.5", "NaN", "+Inf"). Converting 600,000 pairs one `float()` at a time
would dominate a cycle, so `read_matrix` concatenates every series' samples and converts them
in one pass each (`_times`, `_numbers`); series are then slices `[offsets[i], offsets[i + 1])`
of one array. A value that is not a number spoils only its own series (it is converted again
alone and reported). Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from policyd.model.snapshot import FloatArray

IntArray = npt.NDArray[np.int64]
_NUMBER_BYTES = b"0123456789.eE+-,NaN"
"""What joined sample values may hold for `_numbers`' shortcut."""


class ResponseShapeError(ValueError):
    """`data.result` is not the documented shape at all (the whole response is unusable)."""


@dataclass(frozen=True, kw_only=True, eq=False)
class Matrix:
    """N series: their label sets and their samples, series i at `[offsets[i], offsets[i+1])`.

    `broken[i]` is why series i could not be read (its samples are then empty), or None.
    """

    labels: tuple[Mapping[str, str], ...]
    times: FloatArray
    values: FloatArray
    offsets: IntArray
    broken: tuple[str | None, ...]

    def __len__(self) -> int:
        return len(self.labels)

    def span(self, i: int) -> tuple[int, int]:
        return int(self.offsets[i]), int(self.offsets[i + 1])


def _entries(result: Any, field: str) -> list[tuple[Mapping[str, str], Any]]:
    if not isinstance(result, list):
        raise ResponseShapeError(f"data.result is a {type(result).__name__}, not a list")
    out = []
    for entry in result:
        if not isinstance(entry, dict) or not isinstance(entry.get("metric"), dict):
            raise ResponseShapeError("a data.result entry has no 'metric' object")
        out.append((entry["metric"], entry.get(field)))
    return out


def _pairs(samples: Any) -> tuple[FloatArray, FloatArray]:
    array = np.array(samples, dtype=np.float64)
    if array.size == 0:
        return np.empty(0), np.empty(0)
    if array.ndim != 2 or array.shape[1] != 2:
        raise ValueError("samples are not [time, value] pairs")
    return array[:, 0], array[:, 1]


def read_matrix(result: Any) -> Matrix:
    """A range query's `data.result` as one `Matrix` (raises ResponseShapeError if not a list);
    one read from the answer's bytes already (`matrix_body`) as it is."""
    if isinstance(result, Matrix):
        return result
    entries = _entries(result, "values")
    broken: list[str | None] = [None] * len(entries)
    samples: list[Sequence[Any]] = []
    for i, (_, values) in enumerate(entries):
        if isinstance(values, list):
            samples.append(values)
        else:
            broken[i] = "has no 'values' list"
            samples.append([])
    lengths = np.fromiter(map(len, samples), dtype=np.int64, count=len(samples))
    offsets = np.zeros(len(samples) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = list(chain.from_iterable(samples))
    try:
        times = np.fromiter(map(itemgetter(0), flat), dtype=np.float64, count=len(flat))
        values = _numbers(list(map(itemgetter(1), flat)))
    except (TypeError, ValueError, IndexError, KeyError):
        times, values, offsets = _one_by_one(samples, broken)
    return Matrix(labels=tuple(m for m, _ in entries), times=times, values=values,
                  offsets=offsets, broken=tuple(broken))


def _numbers(texts: list[Any]) -> FloatArray:
    """Prometheus's sample values ("0.061602", "1e+06", "NaN", "+Inf") as floats.

    Every finite value Prometheus writes is a JSON number, so they are joined into one JSON
    array and read by orjson's number parser: 10,000 series of 60 samples in about half the
    time of numpy's own conversion of the strings (`np.array(texts, float)`). That conversion,
    with its errors, is what this falls back to whenever the shortcut cannot be sure: a value
    that is not a string, a character no JSON number has (an infinity, "null", quotes...), or a
    text that is not exactly one number (",," or "1,2" changes the count). "NaN" is read as null,
    which numpy makes NaN."""
    try:
        joined = ",".join(texts)
    except TypeError:  # a value that is not a string
        return np.array(texts, dtype=np.float64)
    if joined.encode().translate(None, _NUMBER_BYTES) or "-0," in f"{joined},":
        return np.array(texts, dtype=np.float64)  # "-0" is -0.0 to numpy, the integer 0 to JSON
    try:
        parsed = orjson.loads(f"[{joined.replace('NaN', 'null')}]")
    except orjson.JSONDecodeError:
        return np.array(texts, dtype=np.float64)
    if len(parsed) != len(texts):
        return np.array(texts, dtype=np.float64)
    return np.array(parsed, dtype=np.float64)


def _one_by_one(samples: list[Sequence[Any]], broken: list[str | None]
                ) -> tuple[FloatArray, FloatArray, IntArray]:
    """The slow path: some sample is not a number; convert series alone, emptying bad ones."""
    times: list[FloatArray] = []
    values: list[FloatArray] = []
    for i, s in enumerate(samples):
        try:
            t, v = _pairs(s)
        except (TypeError, ValueError):
            broken[i] = broken[i] or "has a sample that is not a [time, \"number\"] pair"
            t, v = np.empty(0), np.empty(0)
        times.append(t)
        values.append(v)
    offsets = np.zeros(len(samples) + 1, dtype=np.int64)
    np.cumsum([t.size for t in times], out=offsets[1:])
    if not times:
        return np.empty(0), np.empty(0), offsets
    return np.concatenate(times), np.concatenate(values), offsets


def read_vector(result: Any) -> list[tuple[Mapping[str, str], float]]:
    """An instant query's `data.result`: (labels, value) per sample; unreadable samples are NaN."""
    if not isinstance(result, list):
        raise ResponseShapeError(f"data.result is a {type(result).__name__}, not a list")
    out: list[tuple[Mapping[str, str], float]] = []
    for entry in result:  # `_entries` and the values in one pass (10,000 entries a fact)
        metric = entry.get("metric") if isinstance(entry, dict) else None
        if not isinstance(metric, dict):
            raise ResponseShapeError("a data.result entry has no 'metric' object")
        try:
            value = float(entry.get("value")[1])
        except (TypeError, ValueError, IndexError, KeyError):
            value = math.nan
        out.append((metric, value))
    return out
