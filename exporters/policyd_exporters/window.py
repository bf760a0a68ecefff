"""The smoothing window: the mean of the last N observed values, skipping non-finite ones.

Owns the arithmetic behind `policyd_training_loss`; knows nothing of Prometheus or threads (the
caller holds the lock).

Why a window at all: the loss of one mini-batch is noise of 10-15 % on the tails of the classifiers
policyd's simulator recorded, far above any FlowCon/SpeCon alpha (1-15 %), while the mean of the
last 100 steps moves by ~1 % per 100 steps there. The simulator (`policyd.sim.types.
REPORT_WINDOW_ITERATIONS`) models the exporter exactly like this, so the default is 100.

A NaN or infinite value takes its slot in the window (it is an observation) but is left out of the
mean, so one bad batch does not poison the mean; when every slot is non-finite the mean is None
(the job has diverged, or reports nothing usable) and the gauge is not exposed at all.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable

DEFAULT_SMOOTHING_STEPS = 100
"""Matches policyd's simulator: the mean of the last 100 step losses (see the module doc)."""


class RunningMean:
    """Mean of the finite values among the last `size` observations."""

    def __init__(self, size: int = DEFAULT_SMOOTHING_STEPS) -> None:
        if size < 1:
            raise ValueError(f"smoothing_steps must be >= 1, got {size}")
        self._slots: deque[float | None] = deque(maxlen=size)

    @property
    def size(self) -> int:
        maxlen = self._slots.maxlen
        assert maxlen is not None
        return maxlen

    def add(self, value: float) -> bool:
        """Record one observation; returns whether it was finite (and so averaged in)."""
        finite = math.isfinite(value)
        self._slots.append(value if finite else None)
        return finite

    def mean(self) -> float | None:
        """The mean of the finite values in the window, or None when there are none."""
        values = [v for v in self._slots if v is not None]
        return math.fsum(values) / len(values) if values else None

    def slots(self) -> list[float | None]:
        """The window, oldest first (None for a non-finite observation): for checkpoints."""
        return list(self._slots)

    def restore(self, slots: Iterable[float | None]) -> None:
        """Replace the window by saved slots (the newest `size` of them are kept)."""
        self._slots.clear()
        for v in slots:
            self._slots.append(None if v is None or not math.isfinite(v) else float(v))
