"""Plain values of the simulated world: training profiles, jobs, nodes, scenarios, results.

Shared by the profiles (recorded curves), the world (`policyd.sim.world`), the scenarios and
the reports. Frozen and keyword-only; times are virtual seconds from the scenario's start.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

import numpy as np

from policyd.engine.spec import PolicyDocument
from policyd.model.snapshot import FloatArray

REPORT_WINDOW_ITERATIONS = 100
"""The simulated exporter reports the mean loss of the last 100 iterations, as training loops
log a running average (a Keras epoch mean, the Hugging Face Trainer's logging_steps mean): the
raw loss of one mini-batch is noise of 10-15 % on our recorded classifiers' tails, far above any
alpha the thesis uses, while a 100-step mean moves by ~1 % per 100 steps there."""


def running_mean(losses: FloatArray, window: int) -> FloatArray:
    """reported[0] = losses[0] (before training); reported[i] = mean of losses[i-w+1 .. i],
    over the iterations done so far when fewer than w (iteration 0 is not a training step)."""
    steps = losses[1:]
    total = np.concatenate(([0.0], np.cumsum(steps)))
    ends = np.arange(1, steps.size + 1)
    starts = np.maximum(ends - window, 0)
    means = (total[ends] - total[starts]) / (ends - starts)
    return np.concatenate((losses[:1], means))


@dataclass(frozen=True, kw_only=True, eq=False)
class Profile:
    """How one model trains on this machine: its loss per iteration and what an iteration costs.

    `losses[i]` is the loss of iteration i as recorded (`losses[0]` before training);
    `reported` is what the job's exporter shows after i iterations: the running mean of the last
    `REPORT_WINDOW_ITERATIONS` losses (see there), which is the evaluation function policies see.
    `iteration_seconds_1core` is the wall time of one iteration on one core; the speed on c cores
    follows Amdahl's law with `parallel_fraction` p, fitted from runs at several thread counts:
    t(c) = t(1) * ((1 - p) + p / c) for c >= 1, and t(1) / c below one core (time slicing).
    A job never uses more than `max_parallelism` cores. `source` says whether the curve was
    recorded from a real training run or generated from the family fitted to recorded ones.
    """

    model: str
    source: Literal["recorded", "fitted"]
    losses: FloatArray
    iteration_seconds_1core: float
    parallel_fraction: float
    max_parallelism: float
    note: str = ""

    def __post_init__(self) -> None:
        if self.losses.ndim != 1 or self.losses.size < 2 or not np.isfinite(self.losses).all():
            raise ValueError(f"{self.model}: losses must be a finite 1-d series of >= 2 values")
        if not self.iteration_seconds_1core > 0:
            raise ValueError(f"{self.model}: iteration_seconds_1core must be positive")
        if not 0 <= self.parallel_fraction <= 1:
            raise ValueError(f"{self.model}: parallel_fraction must be in [0, 1]")
        if not self.max_parallelism >= 1:
            raise ValueError(f"{self.model}: max_parallelism must be >= 1 core")
        reported = running_mean(self.losses, REPORT_WINDOW_ITERATIONS)
        reported.setflags(write=False)
        object.__setattr__(self, "reported", reported)
        # The simulator reads one reported value per job and event: indexing a list of Python
        # floats costs a fraction of indexing the array (same values, converted once).
        object.__setattr__(self, "_reported_values", reported.tolist())

    reported: FloatArray = field(init=False, repr=False)
    _reported_values: list[float] = field(init=False, repr=False)

    @functools.cached_property
    def iterations(self) -> int:
        """Iterations in the recorded (or generated) run."""
        return int(self.losses.size - 1)

    def iteration_seconds(self, cores: float) -> float:
        """Wall seconds per iteration with `cores` cores (inf with none)."""
        if cores <= 0:
            return float("inf")
        usable = min(cores, self.max_parallelism)
        if usable < 1:
            return self.iteration_seconds_1core / usable
        p = self.parallel_fraction
        return self.iteration_seconds_1core * ((1 - p) + p / usable)

    def loss_after(self, iterations: float) -> float:
        """The reported evaluation function once `iterations` iterations are complete."""
        done = int(min(max(iterations, 0.0), self.iterations))
        return self._reported_values[done]


DEFAULT_MEMORY_GIB_PER_CORE = 4.0
"""A worker's memory when its entry does not say: 4 GiB per core (only the default scheduler's
scores read memory: `policyd.sim.kube_scheduler`)."""


@dataclass(frozen=True, kw_only=True)
class NodeSpec:
    """A simulated worker: its cores, how fast each trains relative to an average core (None:
    not stated, runs at 1.0 and its snapshot says nothing, so policies judge it), whether its
    snapshot states that speed (`labelled`: False plays a machine of that speed whose operator
    did not label it, so policies judge it), and its memory (None:
    `DEFAULT_MEMORY_GIB_PER_CORE` per core)."""

    name: str
    cores: float
    speed: float | None = None
    memory_gib: float | None = None
    labelled: bool = True

    @property
    def stated_speed(self) -> float | None:
        """The speed its snapshot states (its `policyd.io/speed` label), None when unlabelled."""
        return self.speed if self.labelled else None

    @property
    def core_speed(self) -> float:
        """What one of its cores trains at (1.0 when not stated)."""
        return 1.0 if self.speed is None else self.speed

    @property
    def memory_bytes(self) -> int:
        gib = self.cores * DEFAULT_MEMORY_GIB_PER_CORE if self.memory_gib is None \
            else self.memory_gib
        return int(gib * 1024 ** 3)


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    """One training job: which profile, when it is submitted, and where (None: placement rule).

    `work_scale` multiplies the profile's iteration time: the scenarios size jobs so that the
    baseline is about as contended as the thesis's testbed (each scenario says how).
    """

    id: str
    profile: Profile
    submit_seconds: float
    work_scale: float = 1.0
    node: str | None = None
    reports_total: bool = True
    """Whether the job's exporter shows its total steps (`policyd_training_progress_ratio`), as
    a framework that knows its epochs and batches does; False: only the steps done."""
    deadline_seconds: float | None = None
    """When the job must finish (virtual seconds; it declares it as `policyd.io/deadline`);
    None: no deadline."""
    held: bool = False
    """Handed over held (`policyd.model.pending`): it waits until a policy admits it when one
    that admits runs (otherwise it starts at submission, as the baseline has it)."""
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Labels the job's container carries beside policyd's own (its declared targets:
    `policyd.io/qoe-target`, `policyd.io/target-loss`)."""

    def rate_at(self, cores: float) -> float:
        """Iterations per second on `cores` cores (0 on none)."""
        if cores <= 0:
            return 0.0
        return 1.0 / (self.profile.iteration_seconds(cores) * self.work_scale)


