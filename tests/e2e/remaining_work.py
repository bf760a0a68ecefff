"""Scenario (d): three jobs of different lengths on one one-core engine, under NA, FlowCon and
Predictive (`policyd run`), every figure from the engine (`harness`).

Why this shape. It was chosen before any run of Predictive on an engine, from first principles,
and is not tuned after: only the scale (`RemainingWorkShape.scaled`) differs between the CI test
and the benchmark's long version.

* One core, three single-threaded jobs: the engine runs on CPU 0 only (`lab(cpus="0")`), so it
  reports NCPU 1 and policyd sees the one core the jobs share (every job is also pinned to CPU 0,
  as in the FlowCon proof). On a node of two cores with the jobs pinned to one, Predictive would
  grant "one core each" to two jobs that in fact share one.
* Different lengths, in an arrival order that is not their size order: a medium job (M steps)
  first, a long one (2M) when the medium one has done 0.4 M alone, a short one (0.4 M) when the
  two together have done another 0.4 M. All run the FlowCon proof's trainer (lr 0.001,
  smoothing 500), which reports its total steps. Knowing each job's remaining work then decides
  the order that minimises the average completion time (shortest remaining first: the medium
  job, then the short one, the long one last), and it is neither the arrival order nor its
  reverse: NA shares the core equally whatever the lengths; FlowCon serves jobs whose loss still
  improves (NL) before converged ones (CL), which favours a newcomer, here the long job.
  The thesis's order (a long job first, shorter ones later) is the one where "newest first" and
  "shortest first" coincide, so it could not tell what knowing the remaining work adds.
* Expected from a fluid model of weighted sharing (one core, 4000 steps/s, 1.5 s of start-up,
  a new job at Predictive's floor for two intervals before its forecast): at M = 75,000 the
  average JCT about 12 % below NA's and FlowCon's; at M = 150,000 about 17 % (the start-up
  and the two intervals weigh less). The makespan is the same for all (the work is the same
  and every policy keeps the core busy).
* Sized in seconds, not steps: the shape was designed at 4,000 steps/s (the core of the hosts
  it was first run on), and the CI test runs it at the speed of the host it is on
  (`RemainingWorkShape.at_speed`, from `probe_speed`: one job alone on the core, as job 1
  runs first), so every job takes the seconds it was designed to take: on a host at a third
  of that speed, 75,000 steps would take three times as long (8.5 minutes for the test
  instead of 3) and the start-up and the policy's interval would weigh less than designed.
  Never scaled up: a faster host runs the designed steps. Both runs of a comparison run the
  same steps, so the comparison is between the same jobs.
* Arrivals from observed progress, not wall-clock seconds (the FlowCon proof's lesson: fixed
  starts failed on both fast and slow moments of this shared machine): job 2 starts when job 1's
  log shows `stagger_steps` steps; job 3 when jobs 1 and 2 together have logged `stagger_steps`
  more. Both are amounts of work done, so they do not depend on the machine's speed nor on the
  trainers' start-up times, and hardly on the policy (the core is always busy).

`policyd run` on Docker applies weights and exports each job's category, but not its reasons nor
its forecasts: `DecisionLog` takes those from the same engine code deciding on snapshots built by
the same source (`DockerSnapshotSource`, the daemon's for profile docker-stats), beside it, in
every run (NA and FlowCon too: the same load on the machine in every run).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from docker.models.containers import Container

from policyd.actuators.docker import DockerSettings
from policyd.engine import decide
from policyd.engine.spec import PolicyDocument
from policyd.model import Decision
from policyd.policy.loader import load_policies_text
from policyd.sources.docker_stats import DockerSnapshotSource
from tests.e2e.harness import (
    JobSpec,
    Lab,
    StaggeredRun,
    finish_jobs,
    flowcon_policy,
    log_points,
    logged_speed,
    policyd_run,
    predictive_policy,
    probe_steps_per_second,
    round_prefix,
    run_job,
    steps_at,
    wait_for,
)

ROLES = ("medium", "long", "short")
POLICIES = {"na": "NA", "fc": "FlowCon", "pd": "Predictive"}
"""Each run's job-name prefix and its policy: fresh names per run, so that no policy reads the
previous run's series of a job of the same name in Prometheus."""


