"""Timing helpers shared by the benchmarks: medians of repeated runs, wall-clock and CPU seconds."""

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


def median_wall_and_cpu_seconds(func: Callable[[], object], repeat: int) -> tuple[float, float]:
    """The median wall time and the median CPU time of this process over `repeat` calls (on a
    shared machine the CPU time shows less of the other work's load)."""
    walls, cpus = [], []
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.process_time()
        func()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)
