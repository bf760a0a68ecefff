"""The snapshot: everything the engine may know about the cluster at one instant.

A snapshot is built by a source (Prometheus, cAdvisor, the simulator) or read from a JSON file
(`policyd.model.codec`). Values are frozen and check themselves on construction, so an engine
that receives a `Snapshot` never meets an impossible one. Problems that concern a single
container's series (NaN, gaps, unordered timestamps) are *not* construction errors: the engine
reports them per container and takes no action for that container.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from policyd.model.node_report import NodeReport
from policyd.model.pending import PendingJob

FloatArray = npt.NDArray[np.float64]


def _frozen_array(values: object) -> FloatArray:
    array = np.array(values, dtype=np.float64)
    array.setflags(write=False)
    return array


@dataclass(frozen=True, kw_only=True, eq=False)
class Series:
    """A time series as two aligned arrays: sample times (epoch seconds) and values.

    `problem` names the first structural defect (timestamps not strictly increasing); the engine
    turns it into "no action for this container". Values may be NaN or Inf: the engine checks
    the samples it actually reads.
    """

    times_seconds: FloatArray
    values: FloatArray
    problem: str | None = field(default=None)

    @classmethod
    def from_pairs(cls, pairs: object) -> Series:
        """Build from `[[t, v], ...]` (the JSON form); raises ValueError on a malformed shape."""
        array = np.array(pairs, dtype=np.float64)
        if array.size == 0:
            return cls.empty()
        if array.ndim != 2 or array.shape[1] != 2:
            raise ValueError("expected a list of [time_seconds, value] pairs")
        return cls.of(array[:, 0], array[:, 1])

    @classmethod
    def of(cls, times_seconds: object, values: object) -> Series:
        times = _frozen_array(times_seconds)
        vals = _frozen_array(values)
        if times.shape != vals.shape or times.ndim != 1:
            raise ValueError("times and values must be one-dimensional and of equal length")
        problem = None
        if not np.isfinite(times).all():
            problem = "a sample time is NaN or infinite"
        elif times.size > 1:
            # For finite times, t[i] - t[i-1] <= 0 exactly when t[i] <= t[i-1].
            back = times[1:] <= times[:-1]
            if back.any():
                problem = _not_increasing(times, int(np.argmax(back)) + 1)
        return cls(times_seconds=times, values=vals, problem=problem)

    @classmethod
    def many(cls, times_seconds: FloatArray, values: FloatArray,
             offsets: Sequence[int] | npt.NDArray[np.int64]) -> list[Series]:
        """Series i from `[offsets[i], offsets[i + 1])` of two aligned flat arrays: the same
        series as `Series.of` on each slice, with the checks done once for all of them (a
        10,000-container snapshot holds 20,000 series)."""
        times, vals = _frozen_array(times_seconds), _frozen_array(values)
        if times.shape != vals.shape or times.ndim != 1:
            raise ValueError("times and values must be one-dimensional and of equal length")
        bounds = np.asarray(offsets, dtype=np.int64)
        if bounds.ndim != 1 or bounds.size < 1 or bounds[0] != 0 or bounds[-1] != times.size \
                or (bounds[1:] < bounds[:-1]).any():
            raise ValueError("offsets must rise from 0 to the number of samples")
        starts, ends = bounds[:-1], bounds[1:]
        # Per series: how many times are not finite, and the first step that does not rise
        # (a step i -> i+1 inside one series; the steps between two series do not count).
        not_finite = np.concatenate(([0], np.cumsum(~np.isfinite(times))))
        bad_times = not_finite[ends] > not_finite[starts]
        back = np.flatnonzero(times[1:] <= times[:-1])
        owner = np.searchsorted(bounds, back, side="right") - 1
        inside = back + 1 < ends[owner]
        first_back: dict[int, int] = {}
        for at, i in zip((back[inside] + 1).tolist(), owner[inside].tolist(), strict=True):
            first_back.setdefault(i, at)
        out: list[Series] = []
        bad = bad_times.tolist()
        for i, (lo, hi) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
            series_times = times[lo:hi]
            problem = None
            if bad[i]:
                problem = "a sample time is NaN or infinite"
            elif i in first_back:
                problem = _not_increasing(series_times, first_back[i] - lo)
            out.append(cls(times_seconds=series_times, values=vals[lo:hi], problem=problem))
        return out

    @classmethod
    def empty(cls) -> Series:
        return cls.of(np.empty(0), np.empty(0))

    def __len__(self) -> int:
        return int(self.times_seconds.size)

    def pairs(self) -> list[list[float]]:
        return [[float(t), float(v)] for t, v in zip(self.times_seconds, self.values, strict=True)]


def _not_increasing(times: FloatArray, at: int) -> str:
    return f"sample times are not increasing at index {at} (t={times[at]:g})"


@dataclass(frozen=True, kw_only=True)
class Markers:
    """Facts the cluster keeps for policyd because they cannot be recomputed from metrics."""

    migrated: bool = False
    rebalanced: bool = False
    converged_at: float | None = None
    last_action_at: float | None = None
    move_failures: int = 0
    """Moves of this workload that failed in a row (rolled back, or left pending)."""
    move_failed_at: float | None = None
    """When the last of them failed (epoch seconds): the back-off counts from here."""

    def __post_init__(self) -> None:
        if self.move_failures < 0:
            raise ValueError(f"move_failures must be >= 0, got {self.move_failures}")


@dataclass(frozen=True, kw_only=True)
class Node:
    """A worker: a Docker host or a Kubernetes node. CPU figures are in cores.

    `speed` is how fast one of its cores trains relative to an average core (1.0; 2.0: a step
    takes half the time), as the operator states it (`policyd.io/speed` on the node); None when
    not stated: `policyd.engine.node_speed` then judges it from the jobs' step rates, or treats
    it as average and says so."""

    name: str
    cpu_capacity: float
    cpu_usage: float = 0.0
    speed: float | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("node name must not be empty")
        if not (self.cpu_capacity > 0 and math.isfinite(self.cpu_capacity)):
            raise ValueError(
                f"cpu_capacity must be a positive number of cores, got {self.cpu_capacity}")
        if not (self.cpu_usage >= 0 and math.isfinite(self.cpu_usage)):
            raise ValueError(
                f"cpu_usage must be a non-negative number of cores, got {self.cpu_usage}")
        if self.speed is not None and not (self.speed > 0 and math.isfinite(self.speed)):
            raise ValueError(f"speed must be a positive number (1.0: an average core), "
                             f"got {self.speed}")


@dataclass(frozen=True, kw_only=True, eq=False)
class Container:
    """One training job (a container or a pod's training container) and its recent history.

    `evaluation` is the job's evaluation function (loss by default); `cpu_usage` is cores used,
    averaged over each sample's preceding interval; `cpu_allocation` is the current FlowCon limit
    as a fraction of the node (1.0 = unrestricted). `steps` is the job's count of training steps
    done (the exporter's `policyd_training_steps_total`, empty when not reported) and
    `total_steps` the steps of the whole run when the job knows them (None otherwise): the
    forecast of where the job is going reads both. `metrics` are the job's QoE metrics by the
    name a policy gives them (`QoE.spec.metrics`: one PromQL per name), each a series; empty
    when no policy asks.
    """

    id: str
    name: str
    node: str
    started_at: float
    evaluation: Series
    cpu_usage: Series
    cpu_allocation: float = 1.0
    namespace: str = ""
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    annotations: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    markers: Markers = field(default_factory=Markers)
    steps: Series = field(default_factory=Series.empty)
    total_steps: float | None = None
    submitted_at: float | None = None
    """When the job was submitted (epoch seconds; a Docker container's creation): a relative
    deadline counts from it. None: from `started_at`."""
    metrics: Mapping[str, Series] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("container id must not be empty")
        if self.submitted_at is not None and not math.isfinite(self.submitted_at):
            raise ValueError("submitted_at must be a finite time in seconds or None")
        if self.total_steps is not None and not (self.total_steps > 0
                                                 and math.isfinite(self.total_steps)):
            raise ValueError(f"total_steps must be a positive number, got {self.total_steps}")
        if not (0 < self.cpu_allocation <= 1):
            raise ValueError(f"cpu_allocation must be in (0, 1], got {self.cpu_allocation}")
        if not math.isfinite(self.started_at):
            raise ValueError("started_at must be a finite time in seconds")
        object.__setattr__(self, "labels", MappingProxyType(dict(self.labels)))
        object.__setattr__(self, "annotations", MappingProxyType(dict(self.annotations)))
        if self.metrics:
            object.__setattr__(self, "metrics", MappingProxyType(dict(self.metrics)))


@dataclass(frozen=True, kw_only=True, eq=False)
class Snapshot:
    """The cluster at `time` (epoch seconds): nodes, containers, each policy's interval, the
    held jobs waiting for admission (`pending`, `policyd.model.pending`), and, for a manager
    that decides from its node agents' reports, those reports (`node_reports`,
    `policyd.model.node_report`: a snapshot of reports holds no containers)."""

    time: float
    nodes: tuple[Node, ...]
    containers: tuple[Container, ...]
    intervals: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    pending: tuple[PendingJob, ...] = ()
    node_reports: tuple[NodeReport, ...] = ()

    def __post_init__(self) -> None:
        if not math.isfinite(self.time):
            raise ValueError("time must be a finite epoch time in seconds")
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise ValueError(f"node names must be unique, got {sorted(names)}")
        ids = [c.id for c in self.containers]
        if len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})
            raise ValueError(f"container ids must be unique; repeated: {', '.join(dup)}")
        known = set(names)
        for c in self.containers:
            if c.node not in known:
                raise ValueError(
                    f"container {c.id!r} is on node {c.node!r}, which is not one of the nodes: "
                    f"{', '.join(sorted(known)) or '(none)'}"
                )
        held = [p.id for p in self.pending]
        clash = sorted({i for i in held if held.count(i) > 1} | (set(held) & set(ids)))
        if clash:
            raise ValueError(f"pending job ids must be unique and not those of running "
                             f"containers; repeated: {', '.join(clash)}")
        for p in self.pending:
            if p.node is not None and p.node not in known:
                raise ValueError(f"pending job {p.id!r} is held on node {p.node!r}, which is "
                                 f"not one of the nodes: {', '.join(sorted(known)) or '(none)'}")
        reported = [(r.policy, r.node) for r in self.node_reports]
        if len(set(reported)) != len(reported):
            raise ValueError("node reports must be one per policy and node")
        for r in self.node_reports:
            if r.node not in known:
                raise ValueError(f"node report of {r.node!r} names no node of the snapshot")
        for policy, seconds in self.intervals.items():
            if not (seconds > 0 and np.isfinite(seconds)):
                raise ValueError(f"intervals[{policy!r}] must be a positive number of seconds")
        object.__setattr__(self, "intervals", MappingProxyType(dict(self.intervals)))

    def interval_seconds(self, policy: str, default_seconds: float) -> float:
        """The policy's current evaluation interval (FlowCon back-off), or its base interval."""
        return float(self.intervals.get(policy, default_seconds))