PROBE = "rw-probe"
"""The job `probe_speed` runs."""

DESIGN_STEPS_PER_SECOND = 4000.0
"""The one core's speed the shape was designed at (module docstring)."""


def job_names(prefix: str) -> tuple[str, ...]:
    return tuple(f"{prefix}-{role}" for role in ROLES)


def all_job_names(repeats: int = 1) -> list[str]:
    """Every job name of `repeats` rounds of the three runs and the probe (the lab's scrape
    targets)."""
    return [PROBE, *(n for r in range(repeats) for p in POLICIES
                     for n in job_names(round_prefix(p, r)))]


@dataclass(frozen=True)
class RemainingWorkShape:
    """The jobs (module docstring): steps of the medium, long and short job, and the work
    between arrivals."""

    medium_steps: int = 75_000
    long_steps: int = 150_000
    short_steps: int = 30_000
    stagger_steps: int = 30_000
    lr: float = 0.001
    smoothing: int = 500
    quality: float = 0.25
    """Time-to-quality: until the smoothed loss (the exporter's mean) is at most this."""
    print_every: int = 1000
    """Steps between the trainer's progress lines (what the arrivals and the figures read)."""

    def scaled(self, factor: float) -> RemainingWorkShape:
        return replace(self, **{k: round(getattr(self, k) * factor) for k in (
            "medium_steps", "long_steps", "short_steps", "stagger_steps")})

    def at_speed(self, steps_per_second: float) -> RemainingWorkShape:
        """This shape with every job taking the seconds it takes at the design speed on a core
        of `steps_per_second` (never more steps than designed), progress lines as often in
        seconds (at least every 100 steps)."""
        factor = min(1.0, steps_per_second / DESIGN_STEPS_PER_SECOND)
        return replace(self.scaled(factor),
                       print_every=max(100, round(self.print_every * factor)))

    @property
    def steps(self) -> tuple[int, int, int]:
        return (self.medium_steps, self.long_steps, self.short_steps)

    def total_of(self, name: str) -> int:
        """The steps of the job named `name` (any run's prefix)."""
        return self.steps[ROLES.index(name.rsplit("-", 1)[1])]

    def specs(self, prefix_: str) -> tuple[JobSpec, ...]:
        return tuple(JobSpec(name, steps=steps, lr=self.lr, smoothing=self.smoothing,
                             cpuset="0", print_every=self.print_every)
                     for name, steps in zip(job_names(prefix_), self.steps, strict=True))


def probe_speed(lab_: Lab, directory: Path, steps: int = 6000) -> float:
    """The one core's steps/s for a job alone on it (as job 1 runs first): a job of `steps`
    (the shape's model and settings) on e1, its speed from its log, first to last logged step
    (so that its start-up does not count)."""
    shape = RemainingWorkShape()
    spec = JobSpec(PROBE, steps=steps, lr=shape.lr, smoothing=shape.smoothing, cpuset="0",
                   print_every=100)
    return probe_steps_per_second(lab_.engine("e1"), spec, lab_.ports[PROBE], directory)


def last_step(container: Container) -> int:
    points = log_points(container)
    return points[-1][1] if points else 0


