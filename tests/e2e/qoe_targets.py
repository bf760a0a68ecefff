"""Scenario (f): QoE targets on one one-core engine, under NA (equal shares) and under
`policyd run` with the QoE policy. Every figure from the engine and the trainers' logs.

Why this shape. Two single-threaded jobs start together on one core (`lab(cpus="0")`, both
pinned to CPU 0), each declaring a throughput target (`policyd.io/qoe-target:
steps_per_second>=R`, a label): a heavy job that needs `heavy_fraction` (0.6) of the core and
a light one that needs `light_fraction` (0.15). Equal shares give each half the core: the
heavy job runs at 0.5 of the core's speed, short of its 0.6 by a sixth, while the light one has
more than three times what it asked for. Both fit in one core with room: 0.75 of it, or 0.79
with QoE's 5 % headroom, and the light job's floor (1 / (beta n) = 0.0625 of the core) still
leaves the heavy one 0.94. So the claim is about sharing, not about speed: the same core meets
both targets when its time is split by need, and NA misses one.

What "meets" means here. A job's rate while both jobs run (`rate_together`): its logged steps
over the window from the later first progress line to the earlier last one, read from the
trainers' logs (engine time stamps). It includes the start of the run, before policyd has
measured anyone (QoE's first intervals are equal shares too). Each job's whole-run average
(its steps over FinishedAt - StartedAt, `docker inspect`, start-up included: the rate QoE's
catch-up rule holds a job to, docs/design.md "Throughput over the whole run is a deadline") is
shown beside it. The light job is the longer one (`light_work_seconds` of the core's time, the
heavy one `heavy_seconds` x its fraction), so it is still running when the heavy one ends in
both runs, and the window covers the heavy job's whole run.

The machine's speed is measured, not assumed (the Deadline proof's lesson,
tests/e2e/deadlines.py): right before each run two probe jobs run together, as the two jobs
will, and the core's speed is the steps both logged over the window both were logging (so
that one probe running alone while the other still imports torch does not count twice). The
targets are fractions of it. What can still break the shape is the load changing between the
probe and the run: NA would meet the heavy target if the run went at 1.2 times the probe's
speed; QoE cannot meet both below about 0.8 of it (the two needs, 0.75 of the probe's core
and 0.79 with the headroom, no longer fit in the core). `QoeRun.core_steps_per_second` is
the run's own speed, measured the same way as the probe's, shown beside it, and
`QoeRun.feasible` says whether the run's core could meet both targets at all.

The stop at a target loss, run after each comparison by `benchmarks/docker_proof.py qoe`, is
`tests/e2e/target_stop.py`.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.e2e.harness import (
    JobSpec,
    Lab,
    Policyd,
    ProbedNames,
    finish_jobs,
    log_points,
    policyd_run,
    round_prefix,
    run_job,
)

ROLES = ("heavy", "light")
RUNS = {"na": "NA", "qoe": "QoE"}
"""Each run's job-name prefix and its policy: fresh names per run, so that no policy reads the
previous run's series of a job of the same name in Prometheus."""
QOE_LABEL = "policyd.io/qoe-target"
RATIO_LINE = re.compile(r'^policyd_qoe_ratio\{([^}]*)\} (\S+)$')


NAMES = ProbedNames(tag="qoe", roles=ROLES, runs=tuple(RUNS))


def qoe_policy(*, interval: float = 3, on_target: str = "notify") -> str:
    """QoE at its defaults (shares, headroom 0.05, beta 8) but for a short interval (these jobs
    last about a minute), an alert time that fits the history this interval gives
    (window_intervals x interval), and the evaluation and selector of the other e2e policies.
    `on_target`: what to do with a job that reaches its `policyd.io/target-loss`."""
    return f"""\
apiVersion: policyd.io/v1alpha1
kind: QoE
metadata: {{name: e2e-qoe}}
spec:
  interval_seconds: {interval}
  alert_after_seconds: {10 * interval}
  on_target: {on_target}
  evaluation: {{query: policyd_training_loss, normalization: absolute}}
  selector: {{labels: {{app: train}}}}
"""


