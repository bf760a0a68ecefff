"""A policy's own per-job metrics (`QoE.spec.metrics`: name -> PromQL), read from the cycle's
answers and put on each container (`Container.metrics`). Pure: the source asks, this reads.

Each metric is one range query a cycle over the cycle's steps, whatever the number of jobs
(`promql.CycleQueries.metrics`). Its series name their container by the labels that name it on
the loss series (`evaluation_identity_labels`: the query must keep them, e.g. `sum by
(namespace, pod, container) (...)`, or a `rate()` of a counter the job's exporter shows beside
its loss). A series that cannot be placed, or two for one job, is a warning and no value: the
policy then treats that job's target as not measured, never as met.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from policyd.model import Container, Series, Snapshot
from policyd.sources.facts import key_of
from policyd.sources.matrix import read_matrix


def _index(containers: Sequence[Container], identity: tuple[str, ...]
           ) -> dict[tuple[str, ...], str]:
    """A container's identity on its metric series -> its id: from the labels its loss series
    gave it, else its id itself (a profile whose one identity label is the container's name)."""
    out: dict[tuple[str, ...], str] = {}
    for c in containers:
        out[key_of(c.labels, identity) or tuple(c.id.split("/"))] = c.id
    return out


def attach_metrics(snapshot: Snapshot, results: Mapping[str, Any], identity: tuple[str, ...]
                   ) -> tuple[Snapshot, tuple[str, ...]]:
    """`snapshot` with each metric's series on its container, and the warnings. `results`:
    metric name -> its range query's `data.result` (ResponseShapeError when not a list)."""
    if not results:
        return snapshot, ()
    index = _index(snapshot.containers, identity)
    found: dict[str, dict[str, Series]] = {}
    warnings: list[str] = []
    for name, result in sorted(results.items()):
        matrix = read_matrix(result)
        rows = Series.many(matrix.times, matrix.values, matrix.offsets)
        unplaced, doubled = 0, set()
        placed: dict[str, Series] = {}
        for metric, series in zip(matrix.labels, rows, strict=True):
            key = key_of(metric, identity)
            cid = index.get(key) if key is not None else None
            if cid is None:
                unplaced += 1
            elif cid in placed:
                doubled.add(cid)
            else:
                placed[cid] = series
        for cid in sorted(doubled):
            del placed[cid]
            warnings.append(f"metric {name}: container {cid} has several series; left "
                            "unmeasured (keep one series per job in its query)")
        if unplaced:
            warnings.append(f"metric {name}: {unplaced} series name no known job by "
                            f"{', '.join(identity)}; left out")
        for cid, series in placed.items():
            found.setdefault(cid, {})[name] = series
    if not found:
        return snapshot, tuple(warnings)
    containers = tuple(replace(c, metrics={**c.metrics, **found[c.id]}) if c.id in found else c
                       for c in snapshot.containers)
    return replace(snapshot, containers=containers), tuple(warnings)