@dataclass(frozen=True, kw_only=True)
class Scenario:
    """A named, seeded experiment: the cluster, the jobs, the policies that run together in it
    (the thesis's experiments run one; a policy file may bring several), and the thesis's
    figures."""

    name: str
    description: str
    seed: int
    nodes: tuple[NodeSpec, ...]
    jobs: tuple[JobSpec, ...]
    policies: tuple[PolicyDocument, ...]
    baseline: Literal["NA", "DS", "FCFS"]
    oracle: Literal["srpt", "qoe", "edf"] = "srpt"
    """The oracle's rule: shortest remaining work first (`policyd.sim.oracle`), the most QoE
    targets met (`policyd.sim.qoe_oracle`, for the qoe-* scenarios), or earliest deadline first
    with admission (`policyd.sim.deadline_oracle`, for the deadline scenarios)."""
    scrape_seconds: float = 5.0
    migration_seconds: float = 5.0
    thesis: Mapping[str, object] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        if not self.policies:
            raise ValueError(f"scenario {self.name}: at least one policy")

    @property
    def policy(self) -> PolicyDocument:
        """The scenario's (first) policy: the one its report is named after."""
        return self.policies[0]


@dataclass(frozen=True, kw_only=True)
class TargetResult:
    """How a job with a declared target did: `kind` "qoe" (a steps-per-second target, met when
    its iterations over its completion time reach it: its throughput over the whole run) or
    "loss" (a target loss, met when its final loss is at or below it); for QoE targets also
    the share of its running time whose scrape intervals met the rate, and how many times the
    policy's CPU limit on it changed direction after its first minute."""

    kind: Literal["qoe", "loss"]
    declared: str
    value: float
    achieved: float
    met: bool
    time_satisfied: float | None = None
    direction_changes: int = 0
    limit_changes: int = 0


