"""Timing helpers shared by the benchmarks: medians of repeated runs, wall-clock seconds."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_seconds(func: Callable[[], object], repeat: int) -> float:
    """The median wall time of `repeat` calls of `func`."""
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)
