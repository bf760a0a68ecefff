"""The forecast's input read out of a snapshot: the chosen containers' histories, packed.

Theory of operation. A container's evaluation samples are the forecast's sample times; at each
the steps done are the last `steps` sample at or before it (the counter holds between scrapes)
and the cores used are the last `cpu_usage` sample at or before it (each is the mean over the
interval before it). The node was busy at a sample when its containers used at least
`BUSY_SHARE` of its cores then (summed over every container of the snapshot on it, at the
sample times they share): a job that used less than its allocation on a busy node was held back
by the others' CPU shares, not by its own threads (`policyd.engine.speed`). The job's
allocation in cores is its CPU fraction times its node's capacity, and the most it could have
is that capacity. Its total steps come from the snapshot (the exporter's progress), a target
loss from the label or annotation `policyd.io/target-loss` on the workload (a malformed value
is a note, never a guess).

How it is read, and why so. At 10,000 containers the cost is not the arithmetic but touching
30,000 series one by one, each a few small arrays scattered over the heap: every pass over
them misses the cache. So each series is touched once. The chosen containers' evaluation and
steps series, and every container's CPU series (the chosen ones' readings and their nodes'
load both come from it), are concatenated into one `_Table` each; everything after is numpy
on those. When a container's CPU or steps samples are taken at its loss samples' own times
(what Prometheus gives when every series is read with the same range and step), the reading is
a gather; otherwise one `searchsorted` over all of them (`_Table.held`).

Must not: read a clock, do I/O, or reject a container for its values (NaN, Inf, too few
points): the forecast explains those per container.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from policyd.engine.forecast_input import DEFAULT_SMOOTHING_STEPS, Histories
from policyd.model import Container, Snapshot
from policyd.model import labels as keys
from policyd.model.snapshot import FloatArray

IntArray = npt.NDArray[np.int64]

BUSY_SHARE = 0.9
"""A node whose containers use at least this share of its cores is busy (no cores to spare)."""


def declares_target(container: Container) -> bool:
    """Whether the job names a target loss at all, usable or not (`target_loss` reads it);
    most jobs do not, and this is two lookups."""
    return keys.TARGET_LOSS in container.annotations or keys.TARGET_LOSS in container.labels


def target_loss(container: Container) -> tuple[float | None, str]:
    """The loss the job declares as its target (`policyd.io/target-loss`), or None; and a note
    when a value is given but unusable."""
    text = container.annotations.get(keys.TARGET_LOSS, container.labels.get(keys.TARGET_LOSS))
    if text is None or not text.strip():
        return None, ""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        return None, (f"{keys.TARGET_LOSS}={text[:40]!r} is not a positive number; no target "
                      "taken")
    return value, ""


@dataclass(frozen=True, eq=False)
class _Table:
    """Many series concatenated: series r's samples are at [starts[r], starts[r] + lengths[r])."""

    times: FloatArray
    values: FloatArray
    starts: IntArray
    lengths: IntArray

    @classmethod
    def of(cls, times: Sequence[FloatArray], values: Sequence[FloatArray]) -> _Table:
        # `map(len, ...)` calls no Python function per series (10,000 of them).
        lengths = np.fromiter(map(len, times), dtype=np.int64, count=len(times))
        starts = np.zeros(lengths.size, dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        if not lengths.sum():
            return cls(np.empty(0), np.empty(0), starts, lengths)
        return cls(np.concatenate(times), np.concatenate(values), starts, lengths)

    def gathered(self, rows: IntArray, lengths: IntArray) -> IntArray | None:
        """Where each sample of `rows` lies in the table, concatenated row after row, when
        every one of those rows has exactly `lengths[i]` samples; None when one has not."""
        if not np.array_equal(self.lengths[rows], lengths):
            return None
        first = np.zeros(lengths.size, dtype=np.int64)
        np.cumsum(lengths[:-1], out=first[1:])
        return np.arange(int(lengths.sum())) + np.repeat(self.starts[rows] - first, lengths)

    def held(self, at: FloatArray, rows: IntArray, origin: float, span: float) -> IntArray:
        """Where the last sample of row `rows[i]` at or before each time of `at[i]` (N, K) lies
        in the table, -1 where there is none. One axis for all rows: row r's samples at keys
        (t - origin) + r * span, so every time must lie in [origin, origin + span)."""
        if self.times.size == 0:
            return np.full(at.shape, -1, dtype=np.int64)
        owner = np.repeat(np.arange(self.lengths.size, dtype=np.float64), self.lengths)
        keys_ = (self.times - origin) + owner * span
        row = rows.astype(np.float64)[:, None]
        with np.errstate(invalid="ignore"):
            wanted = np.where(np.isfinite(at), (at - origin) + row * span, -1.0)
        index = np.searchsorted(keys_, wanted, side="right") - 1
        mine = (index >= self.starts[rows][:, None]) & np.isfinite(at)
        return np.where(mine, index, -1)


def _rising(flat: FloatArray, lengths: IntArray) -> bool:
    """Whether times are strictly increasing within each row (rows of `lengths`, concatenated)."""
    rising = np.diff(flat) > 0
    ends = np.cumsum(lengths)[:-1]
    rising[ends[(ends > 0) & (ends < flat.size)] - 1] = True  # row boundaries
    return bool(rising.all())


def _rows(snapshot: Snapshot, containers: Sequence[Container]) -> IntArray:
    """Each container's place among the snapshot's containers (they must be among them)."""
    place = {id(c): r for r, c in enumerate(snapshot.containers)}
    found = [place.get(id(c), -1) for c in containers]
    if -1 in found:
        missing = next(c.id for c, r in zip(containers, found, strict=True) if r < 0)
        raise ValueError(f"container {missing!r} is not one of the snapshot's")
    return np.array(found, dtype=np.int64)


def histories(snapshot: Snapshot, containers: Sequence[Container],
              targets: Sequence[float | None] | None = None) -> Histories:
    """The forecast's input for `containers` (some of the snapshot's) at once (module
    docstring): per container its evaluation samples, the steps and cores held at each, and
    whether its node was busy then (every container of the snapshot on the node counted).
    `targets`: each container's `target_loss`, when the caller has read them already."""
    n = len(containers)
    rows = _rows(snapshot, containers)
    capacity = {node.name: node.cpu_capacity for node in snapshot.nodes}
    cpu = _Table.of([c.cpu_usage.times_seconds for c in snapshot.containers],
                    [c.cpu_usage.values for c in snapshot.containers])
    loss_times, losses_, step_times, step_values, node_cores_ = [], [], [], [], []
    allocation, total, target = [], [], []
    declared_targets = (targets if targets is not None
                        else [target_loss(c)[0] for c in containers])
    for c, declared in zip(containers, declared_targets, strict=True):  # one pass over them
        evaluation, steps_series = c.evaluation, c.steps
        loss_times.append(evaluation.times_seconds)
        losses_.append(evaluation.values)
        step_times.append(steps_series.times_seconds)
        step_values.append(steps_series.values)
        node_cores_.append(capacity[c.node])
        allocation.append(c.cpu_allocation)
        total.append(math.nan if c.total_steps is None else c.total_steps)
        target.append(math.nan if declared is None else declared)
    loss = _Table.of(loss_times, losses_)
    steps_table = _Table.of(step_times, step_values)
    lengths = loss.lengths
    width = int(lengths.max()) if n else 0
    present = np.arange(width)[None, :] < lengths[:, None]

    def padded(concatenated: FloatArray) -> FloatArray:
        """Samples concatenated row after row as rows of (n, width), NaN after each row's."""
        out = np.full((n, width), np.nan)
        out[present] = concatenated
        return out

    flat = loss.times
    times = padded(flat)
    # One axis for all of them: every time read lies in [low, high], NaN (a series with a
    # `problem`) passed over.
    read = (flat, steps_table.times, cpu.times)
    low = min(float(np.fmin.reduce(t, initial=np.inf)) for t in read)
    high = max(float(np.fmax.reduce(t, initial=-np.inf)) for t in read)
    low, high = (low - 1.0, high + 1.0) if low <= high else (-1.0, 1.0)
    span = high - low + 1.0
    rising = bool(n and width) and _rising(flat, lengths)

    def held(table: _Table, table_rows: IntArray) -> tuple[FloatArray, IntArray]:
        """(value, place in `table`) of the sample held at each loss sample, NaN and -1 where
        none: a gather when the rows' samples are the loss samples' own times."""
        at = table.gathered(table_rows, lengths) if rising else None
        if at is not None and np.array_equal(table.times[at], flat):
            place = np.full((n, width), -1, dtype=np.int64)
            place[present] = at
            return padded(table.values[at]), place
        place = table.held(times, table_rows, low, span)
        found = place >= 0
        values = np.full(place.shape, np.nan)
        values[found] = table.values[place[found]]
        return values, place

    steps, _ = held(steps_table, np.arange(n, dtype=np.int64))
    cores, cpu_place = held(cpu, rows)
    node_cores = np.array(node_cores_, dtype=np.float64)
    return Histories(
        times_seconds=times, losses=padded(loss.values), steps=steps, cores=cores,
        busy=_busy(snapshot, cpu, cpu_place, rows=rows, node_cores=node_cores, low=low,
                   span=span),
        lengths=lengths.astype(np.float64),
        allocation_cores=np.array(allocation, dtype=np.float64) * node_cores,
        max_cores=node_cores, total_steps=np.array(total, dtype=np.float64),
        target_loss=np.array(target, dtype=np.float64),
        smoothing_steps=np.full(n, float(DEFAULT_SMOOTHING_STEPS)))


def _busy(snapshot: Snapshot, cpu: _Table, place: IntArray, *, rows: IntArray,
          node_cores: FloatArray, low: float, span: float) -> FloatArray:
    """1 where the node of container `rows[i]` used at least BUSY_SHARE of its cores at the
    CPU sample at `place[i, k]` in `cpu` (every container's CPU series), 0 where not, NaN where
    there is no such sample. A node's use at a time is the sum of its containers' samples at
    exactly that time (NaN counted as 0)."""
    if cpu.times.size == 0 or rows.size == 0:
        return np.full(place.shape, np.nan)
    names = sorted({c.node for c in snapshot.containers})
    index = {name: k for k, name in enumerate(names)}
    node = np.array([index[c.node] for c in snapshot.containers], dtype=np.float64)
    # A sample's key is its node and time on one axis; samples of one node at one time share it.
    keys_ = (cpu.times - low) + np.repeat(node, cpu.lengths) * span
    unique, group = _groups(keys_)
    node_load = np.bincount(group, weights=np.nan_to_num(cpu.values), minlength=unique.size)
    found = place >= 0
    safe = np.where(found, place, 0)
    # A sample with no time (a series with a `problem`) is in no node's load.
    found &= np.isfinite(cpu.times[safe])
    busy = node_load[group[safe]] >= BUSY_SHARE * node_cores[:, None]
    return np.where(found, busy.astype(np.float64), np.nan)


def _groups(keys_: FloatArray) -> tuple[FloatArray, IntArray]:
    """`np.unique(keys_, return_inverse=True)` by a stable argsort: the keys come as sorted runs
    (each container's samples in time order), which a stable sort merges several times faster
    than `unique`'s own sort."""
    order = np.argsort(keys_, kind="stable")
    ordered = keys_[order]
    new = np.empty(ordered.size, dtype=np.bool_)
    new[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    where = np.empty(ordered.size, dtype=np.int64)
    where[order] = np.cumsum(new) - 1
    return ordered[new], where
