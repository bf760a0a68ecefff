"""What the simulated world shows a policy: scraped series kept small, and the snapshot's clock.

The world scrapes every job every `scenario.scrape_seconds`, as Prometheus would: the loss after
the iterations completed so far (between iterations "the previous value will be returned"), the
whole iterations done (the exporter's steps counter) and the cores used averaged over the scrape
interval (cAdvisor's rate). Each series lives in a
`Ring`: preallocated numpy arrays holding the last samples a policy can read, so a snapshot is
a few slices, never a rebuild of the whole run's history.

Snapshot time is `EPOCH_SECONDS` + virtual seconds: the engine reads times as epoch seconds,
and a fixed epoch keeps runs deterministic and snapshots comparable with `examples/*.json`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from policyd.engine.schedule import intervals_of
from policyd.engine.spec import PolicyDocument
from policyd.model.snapshot import FloatArray

EPOCH_SECONDS = 1_700_000_000.0
"""Virtual second 0 as an epoch time (2023-11-14T22:13:20Z): snapshot.time = EPOCH + t."""


class Ring:
    """The last `capacity` (time, value) samples of one series.

    Appends write into arrays twice the capacity; when they fill, the newest `capacity` samples
    move to the front (amortised O(1) per append), so the kept samples are always one slice.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("a ring holds at least one sample")
        self._capacity = capacity
        self._times = np.empty(2 * capacity, dtype=np.float64)
        self._values = np.empty(2 * capacity, dtype=np.float64)
        self._size = 0

    def append(self, time: float, value: float) -> None:
        if self._size == self._times.size:
            keep = self._capacity
            self._times[:keep] = self._times[self._size - keep:self._size]
            self._values[:keep] = self._values[self._size - keep:self._size]
            self._size = keep
        self._times[self._size] = time
        self._values[self._size] = value
        self._size += 1

    def since(self, start: float) -> tuple[FloatArray, FloatArray]:
        """Views of the kept samples at or after `start` (copy before keeping them)."""
        low = max(self._size - self._capacity, 0)
        times = self._times[low:self._size]
        skip = int(np.searchsorted(times, start, side="left"))
        return times[skip:], self._values[low + skip:self._size]

    def __len__(self) -> int:
        return min(self._size, self._capacity)


def history_seconds(policy: PolicyDocument, interval_seconds: float, scrape_seconds: float
                    ) -> float:
    """How far back a snapshot must reach for `policy` at `interval_seconds`: its window plus a
    margin, so that the value held at the window's first boundary is still there."""
    margin = max(2 * scrape_seconds, interval_seconds)
    return policy.spec.window_intervals * interval_seconds + margin


def ring_capacity(policies: Sequence[PolicyDocument], scrape_seconds: float) -> int:
    """Samples to keep per series for the longest window any of `policies` may read."""
    seconds = max((history_seconds(p, intervals_of(p).longest_seconds, scrape_seconds)
                   for p in policies), default=600.0)
    return math.ceil(seconds / scrape_seconds) + 4
