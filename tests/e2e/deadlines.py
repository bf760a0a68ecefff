"""Scenario (e): three jobs with deadlines on one one-core engine, under NA (equal shares) and
under `policyd run` with the Deadline policy; every start, end and deadline from the engine.

Why this shape. Three single-threaded jobs start together on one core (`lab(cpus="0")`, every
job pinned to CPU 0): an urgent one of U steps and two long ones of 1.5 U each. With T the
urgent job's time alone (U over the core's speed), equal shares give each job a third of the
core, so the urgent job ends after about 3 T; its deadline is 2 T (plus the trainers' start-up
seconds): NA misses it by about T, a third of its run. Knowing the deadlines, the core can
finish the urgent job by about 1.1 T and the long ones by 4 T, the whole work; their deadlines
are 1.6 times that (plus start-up), which NA also meets: only the urgent job separates them.

The machine's speed is measured, not assumed: right before each run three probe jobs of
`probe_steps` run together, as the three jobs will, and their logs give the core's steps/s
(this shared machine has given one job 828 and 1858 steps/s in two runs of one CI session;
and one job alone at 2025 steps/s, then three together at 870 in all, in the first run of
this scenario: a lone probe does not tell what three jobs get). The steps of every job are
sized from it so that T is `urgent_seconds` at that speed, and the deadlines
(`policyd.io/deadline`, a duration counted from the container's creation,
`policyd.engine.declarations`) from the same T, so the shape holds on a fast or a loaded
machine. What can still break it is the load changing between the probe and the run: NA
meets the urgent deadline only if the run is 1.5 times faster than the probe, and Deadline
cannot meet them if it is about 1.6 times slower (`DeadlineRun.core_steps_per_second` shows
the run's own speed beside the probe's).
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import docker

from tests.e2e.harness import (
    JobSpec,
    Lab,
    ProbedNames,
    docker_time,
    exit_of,
    finish_jobs,
    log_points,
    logged_speed,
    policyd_run,
    round_prefix,
    run_job,
    steps_at,
)

ROLES = ("long-1", "long-2", "urgent")
"""Started in this order, together (the urgent job last: it gains nothing from starting
first)."""
RUNS = {"na": "NA", "dl": "Deadline"}
"""Each run's job-name prefix and its policy: fresh names per run, so that no policy reads the
previous run's series of a job of the same name in Prometheus."""
DEADLINE_LABEL = "policyd.io/deadline"


NAMES = ProbedNames(tag="dl", roles=ROLES, runs=tuple(RUNS))

CI_ATTEMPTS = 3
"""Deadline runs the CI test may make (tests/e2e/test_deadline_docker.py): the lab names
that many rounds' jobs."""


MODE = "shares"
"""The proof's CPU mode. Hard quotas (the kind's default) were the first choice: in the rounds
recorded that way (benchmarks/README.md) the Deadline runs went at 0.45-0.72 of their probe's
speed against NA's 0.69-0.81, because quotas that add up to the core leave a throttled job
idle while the core has time and this shared machine's other users take their part of CPU 0
anyway; once a run is slower than about 0.6 of its probe, no allocation meets every deadline
and the proof measures the machine, not the policy. CPU shares are work-conserving weights:
the urgent job still gets the share its deadline needs whenever the jobs compete, and no
core time is left idle. (In the simulator the two modes meet as many deadlines: 305 and 302
of 320 over the eight insufficient worlds, every deadline in the sufficient ones.)"""


def deadline_policy(*, interval: float = 3, margin: float = 0.1, mode: str = MODE) -> str:
    """Deadline at its defaults (hopeless jobs at the floor) but in `mode` (`MODE`), for a
    short interval (these jobs last about a minute), no moves (one engine), and the evaluation
    and selector of the other e2e policies."""
    return f"""\
apiVersion: policyd.io/v1alpha1
kind: Deadline
metadata: {{name: e2e-deadline}}
spec:
  interval_seconds: {interval}
  margin: {margin}
  mode: {mode}
  migrate: false
  evaluation: {{query: policyd_training_loss, normalization: absolute}}
  selector: {{labels: {{app: train}}}}
"""


@dataclass(frozen=True)
class DeadlineShape:
    """The jobs (module docstring), in multiples of T, the urgent job's time alone."""

    urgent_seconds: float = 15.0
    long_factor: float = 1.5
    """Each long job's work, in T."""
    urgent_deadline: float = 2.0
    """The urgent job's deadline, in T (NA ends it at about 3 T)."""
    long_deadline: float = 1.6
    """The long jobs' deadline, as a multiple of the whole work (4 T)."""
    startup_seconds: float = 5.0
    """Added to every deadline: the trainers' start-up (PyTorch import), which is not work."""
    probe_steps: int = 4000
    """Each of the three probe jobs'."""
    lr: float = 0.001
    smoothing: int = 500

    def sized(self, steps_per_second: float) -> tuple[dict[str, int], dict[str, int]]:
        """Each role's steps and deadline (whole seconds from its creation) at that speed."""
        t = self.urgent_seconds
        steps = {"urgent": round(steps_per_second * t),
                 "long-1": round(steps_per_second * t * self.long_factor),
                 "long-2": round(steps_per_second * t * self.long_factor)}
        whole = t * (1 + 2 * self.long_factor)
        long_deadline = round(self.long_deadline * whole + self.startup_seconds)
        deadlines = {"urgent": round(self.urgent_deadline * t + self.startup_seconds),
                     "long-1": long_deadline, "long-2": long_deadline}
        return steps, deadlines

    def spec(self, name: str, steps: int) -> JobSpec:
        return JobSpec(name, steps=steps, lr=self.lr, smoothing=self.smoothing, cpuset="0",
                       print_every=1000)


