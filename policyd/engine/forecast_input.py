"""What the forecast reads: each container's history as plain arrays, and all of them packed.

`History` is one container's record, independent of the snapshot's layout so that any source
(the snapshot's series, the simulator, a benchmark) can fill it: aligned per sample, the time,
the evaluation value (the loss), the steps done so far and the mean cores used since the
previous sample; and the job's facts (its current allocation, the most its node could give, its
total steps and target loss when it declares them, the window its exporter averages the loss
over). `Histories` packs N of them into padded (N, K) arrays (NaN where a container has fewer
samples), which is what the vectorised forecast works on.

Must not: read a snapshot or a clock; reject a history for its values (NaN, Inf, too few
points): the forecast explains those per container.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from policyd.model.snapshot import FloatArray

DEFAULT_SMOOTHING_STEPS = 100
"""The window of the exporter's loss gauge when a job does not say otherwise (the exporters'
`DEFAULT_SMOOTHING_STEPS`, and the simulator's `REPORT_WINDOW_ITERATIONS`)."""


def _array(values: object, name: str) -> FloatArray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    return array


@dataclass(frozen=True, kw_only=True, eq=False)
class History:
    """One container, samples aligned by index.

    `cores[j]` is the mean cores used in (times[j-1], times[j]] (cores[0] is not read).
    `allocation_cores` is what the job may use now, `max_cores` the most its node could give.
    `busy[j]` is 1 when the node's cores were all in use at sample j (so a job using less than
    its allocation was held back by the others, not by its own threads), 0 when the node had
    cores to spare, NaN (or `busy` None) when it is not known: read as not busy.
    """

    times_seconds: FloatArray
    losses: FloatArray
    steps: FloatArray
    cores: FloatArray
    allocation_cores: float
    max_cores: float
    total_steps: float | None = None
    target_loss: float | None = None
    smoothing_steps: int = DEFAULT_SMOOTHING_STEPS
    busy: FloatArray | None = None

    def __post_init__(self) -> None:
        if self.busy is None:
            object.__setattr__(self, "busy", np.zeros(np.shape(self.times_seconds)))
        arrays = {name: _array(getattr(self, name), name)
                  for name in ("times_seconds", "losses", "steps", "cores", "busy")}
        sizes = {a.size for a in arrays.values()}
        if len(sizes) != 1:
            raise ValueError(f"times, losses, steps and cores must be aligned, got sizes "
                             f"{ {k: v.size for k, v in arrays.items()} }")
        for name, array in arrays.items():
            object.__setattr__(self, name, array)
        if self.smoothing_steps < 1:
            raise ValueError(f"smoothing_steps must be >= 1, got {self.smoothing_steps}")

    @property
    def samples(self) -> int:
        return int(self.times_seconds.size)


@dataclass(frozen=True, kw_only=True)
class Settings:
    """The policy's reading of convergence (FlowCon's growth efficiency, flowcon.py) and now."""

    now_seconds: float
    alpha: float
    interval_seconds: float
    normalization: Literal["relative", "absolute"] = "relative"
    direction: Literal["minimize", "maximize"] = "minimize"
    improvement: bool = False
    """Also say how much the loss is still expected to improve (`Forecasts.remaining_improvement`:
    a curve is then fitted for jobs that know their total steps too)."""

    def __post_init__(self) -> None:
        if not (self.alpha > 0 and self.interval_seconds > 0 and np.isfinite(self.now_seconds)):
            raise ValueError("alpha and interval_seconds must be positive, now finite")


@dataclass(frozen=True, kw_only=True, eq=False)
class Histories:
    """N histories as padded arrays (N, K) and per-container vectors (N,); NaN = absent."""

    times_seconds: FloatArray
    losses: FloatArray
    steps: FloatArray
    cores: FloatArray
    busy: FloatArray
    lengths: FloatArray
    allocation_cores: FloatArray
    max_cores: FloatArray
    total_steps: FloatArray  # NaN: not known
    target_loss: FloatArray  # NaN: none declared
    smoothing_steps: FloatArray

    @property
    def size(self) -> int:
        return int(self.lengths.size)

    @classmethod
    def of(cls, histories: Sequence[History]) -> Histories:
        n = len(histories)
        lengths = np.fromiter((h.samples for h in histories), dtype=np.int64, count=n)
        width = int(lengths.max()) if n else 0
        rows = np.repeat(np.arange(n), lengths)
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1])) if n else lengths
        cols = np.arange(int(lengths.sum())) - np.repeat(starts, lengths)

        def packed(name: str) -> FloatArray:
            out = np.full((n, width), np.nan)
            if n and width:
                out[rows, cols] = np.concatenate([getattr(h, name) for h in histories])
            return out

        def vector(values: list[float | None]) -> FloatArray:
            return np.array([np.nan if v is None else v for v in values], dtype=np.float64)

        return cls(
            times_seconds=packed("times_seconds"), losses=packed("losses"),
            steps=packed("steps"), cores=packed("cores"), busy=packed("busy"),
            lengths=lengths.astype(np.float64),
            allocation_cores=vector([h.allocation_cores for h in histories]),
            max_cores=vector([h.max_cores for h in histories]),
            total_steps=vector([h.total_steps for h in histories]),
            target_loss=vector([h.target_loss for h in histories]),
            smoothing_steps=vector([float(h.smoothing_steps) for h in histories]),
        )
