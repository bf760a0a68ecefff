"""Where each job is in its run: the exporter's steps counter and progress ratio, per container.

The training-side exporter shows, beside its loss, `policyd_training_steps_total` (the steps
done, a counter that continues after a resume) and, when the job knows how many steps its run
has, `policyd_training_progress_ratio` (steps done / total). Both come from the same target
with the same labels as the loss, so a container's steps series is the one whose label set
(without `__name__`) equals its evaluation series' (`ProgressTable.of`). The total is read off
the ratio: total = the last steps sample / the ratio (no total while the ratio is 0 or absent).

A cycle asks two more questions whatever the number of containers, when a policy's forecasts
need them (`Kind.inputs` / `promql.needed_inputs`): the steps as a range over the cycle's steps
and the ratio as one instant query (`policyd.sources.prometheus_cycle.progress_calls`). Pure:
this module reads the answers, the source asks. A job whose exporter is older, or whose
evaluation query reshapes its labels, simply has no steps: its forecast says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from policyd.model import Series
from policyd.sources.matrix import Matrix, read_matrix, read_vector

LabelSet = frozenset[tuple[str, str]]


def label_set(metric: Mapping[str, str]) -> LabelSet:
    """A series' identity for matching across metrics: its labels without `__name__`."""
    if "__name__" not in metric:
        return frozenset(metric.items())
    rest = dict(metric)
    del rest["__name__"]
    return frozenset(rest.items())


@dataclass(frozen=True, kw_only=True)
class Progress:
    """One container's steps series and its run's total steps (None: not known)."""

    steps: Series = field(default_factory=Series.empty)
    total_steps: float | None = None


NO_PROGRESS = Progress()


@dataclass(frozen=True, kw_only=True, eq=False)
class ProgressTable:
    """Steps and totals by label set (see the module docstring)."""

    by_labels: Mapping[LabelSet, Progress]

    @classmethod
    def of(cls, steps: Matrix, ratios: list[tuple[Mapping[str, str], float]]) -> ProgressTable:
        ratio = {label_set(metric): value for metric, value in ratios}
        series = Series.many(steps.times, steps.values, steps.offsets)
        bounds = steps.offsets.tolist()  # Python numbers in one go, not numpy scalars one by one
        lasts = (steps.values[np.maximum(steps.offsets[1:] - 1, 0)].tolist()
                 if steps.values.size else [math.nan] * len(steps))
        found: dict[LabelSet, Progress] = {}
        for i, metric in enumerate(steps.labels):
            if steps.broken[i] is not None or bounds[i + 1] == bounds[i]:
                continue
            key = label_set(metric)
            r = ratio.get(key, math.nan)
            last = lasts[i]
            total = round(last / r) if (math.isfinite(r) and 0 < r <= 1
                                        and math.isfinite(last) and last > 0) else None
            found[key] = Progress(steps=series[i], total_steps=float(total) if total else None)
        return cls(by_labels=found)

    def of_series(self, metric: Mapping[str, str]) -> Progress:
        """The progress of the container whose evaluation series has labels `metric`."""
        return self.by_labels.get(label_set(metric), NO_PROGRESS)

    def by_label(self, name: str) -> dict[str, Progress]:
        """Progress by one label's value (the docker-stats join: the container's name); of
        several series with that value (a migration's old and new container), the one whose
        last sample is later."""
        out: dict[str, Progress] = {}
        for labels, progress in self.by_labels.items():
            value = dict(labels).get(name)
            if value is None:
                continue
            other = out.get(value)
            if other is None or (progress.steps.times_seconds[-1]
                                 > other.steps.times_seconds[-1]):
                out[value] = progress
        return out


EMPTY = ProgressTable(by_labels={})


def parse_progress(steps: Any, ratios: Any) -> ProgressTable:
    """The steps range result and the ratio instant result (`data.result` lists) as a table."""
    if steps is None:
        return EMPTY
    return ProgressTable.of(read_matrix(steps), read_vector(ratios or []))
