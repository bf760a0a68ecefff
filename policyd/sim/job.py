"""One simulated training job: its progress at a constant rate, its limits and its markers.

A job runs `profile.iterations` iterations. On c cores it makes 1 / (profile.iteration_seconds(c)
* work_scale) iterations per second, using at most `profile.max_parallelism` cores (its demand).
Between the world's events its cores, hence its rate, are constant, so progress is exact
arithmetic: `run_for` advances it and notes when the job crossed its time-to-quality iteration,
interpolated inside the stretch. The world owns the clock and the events; this module owns the
per-job arithmetic and state, nothing else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

import numpy as np

from policyd.model import Container, Markers, PendingJob, Series
from policyd.model import labels as keys
from policyd.model.snapshot import FloatArray
from policyd.sim.cpu import CpuMode
from policyd.sim.source import EPOCH_SECONDS, Ring
from policyd.sim.types import JobSpec

Phase = Literal["pending", "held", "running", "migrating", "done"]
"""pending: not submitted yet; held: submitted, waiting for a policy to admit it."""
NAMESPACE = "training"
PROGRESS_TOLERANCE = 1e-9
"""Iterations: progress this close to a whole iteration counts as having reached it (absorbs the
rounding of rate * seconds, so a job finishes and reports its loss at the predicted instant)."""


@dataclass(eq=False)
class SimJob:
    """The mutable state of one job in the world (virtual seconds throughout)."""

    spec: JobSpec
    quality_iteration: int
    evaluation: Ring
    cpu: Ring
    steps: Ring
    phase: Phase = "pending"
    node: str = ""  # where it runs, or where it is being restored while migrating
    nodes: list[str] = field(default_factory=list)
    progress: float = 0.0  # iterations done, fractional
    cores: float = 0.0
    rate: float = 0.0  # iterations per second on `cores`
    speed: float = 1.0  # how fast its node's cores train (set when it starts on one)
    fraction: float = 1.0  # FlowCon's limit as a fraction of the node
    mode: CpuMode = "shares"
    started_at: float = 0.0  # when its current container started
    resume_at: float = math.inf  # end of a migration in progress
    markers: Markers = field(default_factory=Markers)
    cpu_seconds: float = 0.0  # core-seconds used since `measured_since` (the last scrape)
    measured_since: float = 0.0
    quality_at: float | None = None
    finish_at: float | None = None
    first_started_at: float | None = None
    allocated: float = 0.0  # cores it is entitled to now (the world's `_share` sets it)
    allocated_seconds: float = 0.0  # core-seconds allocated so far
    used_seconds: float = 0.0  # of those, core-seconds used

    @property
    def labels(self) -> dict[str, str]:
        """What its workload carries: the app, its model (also as its `policyd.io/workload`:
        jobs of one model cost alike per step), the labels its spec declares (its targets),
        and its deadline when it has one."""
        model = self.spec.profile.model
        out = {"app": "train", "model": model, keys.WORKLOAD: model, **self.spec.labels}
        if self.spec.deadline_seconds is not None:
            out[keys.DEADLINE] = rfc3339(EPOCH_SECONDS + self.spec.deadline_seconds)
        return out
    cpu_seconds_total: float = 0.0  # core-seconds used over the whole run
    stopped: str | None = None  # why a policy stopped it (a `Stop` action's event)
    limits: list[tuple[float, float]] = field(default_factory=list)  # (time, fraction) set
    scraped_progress: float = 0.0  # iterations done at the last scrape
    rate_met_seconds: float = 0.0  # scrape intervals whose rate met its QoE target
    rate_seconds: float = 0.0  # every scrape interval it ran in

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def iterations(self) -> int:
        return self.spec.profile.iterations

    @property
    def demand(self) -> float:
        """Cores it can use: its maximum parallelism."""
        return self.spec.profile.max_parallelism

    @property
    def loss(self) -> float:
        """The evaluation function after the whole iterations done (the previous value holds
        in the middle of an iteration)."""
        return self.spec.profile.loss_after(self.progress + PROGRESS_TOLERANCE)

    @property
    def complete(self) -> bool:
        return self.progress >= self.iterations - PROGRESS_TOLERANCE

    def set_cores(self, cores: float) -> None:
        """Its cores from now on; it runs at its node's `speed` (a core of speed 1.5 does an
        iteration in 1 / 1.5 of the time)."""
        self.cores = cores
        seconds = self.spec.profile.iteration_seconds(cores) * self.spec.work_scale
        self.rate = 0.0 if cores <= 0 else self.speed / seconds

    def seconds_to_finish(self) -> float:
        if self.rate <= 0:
            return math.inf
        return max(self.iterations - self.progress, 0.0) / self.rate

    def remaining_work_seconds(self, capacity_cores: float) -> float:
        """Seconds left at its best speed on a node of `capacity_cores` (the oracle's key)."""
        best = min(self.demand, capacity_cores)
        seconds = self.spec.profile.iteration_seconds(best) * self.spec.work_scale / self.speed
        return max(self.iterations - self.progress, 0.0) * seconds

    def cores_to_finish_within(self, seconds: float) -> float:
        """The fewest cores with which its remaining iterations take at most `seconds` (inf:
        none are enough, its demand included; 0: nothing is left). The inverse of its
        profile's Amdahl law (`Profile.iteration_seconds`), exact: the oracle's knowledge."""
        left = max(self.iterations - self.progress, 0.0)
        if left <= 0:
            return 0.0
        if seconds <= 0:
            return math.inf
        profile = self.spec.profile
        one = profile.iteration_seconds_1core * self.spec.work_scale / self.speed
        serial = one * (1.0 - profile.parallel_fraction)
        x = seconds / left
        if x >= one:
            return one / x
        if x > serial and profile.parallel_fraction > 0:
            cores = one * profile.parallel_fraction / (x - serial)
            return cores if cores <= self.demand else math.inf
        return math.inf

    def start(self, now: float, node: str, *, speed: float = 1.0) -> None:
        """A container for this job starts on `node`, whose cores train at `speed`
        (submission, or restore after a move)."""
        if self.first_started_at is None:
            self.first_started_at = now
        self.phase = "running"
        self.node = node
        self.speed = speed
        if not self.nodes or self.nodes[-1] != node:
            self.nodes.append(node)
        self.started_at = now
        self.measured_since = now
        self.cpu_seconds = 0.0
        self.resume_at = math.inf
        if self.quality_at is None and self.progress >= self.quality_iteration:
            self.quality_at = now  # only when the curve's very start already is "quality"

    def stop(self) -> None:
        """The container stops: no CPU until the job starts again (or ever, when done)."""
        self.set_cores(0.0)
        self.cpu_seconds = 0.0

    def run_for(self, start: float, seconds: float) -> None:
        """Advance from virtual time `start` by `seconds` at the current rate."""
        if self.phase != "running" or seconds <= 0:
            return
        self.cpu_seconds += self.cores * seconds
        self.allocated_seconds += self.allocated * seconds
        self.used_seconds += min(self.cores, self.allocated) * seconds
        self.cpu_seconds_total += self.cores * seconds
        if self.rate <= 0:
            return
        before = self.progress
        self.progress = min(before + self.rate * seconds, float(self.iterations))
        target = self.quality_iteration
        if self.quality_at is None and self.progress >= target - PROGRESS_TOLERANCE:
            # Reached inside this constant-rate stretch: interpolate the instant.
            self.quality_at = start + max(target - before, 0.0) / self.rate

    def container(self, *, since: float) -> Container:
        """The job as a policy sees it, with its series from epoch time `since` on."""
        model = self.spec.profile.model
        eval_times, eval_values = self.evaluation.since(since)
        cpu_times, cpu_values = self.cpu.since(since)
        step_times, step_values = self.steps.since(since)
        return Container(
            id=self.id, name=f"{self.id}-{model}", node=self.node,
            started_at=EPOCH_SECONDS + self.started_at,
            evaluation=Series.of(eval_times, eval_values),  # copies: the rings move on
            cpu_usage=Series.of(cpu_times, cpu_values),
            cpu_allocation=self.fraction, namespace=NAMESPACE,
            labels=self.labels, markers=self.markers,
            steps=Series.of(step_times, step_values),
            total_steps=float(self.iterations) if self.spec.reports_total else None,
            submitted_at=EPOCH_SECONDS + self.spec.submit_seconds,
        )

    def pending_job(self) -> PendingJob:
        """The job as a held one (`policyd.model.pending`), waiting for admission."""
        return PendingJob(id=self.id, name=f"{self.id}-{self.spec.profile.model}",
                          submitted_at=EPOCH_SECONDS + self.spec.submit_seconds,
                          namespace=NAMESPACE, labels=self.labels)

    @property
    def steps_done(self) -> float:
        """Whole iterations done: what the exporter's steps counter shows."""
        return float(math.floor(self.progress + PROGRESS_TOLERANCE))


def rfc3339(epoch_seconds: float) -> str:
    """Epoch seconds as an RFC 3339 UTC time, to the millisecond."""
    text = datetime.fromtimestamp(epoch_seconds, UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def quality_iteration(losses: FloatArray) -> int:
    """The first iteration at which the loss has made 95% of its final change.

    For a falling curve: the first i with loss(i) <= L0 - 0.95 (L0 - L_final), over the whole
    curve (time-to-quality). A rising curve (an accuracy-like function) is read the other way.
    """
    start, final = float(losses[0]), float(losses[-1])
    target = start - 0.95 * (start - final)
    reached = losses <= target if final <= start else losses >= target
    return int(np.argmax(reached))
