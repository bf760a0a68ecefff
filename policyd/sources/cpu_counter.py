"""Cumulative CPU counters -> the cores a container used in each interval, and the rings that
keep the counters between cycles. Pure: no I/O, no clock.

The engine reads R_c(m), the mean cores used in (t_{m-1}, t_m] (`engine.series.mean_cpu_cores`:
the mean of the samples timed inside the interval). A cumulative counter C(t) (CPU seconds)
gives it exactly: R = (C(t_m) - C(t_{m-1})) / (t_m - t_{m-1}), with C read between samples by
linear interpolation (the container's usage between two samples is taken as even). One sample
per interval, timed at t_m, is what `cores_over_intervals` returns.

An interval whose ends are not both inside the samples is read over the part the samples cover,
when that part is at least `min_coverage` of it: the last interval usually ends at `now`, a
little after the newest sample (cAdvisor samples every 1-15 s), and a container that started in
the window covers only its end. A counter that goes down (the container was restarted and its
cgroup counter began again) spoils the intervals that span the drop: they are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from policyd.model import Series
from policyd.model.snapshot import FloatArray

MIN_COVERAGE = 0.5
"""An interval is read when the samples cover at least this fraction of it."""


def cores_over_intervals(times_seconds: FloatArray, cpu_seconds: FloatArray,
                         boundaries: Sequence[float] | FloatArray, *,
                         min_coverage: float = MIN_COVERAGE) -> Series:
    """Mean cores in each (b_{k-1}, b_k], timed at b_k (see the module docstring)."""
    times = np.asarray(times_seconds, dtype=np.float64)
    totals = np.asarray(cpu_seconds, dtype=np.float64)
    bounds = np.asarray(boundaries, dtype=np.float64)
    if times.size < 2 or bounds.size < 2:
        return Series.empty()
    lo = np.maximum(bounds[:-1], times[0])
    hi = np.minimum(bounds[1:], times[-1])
    span = hi - lo
    covered = (span > 0) & (span >= min_coverage * np.diff(bounds))
    for r in np.flatnonzero(np.diff(totals) < 0):  # a drop between samples r and r + 1
        covered &= ~((lo < times[r + 1]) & (hi > times[r]))
    with np.errstate(invalid="ignore", divide="ignore"):
        cores = (np.interp(hi, times, totals) - np.interp(lo, times, totals)) / span
    return Series.of(bounds[1:][covered], cores[covered])


class CounterRings:
    """Per container id, the counter samples seen so far: (times s, CPU s), sorted, unique.

    cAdvisor keeps only its last `--storage_duration` of samples (two minutes by default);
    the rings keep what a policy's window needs across cycles. `keep_after` drops what no
    window reads any more (one sample before it is kept, to interpolate the first boundary);
    `max_samples` bounds a ring whatever the sampling rate.
    """

    def __init__(self, max_samples: int = 4096) -> None:
        if max_samples < 2:
            raise ValueError("max_samples must be at least 2")
        self.max_samples = max_samples
        self._rings: dict[str, tuple[FloatArray, FloatArray]] = {}

    def __contains__(self, key: str) -> bool:
        return key in self._rings

    def add(self, key: str, times_seconds: FloatArray, cpu_seconds: FloatArray, *,
            keep_after: float) -> None:
        """Merge new samples into `key`'s ring (a time already held keeps the new reading)."""
        old_t, old_v = self._rings.get(key, (np.empty(0), np.empty(0)))
        times = np.concatenate((np.asarray(times_seconds, dtype=np.float64), old_t))
        values = np.concatenate((np.asarray(cpu_seconds, dtype=np.float64), old_v))
        times, first = np.unique(times, return_index=True)  # the first copy: the new one
        values = values[first]
        start = max(int(np.searchsorted(times, keep_after, side="right")) - 1, 0)
        start = max(start, times.size - self.max_samples)
        self._rings[key] = (times[start:], values[start:])

    def get(self, key: str) -> tuple[FloatArray, FloatArray]:
        return self._rings.get(key, (np.empty(0), np.empty(0)))

    def retain(self, keys: Iterable[str]) -> None:
        """Forget every ring but `keys` (containers gone from every host)."""
        keep = set(keys)
        for key in [k for k in self._rings if k not in keep]:
            del self._rings[key]