def run_remaining_work(lab_: Lab, shape: RemainingWorkShape, prefix_: str, label: str
                       ) -> StaggeredRun:
    """Start the three jobs of `shape` on e1 as the module docstring says; wait for all to
    exit; their results."""
    engine = lab_.engine("e1")
    origin = time.time()
    specs = shape.specs(prefix_)
    one, two = specs[0].name, specs[1].name
    containers: dict[str, Container] = {}

    def start(spec: JobSpec) -> None:
        containers[spec.name] = run_job(engine, spec, lab_.ports[spec.name], lab_.ckpt / label)

    start(specs[0])

    def reached() -> list[tuple[float, int, float]] | None:
        points = log_points(containers[one])
        return points if points and points[-1][1] >= shape.stagger_steps else None
    points = wait_for(reached, timeout_seconds=600, every=0.2,
                      what=f"{one} at step {shape.stagger_steps}",
                      state=lambda: log_points(containers[one])[-1:])
    stagger = time.time() - origin
    last = points[-1]
    alone_rate = logged_speed(points)
    start(specs[1])
    wait_for(lambda: last_step(containers[one]) + last_step(containers[two])
             >= last[1] + shape.stagger_steps, timeout_seconds=600, every=0.2,
             what=f"{one} and {two} to log {shape.stagger_steps} more steps together",
             state=lambda: (last_step(containers[one]), last_step(containers[two])))
    start(specs[2])
    # all the work at job 1's lone speed, twice over, plus start-up
    deadline = origin + 2 * sum(shape.steps) / alone_rate + 120
    results, shares = finish_jobs(lab_, containers, origin=origin, deadline=deadline,
                                  quality=shape.quality)
    return StaggeredRun(label=label, origin=origin, jobs=results, shares=shares,
                        stagger_seconds=stagger, alone_steps_per_second=alone_rate,
                        step_at_stagger=last[1])


# --- what Predictive decides, beside the run ----------------------------------------------------


@dataclass
class DecisionLog:
    """Every `every` seconds, a snapshot from the engines and Prometheus built by the source
    `policyd run` uses (profile docker-stats) and `policy`'s decision on it (reasons and
    forecasts), kept with the snapshot's time. Runs on its own thread until `close()`."""

    lab: Lab
    policy: PolicyDocument
    every: float = 2.0
    decisions: list[Decision] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        settings = DockerSettings.model_validate(
            {"hosts": {e.name: e.url for e in self.lab.engines}})
        self._source = DockerSnapshotSource(self.lab.prometheus.url, settings,
                                            timeout_seconds=5)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        interval = float(self.policy.spec.interval_seconds)  # type: ignore[attr-defined]
        while not self._stop.is_set():
            try:
                snapshot = self._source.snapshot([self.policy],
                                                 intervals={self.policy.name: interval})
                self.decisions.append(decide(self.policy, snapshot))
            except Exception as exc:  # a record of what failed, never the run's end
                self.errors.append(f"{type(exc).__name__}: {exc}")
            self._stop.wait(self.every)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        with contextlib.suppress(Exception):
            self._source.close()


@dataclass
class Compared:
    """One round: each policy's run and what Predictive decided beside it."""

    runs: dict[str, StaggeredRun]
    decisions: dict[str, list[Decision]]
    decision_errors: dict[str, list[str]]

    def average_jct(self) -> dict[str, float]:
        return {label: run.average_jct for label, run in self.runs.items()}


def compare(lab_: Lab, shape: RemainingWorkShape, directory: Path, *, round_: int = 0,
            order: Sequence[str] = tuple(POLICIES),
            on_run: Callable[[str, StaggeredRun], Any] | None = None) -> Compared:
    """Run the shape once per policy of `order` (keys of POLICIES) on `lab_`'s engine e1, with
    `policyd run` for FlowCon and Predictive; Predictive's decisions beside every run."""
    predictive = load_policies_text(predictive_policy(), "predictive.yaml")[0]
    texts = {"fc": flowcon_policy(), "pd": predictive_policy()}
    runs: dict[str, StaggeredRun] = {}
    decisions: dict[str, list[Decision]] = {}
    errors: dict[str, list[str]] = {}
    for key in order:
        label, name = POLICIES[key], round_prefix(key, round_)
        log = DecisionLog(lab_, predictive)
        try:
            if key in texts:
                with policyd_run(directory / f"policyd-{name}", texts[key],
                                 engines=lab_.engines, prometheus_url=lab_.prometheus.url):
                    runs[label] = run_remaining_work(lab_, shape, name, f"{label}-{round_}")
            else:
                runs[label] = run_remaining_work(lab_, shape, name, f"{label}-{round_}")
        finally:
            log.close()
        decisions[label], errors[label] = log.decisions, log.errors
        if on_run is not None:
            on_run(label, runs[label])
    return Compared(runs=runs, decisions=decisions, decision_errors=errors)