@dataclass(frozen=True)
class DeadlineJob:
    """One job as the engine saw it: created, started and finished (`docker inspect`), its
    declared deadline (seconds from creation) and steps."""

    name: str
    steps: int
    deadline_seconds: int
    created: float
    started: float
    finished: float
    exit_code: int
    points: tuple[tuple[float, int, float], ...] = ()
    log_tail: str = ""
    """The last lines of its log when it exited otherwise than 0."""
    """(time, step, smoothed loss) of each progress line it logged."""

    @property
    def deadline_at(self) -> float:
        return self.created + self.deadline_seconds

    @property
    def slack(self) -> float:
        """Seconds it finished before its deadline (negative: after)."""
        return self.deadline_at - self.finished

    @property
    def met(self) -> bool:
        return self.finished <= self.deadline_at


@dataclass
class DeadlineRun:
    label: str
    steps_per_second: float
    """The core's speed with three jobs on it (the probe), which sized the jobs."""
    jobs: dict[str, DeadlineJob]
    limits: dict[str, list[tuple[int, int]]]
    """The distinct successive (CpuShares, CpuQuota) of each job (quota in microseconds per
    100 ms; 0: none set)."""
    limit_times: dict[str, list[float]] = field(default_factory=dict)
    """When each of `limits` was first seen (epoch seconds), pair for pair."""

    @property
    def core_steps_per_second(self) -> float:
        """What the core did in the run: all the jobs' steps over first start to last end
        (start-up included)."""
        jobs = self.jobs.values()
        return sum(j.steps for j in jobs) / (max(j.finished for j in jobs)
                                             - min(j.started for j in jobs))

    def _urgent_window(self) -> tuple[float, float] | None:
        """From the urgent job's first progress line to its last: the time the shape is about
        (every job is on the core then, steps or start-up)."""
        points = self.role("urgent").points
        if len(points) < 2 or points[-1][0] <= points[0][0]:
            return None
        return points[0][0], points[-1][0]

    def _work_between(self, start: float, end: float) -> float:
        return sum(steps_at(j.points, end) - steps_at(j.points, start)
                   for j in self.jobs.values())

    @property
    def urgent_core_steps_per_second(self) -> float:
        """The core's speed while the urgent job stepped: every job's logged steps in that
        window (they run the same model) over its length. Read from the logs as the probe
        reads its jobs, so the two compare: their ratio is how much the machine's speed moved
        between the probe, which sized the jobs and deadlines, and the run."""
        window = self._urgent_window()
        if window is None:
            return math.nan
        return self._work_between(*window) / (window[1] - window[0])

    @property
    def speed_over_probe(self) -> float:
        return self.urgent_core_steps_per_second / self.steps_per_second

    @property
    def run_core_steps_per_second(self) -> float:
        """The core's speed over the whole run: every job's logged steps from the first
        progress line of any job to the last of any job, over that time. The long jobs'
        deadlines hang on this one: a run whose core kept its speed while the urgent job
        stepped and then slowed down (another process took CPU 0) can miss them whatever
        the policy does."""
        points = [p for j in self.jobs.values() for p in j.points]
        if len(points) < 2:
            return math.nan
        start, end = min(t for t, _, _ in points), max(t for t, _, _ in points)
        return self._work_between(start, end) / (end - start) if end > start else math.nan

    @property
    def run_speed_over_probe(self) -> float:
        return self.run_core_steps_per_second / self.steps_per_second

    @property
    def urgent_work_share(self) -> float:
        """The share of the core's work (every job's logged steps) the urgent job did while
        it stepped. Equal shares give each of three jobs a third, whatever the machine's
        speed; a policy serving it first, more."""
        window = self._urgent_window()
        if window is None:
            return math.nan
        points = self.role("urgent").points
        done = self._work_between(*window)
        return (points[-1][1] - points[0][1]) / done if done > 0 else math.nan

    def role(self, role: str) -> DeadlineJob:
        return next(j for j in self.jobs.values() if j.name.endswith(f"-{role}"))

    def missed(self) -> list[str]:
        return [j.name for j in self.jobs.values() if not j.met]

    def table(self) -> list[dict[str, object]]:
        origin = min(j.created for j in self.jobs.values())
        return [{"job": j.name, "steps": j.steps, "deadline_s": j.deadline_seconds,
                 "start": round(j.started - origin, 1), "end": round(j.finished - origin, 1),
                 "slack_s": round(j.slack, 1), "met": j.met,
                 **exit_of(j.exit_code, j.log_tail),
                 "shares_quota": self.limits[j.name],
                 "shares_quota_at_s": [round(t - origin, 1)
                                       for t in self.limit_times.get(j.name, [])]}
                for j in self.jobs.values()]