@dataclass(frozen=True)
class QoeShape:
    """The jobs (module docstring), as fractions of the probed core speed P (steps/s)."""

    heavy_fraction: float = 0.6
    light_fraction: float = 0.15
    heavy_seconds: float = 60.0
    """The heavy job's steps: this many seconds at its target."""
    light_work_seconds: float = 45.0
    """The light job's steps: this many seconds of the whole core (it outlives the heavy job
    under both runs: NA has done 0.5 x 72 s = 36 of them when the heavy job ends)."""
    probe_steps: int = 8000
    """Each of the two probe jobs'."""
    lr: float = 0.001
    smoothing: int = 500

    def sized(self, steps_per_second: float) -> tuple[dict[str, int], dict[str, float]]:
        """Each role's steps and target (steps/s) at that core speed."""
        targets = {"heavy": round(self.heavy_fraction * steps_per_second, 1),
                   "light": round(self.light_fraction * steps_per_second, 1)}
        steps = {"heavy": round(targets["heavy"] * self.heavy_seconds),
                 "light": round(self.light_work_seconds * steps_per_second)}
        return steps, targets

    def spec(self, name: str, steps: int) -> JobSpec:
        return JobSpec(name, steps=steps, lr=self.lr, smoothing=self.smoothing, cpuset="0",
                       print_every=500)


def together(points: dict[str, list[tuple[float, int, float]]]) -> tuple[float, float,
                                                                          dict[str, float]]:
    """The window every job was logging (the latest first progress line to the earliest last
    one) and each job's steps/s over it, its steps interpolated at the window's ends."""
    start = max(p[0][0] for p in points.values())
    end = min(p[-1][0] for p in points.values())
    assert end > start, f"the jobs never logged at the same time ({start:.1f} >= {end:.1f})"

    def step_at(p: list[tuple[float, int, float]], t: float) -> float:
        for (t0, s0, _), (t1, s1, _) in itertools.pairwise(p):
            if t0 <= t <= t1:
                return s0 + (s1 - s0) * (t - t0) / max(1e-9, t1 - t0)
        return float(p[0][1] if t <= p[0][0] else p[-1][1])

    rates = {n: (step_at(p, end) - step_at(p, start)) / (end - start) for n, p in points.items()}
    return start, end, rates


def probe(lab_: Lab, shape: QoeShape, prefix_: str, directory: Path) -> float:
    """The core's steps/s with two jobs on it, as in the runs (module docstring)."""
    engine = lab_.engine("e1")
    containers = {name: run_job(engine, shape.spec(name, shape.probe_steps), lab_.ports[name],
                                directory) for name in NAMES.probes(prefix_)}
    try:
        points = {}
        for name, c in containers.items():
            c.wait(timeout=300)
            points[name] = log_points(c)
            assert len(points[name]) >= 2, f"{name} logged {len(points[name])} lines"
    finally:
        for c in containers.values():
            c.remove(force=True)
    _, _, rates = together(points)
    return sum(rates.values())


