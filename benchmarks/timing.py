"""Timing helpers shared by the benchmarks: medians of repeated runs, wall-clock and CPU seconds."""

from __future__ import annotations

import gc
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


def median_cpu_seconds(func: Callable[[], object], repeat: int, *,
                       collect: bool = False) -> float:
    """The median process CPU time of `repeat` calls: less sensitive than wall time to other
    processes on a shared machine (numpy here runs on one thread). `collect`: a full garbage
    collection before each call, outside its time (no call pays for the last one's garbage)."""
    runs = []
    for _ in range(repeat):
        if collect:
            gc.collect()
        start = time.process_time()
        func()
        runs.append(time.process_time() - start)
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


def host_speed_seconds(repeat: int = 3) -> float:
    """This host's speed at pure Python, as a yardstick for absolute targets: the median wall
    time of summing the squares of 0..10**7 - 1 in a Python loop inside a function. Hosts of
    the same kind differ by twofold and more: a figure read against a target should be read
    with this one beside it."""

    def squares() -> int:
        total = 0
        for i in range(10**7):
            total += i * i
        return total

    return median_seconds(squares, repeat)


def host_speed_text() -> str:
    """`host_speed_seconds` as the benchmarks print it beside their figures."""
    return f"host speed: 10**7 squares in pure Python in {host_speed_seconds():.2f} s"