# --- reading the runs ----------------------------------------------------------------------------


def work_done(run: StaggeredRun, at: float) -> float:
    """Steps every job of `run` had logged by `at`: the work the core had done (every job
    runs the same model, so a step costs the same whoever takes it)."""
    return sum(steps_at(j.points, at) for j in run.jobs.values())


def average_jct_steps(run: StaggeredRun) -> float:
    """The average completion time measured in the core's work instead of seconds: for each
    job, the steps all jobs logged between its start and its end (`work_done`). Every policy
    keeps the one core busy with the same work, so this is the average JCT at a constant
    machine speed: it divides out the load the other users of this shared machine put on it,
    which moves from run to run (job 1 alone at 828 and at 1858 steps/s in two runs of one
    CI session) and within a run."""
    return sum(work_done(run, j.finished) - work_done(run, j.started)
               for j in run.jobs.values()) / len(run.jobs)


def _weight_at(run: StaggeredRun, name: str, at: float) -> int:
    weight = 1024
    for change in run.shares.get(name, ()):
        if change.time <= at:
            weight = change.shares or 1024
    return weight


@dataclass(frozen=True)
class Favoured:
    """Over the time two jobs or more ran: the share of it in which the job with the least
    remaining work (its total minus its logged steps) had the highest CPU weight alone."""

    seconds: float
    shortest_alone_on_top: float
    """Fraction of `seconds`."""


def favoured(run: StaggeredRun, shape: RemainingWorkShape, every: float = 0.25) -> Favoured:
    """`Favoured` of `run` from the engine's weights (`ShareLog`) and the jobs' logs."""
    jobs = run.jobs.values()
    start = min(j.started for j in jobs)
    end = max(j.finished for j in jobs)
    busy = hits = 0
    at = start
    while at < end:
        running = [j for j in jobs if j.started <= at < j.finished]
        if len(running) >= 2:
            busy += 1
            left = {j.name: shape.total_of(j.name) - steps_at(j.points, at) for j in running}
            weights = {j.name: _weight_at(run, j.name, at) for j in running}
            shortest = min(left, key=lambda n: left[n])
            top = max(weights.values())
            hits += weights[shortest] == top and sum(w == top for w in weights.values()) == 1
        at += every
    return Favoured(seconds=busy * every, shortest_alone_on_top=hits / busy if busy else 0.0)


@dataclass(frozen=True)
class EtaCheck:
    """One forecast of a served job (the one Predictive gives the core) against the engine:
    when it was made, the job, the predicted and the true remaining seconds, and whether the
    truth lies in the forecast's [low, high]."""

    at: float
    job: str
    predicted_seconds: float
    true_seconds: float
    inside: bool
    reason: str

    @property
    def error(self) -> float:
        return abs(self.predicted_seconds - self.true_seconds) / self.true_seconds


def eta_checks(run: StaggeredRun, decisions: Sequence[Decision], *,
               min_seconds: float = 5.0) -> list[EtaCheck]:
    """Every forecast of a SERVED job in `decisions` with at least `min_seconds` of its run
    left in truth (the engine's FinishedAt), against the truth."""
    out = []
    for d in decisions:
        for a in d.assessments:
            job = run.jobs.get(a.container)
            if job is None or a.forecast is None or a.category != "SERVED":
                continue
            truth = job.finished - d.time
            if truth < min_seconds:
                continue
            f = a.forecast
            out.append(EtaCheck(at=d.time, job=a.container, predicted_seconds=f.remaining_seconds,
                                true_seconds=truth,
                                inside=f.low_seconds - 1 <= truth <= f.high_seconds + 1,
                                reason=a.note))
    return out