@dataclass
class RatioLog:
    """policyd's own view, for diagnosis only (no claim reads it): `policyd_qoe_ratio` of the
    named jobs on its /metrics, polled every `every` seconds; per job each change of (state,
    ratio) with its time."""

    policyd: Policyd
    names: tuple[str, ...]
    every: float = 0.5
    seen: dict[str, list[tuple[float, str, float]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.seen = {n: [] for n in self.names}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(OSError):
                for line in self.policyd.metrics().splitlines():
                    m = RATIO_LINE.match(line)
                    if m is None:
                        continue
                    labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
                    name, state = labels.get("container", ""), labels.get("state", "")
                    if name in self.seen:
                        value = round(float(m.group(2)), 3)
                        last = self.seen[name][-1] if self.seen[name] else None
                        if last is None or last[1:] != (state, value):
                            self.seen[name].append((time.time(), state, value))
            self._stop.wait(self.every)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


@dataclass(frozen=True)
class QoeJob:
    """One job as the engine and its log showed it."""

    name: str
    role: str
    steps: int
    target: float
    started: float
    finished: float
    exit_code: int
    rate_together: float
    """Steps/s while both jobs ran (module docstring)."""

    @property
    def whole_run_rate(self) -> float:
        return self.steps / (self.finished - self.started)

    @property
    def met(self) -> bool:
        return self.rate_together >= self.target


@dataclass
class QoeRun:
    label: str
    steps_per_second: float
    """The probe's: the core's speed with two jobs on it, which sized the targets."""
    core_steps_per_second: float
    """The run's own, measured the same way: both jobs' steps/s while both ran."""
    together_seconds: float
    jobs: dict[str, QoeJob]
    policy_view: dict[str, list[tuple[float, str, float]]]
    """`RatioLog` while both ran: (seconds from the first start, state, measured / target)."""
    shares: dict[str, list[tuple[float, int]]]
    """Each job's CpuShares (1024: the default) while both jobs ran: (seconds from the first
    start, value) at each change seen (`ShareLog`, polled every 0.2 s)."""

    def reversals(self, name: str) -> int:
        """How often the job's CpuShares changed direction while both jobs ran, from the first
        value policyd set (the engine's default 1024 before it is not a decision; the issue's
        settling bar counts these after a job's first minute)."""
        values = [v for _, v in self.shares[name]][1:]
        steps = [b - a for a, b in itertools.pairwise(values) if b != a]
        return sum((a > 0) != (b > 0) for a, b in itertools.pairwise(steps))

    @property
    def feasible(self) -> bool:
        """Whether the run's core could meet both targets at all (their sum within its
        speed)."""
        return sum(j.target for j in self.jobs.values()) <= self.core_steps_per_second

    def role(self, role: str) -> QoeJob:
        return next(j for j in self.jobs.values() if j.role == role)

    def missed(self) -> list[str]:
        return [j.name for j in self.jobs.values() if not j.met]

    def table(self) -> list[dict[str, object]]:
        origin = min(j.started for j in self.jobs.values())
        return [{"job": j.name, "steps": j.steps, "target": j.target,
                 "rate_together": round(j.rate_together, 1),
                 "ratio": round(j.rate_together / j.target, 3),
                 "whole_run_rate": round(j.whole_run_rate, 1),
                 "whole_run_ratio": round(j.whole_run_rate / j.target, 3),
                 "start": round(j.started - origin, 1), "end": round(j.finished - origin, 1),
                 "met": j.met, "exit_code": j.exit_code,
                 "shares": [v for _, v in self.shares[j.name]],
                 "share_times": [t for t, _ in self.shares[j.name]],
                 "share_reversals": self.reversals(j.name),
                 "policyd_ratio": [f"{t:g}:{state[:3]}:{ratio:g}"
                                   for t, state, ratio in self.policy_view.get(j.name, [])]}
                for j in self.jobs.values()]


def run_qoe(lab_: Lab, shape: QoeShape, prefix_: str, label: str,
            policyd_: Policyd | None = None) -> QoeRun:
    """Probe the core's speed, then start the two jobs together on e1 with their targets; wait
    for both to exit; what the engine and the logs saw (and, when `policyd_` runs, its own
    view of the jobs: `RatioLog`)."""
    directory = lab_.ckpt / label
    speed = probe(lab_, shape, prefix_, directory)
    steps, targets = shape.sized(speed)
    engine = lab_.engine("e1")
    names = NAMES.jobs(prefix_)
    origin = time.time()
    containers = {}
    for name, role in zip(names, ROLES, strict=True):
        containers[name] = run_job(
            engine, shape.spec(name, steps[role]), lab_.ports[name], directory,
            labels={QOE_LABEL: f"steps_per_second>={targets[role]:g}"})
    view = RatioLog(policyd_, names) if policyd_ is not None else None
    try:
        # both jobs at half the core, twice over, plus start-up
        timeout = origin + 2 * sum(steps.values()) / speed + 120
        results, shares = finish_jobs(lab_, containers, origin=origin, deadline=timeout,
                                      quality=0.0)
    finally:
        if view is not None:
            view.close()
    start, end, rates = together({n: r.points for n, r in results.items()})
    jobs = {}
    for name, role in zip(names, ROLES, strict=True):
        r = results[name]
        jobs[name] = QoeJob(name=name, role=role, steps=steps[role], target=targets[role],
                            started=r.started, finished=r.finished, exit_code=r.exit_code,
                            rate_together=rates[name])
    first = min(j.started for j in jobs.values())
    both_until = min(j.finished for j in jobs.values())
    values = {}
    for name in names:
        seen: list[tuple[float, int]] = []
        for change in shares[name]:
            v = change.shares or 1024
            if change.time <= both_until and (not seen or seen[-1][1] != v):
                seen.append((round(change.time - first, 1), v))
        values[name] = seen
    policy_view = {n: [(round(t - first, 1), state, ratio) for t, state, ratio in seen_
                       if t <= both_until]
                   for n, seen_ in (view.seen if view is not None else {}).items()}
    return QoeRun(label=label, steps_per_second=speed,
                  core_steps_per_second=sum(rates.values()), together_seconds=end - start,
                  jobs=jobs, policy_view=policy_view, shares=values)


def compare(lab_: Lab, shape: QoeShape, directory: Path, *, round_: int = 0
            ) -> dict[str, QoeRun]:
    """One NA run (no policyd) and one under `policyd run` with the QoE policy."""
    runs = {"NA": run_qoe(lab_, shape, round_prefix("na", round_), f"NA-qoe-{round_}")}
    name = round_prefix("qoe", round_)
    with policyd_run(directory / f"policyd-{name}", qoe_policy(), engines=lab_.engines,
                     prometheus_url=lab_.prometheus.url) as policyd:
        runs["QoE"] = run_qoe(lab_, shape, name, f"QoE-qoe-{round_}", policyd)
    return runs