@dataclass
class LimitLog:
    """`HostConfig.CpuShares` and `CpuQuota` of the named containers on the engine at `url`,
    polled until `close()`; each container's distinct successive pairs, and when each was
    first seen."""

    url: str
    names: tuple[str, ...]
    every: float = 0.3
    values: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    times: dict[str, list[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.values = {n: [] for n in self.names}
        self.times = {n: [] for n in self.names}
        self._stop = threading.Event()
        self._api = docker.APIClient(base_url=self.url, version="auto", timeout=30)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for name in self.names:
                try:
                    host = self._api.inspect_container(name)["HostConfig"]
                except (docker.errors.DockerException, OSError):
                    continue
                limits = (int(host.get("CpuShares") or 0), int(host.get("CpuQuota") or 0))
                seen = self.values[name]
                if not seen or seen[-1] != limits:
                    seen.append(limits)
                    self.times[name].append(time.time())
            self._stop.wait(self.every)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._api.close()


def probe(lab_: Lab, shape: DeadlineShape, prefix_: str, directory: Path) -> float:
    """The core's steps/s with three jobs on it, as in the runs: three probe jobs of
    `shape.probe_steps` started together, the sum of their speeds from their logs (first to
    last logged step, so the start-up does not count)."""
    engine = lab_.engine("e1")
    containers = [run_job(engine, shape.spec(name, shape.probe_steps), lab_.ports[name],
                          directory) for name in NAMES.probes(prefix_)]
    speeds = []
    try:
        for c in containers:
            c.wait(timeout=300)
            points = log_points(c)
            assert len(points) >= 2, f"{c.name} logged {len(points)} progress lines"
            speeds.append(logged_speed(points))
    finally:
        for c in containers:
            c.remove(force=True)
    return sum(speeds)


def run_deadlines(lab_: Lab, shape: DeadlineShape, prefix_: str, label: str) -> DeadlineRun:
    """Probe the core's speed, then start the three jobs together on e1 with their deadlines;
    wait for all to exit; what the engine saw."""
    directory = lab_.ckpt / label
    speed = probe(lab_, shape, prefix_, directory)
    steps, deadlines = shape.sized(speed)
    engine = lab_.engine("e1")
    names = NAMES.jobs(prefix_)
    origin = time.time()
    containers = {}
    for name, role in zip(names, ROLES, strict=True):
        containers[name] = run_job(engine, shape.spec(name, steps[role]), lab_.ports[name],
                                   directory, labels={DEADLINE_LABEL: f"{deadlines[role]}s"})
    limits = LimitLog(engine.url, names)
    try:
        inspected = {n: c.attrs for n, c in containers.items()}
        # all the work at the probe's speed, three times over, plus start-up
        timeout = origin + 3 * sum(steps.values()) / speed + 120
        results, _ = finish_jobs(lab_, containers, origin=origin, deadline=timeout,
                                 quality=0.0)
    finally:
        limits.close()
    jobs = {}
    for name, role in zip(names, ROLES, strict=True):
        r = results[name]
        jobs[name] = DeadlineJob(name=name, steps=steps[role], deadline_seconds=deadlines[role],
                                 created=docker_time(inspected[name]["Created"]),
                                 started=r.started, finished=r.finished, exit_code=r.exit_code,
                                 points=tuple(r.points), log_tail=r.log_tail)
    return DeadlineRun(label=label, steps_per_second=speed, jobs=jobs, limits=limits.values,
                       limit_times=limits.times)


def compare(lab_: Lab, shape: DeadlineShape, directory: Path, *, round_: int = 0
            ) -> dict[str, DeadlineRun]:
    """One NA run (no policyd) and one under `policyd run` with the Deadline policy."""
    return {"NA": run_deadlines(lab_, shape, round_prefix("na", round_), f"NA-dl-{round_}"),
            "Deadline": under_deadline(lab_, shape, directory, round_=round_)}


def under_deadline(lab_: Lab, shape: DeadlineShape, directory: Path, *, round_: int = 0
                   ) -> DeadlineRun:
    """One run under `policyd run` with the Deadline policy (its log in
    `directory/policyd-<prefix>/policyd.log`)."""
    name = round_prefix("dl", round_)
    with policyd_run(directory / f"policyd-{name}", deadline_policy(), engines=lab_.engines,
                     prometheus_url=lab_.prometheus.url):
        return run_deadlines(lab_, shape, name, f"Deadline-dl-{round_}")