@dataclass(frozen=True, kw_only=True)
class JobResult:
    id: str
    model: str
    submit: float
    finish: float
    time_to_quality: float
    nodes: tuple[str, ...]
    deadline: float | None = None
    started: float | None = None
    """When it first ran (after waiting for admission, when held); None: at submission."""
    final_loss: float = float("nan")
    """The loss it reported when it ended (finished, or stopped by a policy)."""
    full_loss: float = float("nan")
    """The loss its whole run ends at (what it would have reached had it not been stopped)."""
    stopped: str | None = None
    """Why a policy stopped it ("target", "converged"), None when it ran to its end."""
    target: TargetResult | None = None

    @property
    def jct(self) -> float:
        """Job completion time: finish - submit, seconds."""
        return self.finish - self.submit

    @property
    def met(self) -> bool | None:
        """Whether it finished by its deadline (None: it had none)."""
        return None if self.deadline is None else self.finish <= self.deadline + 1e-6

    @property
    def lateness(self) -> float:
        """Seconds past its deadline (0 when met or without one)."""
        return 0.0 if self.deadline is None else max(self.finish - self.deadline, 0.0)


@dataclass(frozen=True, kw_only=True)
class Sample:
    """The world at a scrape, for the pictures: per running job its node, the cores it used on
    average over the scrape interval that ends here, and its CPU fraction."""

    time: float
    jobs: Mapping[str, tuple[str, float, float]]  # job id -> (node, cores used, cpu fraction)


Strategy = Literal["policy", "baseline", "baseline_fewest", "oracle"]
"""How a run is driven: the scenario's policies; no policy with the default scheduler's
scoring ("baseline") or with the fewest-jobs rule ("baseline_fewest"); the oracle."""


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """One run of a scenario under one strategy (policy, baselines or oracle)."""

    strategy: Strategy
    jobs: tuple[JobResult, ...]
    migrations: int
    timeline: tuple[Sample, ...] = ()
    allocated_core_seconds: float = 0.0
    """Core-seconds allocated to running jobs: per job its entitlement (`SimJob.allocated`)."""
    used_core_seconds: float = 0.0
    """Of those, the core-seconds the jobs used (within their allocations)."""
    core_seconds: float = 0.0
    """CPU-seconds used by every job together (cores x seconds)."""

    @property
    def deadline_jobs(self) -> int:
        return sum(1 for j in self.jobs if j.deadline is not None)

    @property
    def deadlines_met(self) -> int:
        return sum(1 for j in self.jobs if j.met)

    @property
    def allocated_cpu_used(self) -> float:
        """The fraction of allocated CPU-seconds the jobs actually used (1.0: none idle)."""
        if self.allocated_core_seconds <= 0:
            return 1.0
        return self.used_core_seconds / self.allocated_core_seconds

    @property
    def avg_lateness(self) -> float:
        """The average seconds late of the jobs that missed their deadline (0: none did)."""
        late = [j.lateness for j in self.jobs if j.met is False]
        return float(np.mean(late)) if late else 0.0

    @property
    def target_jobs(self) -> int:
        return sum(1 for j in self.jobs if j.target is not None)

    @property
    def targets_met(self) -> int:
        return sum(1 for j in self.jobs if j.target is not None and j.target.met)

    @property
    def avg_jct(self) -> float:
        return float(np.mean([j.jct for j in self.jobs])) if self.jobs else 0.0

    @property
    def makespan(self) -> float:
        """From the first submission to the last finish, seconds."""
        if not self.jobs:
            return 0.0
        return max(j.finish for j in self.jobs) - min(j.submit for j in self.jobs)
