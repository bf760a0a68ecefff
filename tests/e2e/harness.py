"""End-to-end harness: real Docker engines, real trainers, real Prometheus / Alertmanager, and
`policyd run` as a separate process, all on 127.0.0.1 (host networking, no bridge).

Shared by `tests/e2e/` (assertions) and `benchmarks/docker_proof.py` (figures), so the numbers
in benchmarks/README.md come from the code the tests run.

What is recorded, and from where (nothing is inferred from policyd's own word):

* `EventLog`: every container event of every engine (`start`, `die`, `update`, ...) with the
  engine's own nanosecond time stamp. A `docker update` policyd applies is an `update` event.
* `ShareLog`: `docker inspect` of every container of every engine, polled; each change of
  `HostConfig.CpuShares` is kept with its time.
* container logs with the engine's time stamps: the trainer's `step=N loss=X mean=Y` lines
  give the time-to-quality; `resumed: step=N` the resume step after a migration.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import signal
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import docker
import docker.errors
from docker.models.containers import Container

from tests.integration.alertmanager import Alertmanager, alertmanager
from tests.integration.docker_engines import (
    ROOT,
    TRAINER_TAG,
    Engine,
    EngineCpus,
    build_trainer_image,
    docker_engines,
    host_binds,
    trainer_command,
)
from tests.integration.servers import LOOPBACK, Prometheus, free_port, prometheus

POLICYD = ROOT / ".venv" / "bin" / "policyd"
SCRAPE_SECONDS = 0.5
LOG_LINE = re.compile(r"^(\S+) step=(\d+) loss=([0-9.]+) mean=([0-9.]+)")


def wait_for(predicate: Callable[[], Any], *, timeout_seconds: float, what: str,
             every: float = 0.1, state: Callable[[], object] | None = None) -> Any:
    """Poll until `predicate()` is truthy; its value. An AssertionError naming `what` after
    the deadline, with what `state()` shows then (the figures a reader needs to see why)."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            seen = f"; seen: {state()}" if state is not None else ""
            raise AssertionError(
                f"timed out after {timeout_seconds:.0f} s waiting for {what}{seen}")
        time.sleep(every)


def docker_time(text: str) -> float:
    """An engine time stamp (RFC 3339, nanoseconds) -> epoch seconds."""
    text = text.strip()
    if text.startswith("0001-"):
        return 0.0
    head, _, frac = text.rstrip("Z").partition(".")
    zone = ""
    for sign in ("+", "-"):
        if sign in frac:
            frac, _, rest = frac.partition(sign)
            zone = sign + rest
    base = datetime.fromisoformat(head + (zone or "+00:00"))
    return base.timestamp() + (float("0." + frac) if frac else 0.0)


# --- what the engines report ------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    time: float
    node: str
    action: str
    name: str
    attributes: dict[str, str]


class EventLog:
    """Every container event of the given engines, from one thread per engine."""

    def __init__(self, engines: Sequence[Engine]) -> None:
        self.events: list[Event] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._streams: list[Any] = []
        self._threads = [threading.Thread(target=self._follow, args=(e,), daemon=True)
                         for e in engines]
        self._ready = threading.Barrier(len(engines) + 1)
        for t in self._threads:
            t.start()
        self._ready.wait(timeout=30)

    def _follow(self, engine: Engine) -> None:
        """Follow the engine's events; when the stream ends (the engine stopped, e.g. the chaos
        test's outage), connect again and go on from the last event seen."""
        since: int | None = None
        version = "auto"  # negotiated once; "auto" would open a connection to ask again
        seen: set[tuple[str, str, str]] = set()
        waiting = True
        while not self._stop.is_set():
            if engine.down:  # stopped on purpose: asking it would only fail
                self._stop.wait(0.1)
                continue
            client = None
            try:
                client = docker.DockerClient(base_url=engine.url, version=version,
                                             timeout=86400)
                version = client.api.api_version
                stream = client.events(decode=True, filters={"type": "container"},
                                       since=since)
            except Exception:  # the engine is down: try again shortly
                if client is not None:
                    client.close()
                self._stop.wait(0.2)
                continue
            self._streams.append(stream)
            if waiting:
                self._ready.wait(timeout=30)
                waiting = False
            with contextlib.suppress(Exception):
                for raw in stream:
                    nanos = int(raw["timeNano"])
                    key = (str(nanos), str(raw.get("Action", "")), str(raw.get("id", "")))
                    since = nanos // 10**9
                    if key in seen:  # `since` is whole seconds, inclusive: some come again
                        continue
                    seen.add(key)
                    attrs = dict((raw.get("Actor") or {}).get("Attributes") or {})
                    event = Event(time=nanos / 1e9, node=engine.name,
                                  action=str(raw.get("Action", "")),
                                  name=attrs.get("name", ""), attributes=attrs)
                    with self._lock:
                        self.events.append(event)
                    if self._stop.is_set():
                        break
            with contextlib.suppress(Exception):
                stream.close()
            client.close()
            self._stop.wait(0.1)

    def close(self) -> None:
        self._stop.set()
        for stream in self._streams:
            with contextlib.suppress(Exception):
                stream.close()
        for t in self._threads:
            t.join(timeout=5)

    def of(self, name: str, action: str | None = None, since: float = 0.0) -> list[Event]:
        with self._lock:
            return [e for e in self.events if e.name == name and e.time >= since
                    and (action is None or e.action == action)]


@dataclass(frozen=True)
class ShareChange:
    time: float
    node: str
    name: str
    shares: int


class ShareLog:
    """`HostConfig.CpuShares` of every container of the given engines, polled every `every`
    seconds; a change (and the first reading) is kept with its time."""

    def __init__(self, engines: Sequence[Engine], every: float = 0.2) -> None:
        self.changes: list[ShareChange] = []
        self._last: dict[tuple[str, str], int] = {}
        self._stop = threading.Event()
        self._engines = list(engines)
        self._apis = [(e.name, docker.APIClient(base_url=e.url, version="auto", timeout=30))
                      for e in engines]
        self._every = every
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for engine, (node, api) in zip(self._engines, self._apis, strict=True):
                if engine.down:  # stopped on purpose (chaos test): leave it alone
                    continue
                with contextlib.suppress(docker.errors.DockerException, OSError):
                    for c in api.containers(all=False):
                        with contextlib.suppress(docker.errors.DockerException, OSError):
                            attrs = api.inspect_container(c["Id"])
                            name = str(attrs["Name"]).lstrip("/")
                            shares = int(attrs["HostConfig"].get("CpuShares") or 0)
                            key = (node, attrs["Id"])
                            if self._last.get(key) != shares:
                                self._last[key] = shares
                                self.changes.append(ShareChange(time.time(), node, name, shares))
            self._stop.wait(self._every)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for _, api in self._apis:
            api.close()

    def of(self, name: str) -> list[ShareChange]:
        return [c for c in list(self.changes) if c.name == name]

    def values(self, name: str) -> list[int]:
        """The distinct successive CpuShares values seen on `name` (0 = the default 1024)."""
        out: list[int] = []
        for c in self.of(name):
            v = c.shares or 1024
            if not out or out[-1] != v:
                out.append(v)
        return out


# --- trainers --------------------------------------------------------------------------------


def round_prefix(run: str, round_: int = 0) -> str:
    """A run's job-name prefix in round `round_`: fresh names per run and round, so that no
    policy reads an earlier run's series of a job of the same name in Prometheus."""
    return run if round_ == 0 else f"{run}{round_}"


@dataclass(frozen=True)
class ProbedNames:
    """The containers of a shape whose every run starts with one probe job per role:
    `<prefix>-<tag>-<role>` and `<prefix>-<tag>-probe-<i>`, a prefix per run and round."""

    tag: str
    roles: tuple[str, ...]
    runs: tuple[str, ...]

    def jobs(self, prefix: str) -> tuple[str, ...]:
        return tuple(f"{prefix}-{self.tag}-{role}" for role in self.roles)

    def probes(self, prefix: str) -> tuple[str, ...]:
        return tuple(f"{prefix}-{self.tag}-probe-{i}" for i in range(1, len(self.roles) + 1))

    def every(self, repeats: int = 1) -> list[str]:
        """Every name, probes too, of `repeats` rounds of every run (the lab's scrape
        targets)."""
        return [n for r in range(repeats) for run in self.runs
                for n in (*self.probes(round_prefix(run, r)), *self.jobs(round_prefix(run, r)))]


@dataclass(frozen=True)
class JobSpec:
    name: str
    steps: int
    lr: float = 0.02
    step_sleep: float = 0.0
    smoothing: int = 100
    cpuset: str | None = None
    cpu_shares: int | None = None
    print_every: int = 100
    checkpoint_every: int = 0
    """Periodic checkpoints every that many steps (0: only on SIGTERM and at the end)."""
    extra: tuple[str, ...] = ()
    """More arguments for the trainer."""


def run_job(engine: Engine, spec: JobSpec, port: int, ckpt_root: Path, *,
            labels: Mapping[str, str] | None = None, held: bool = False) -> Container:
    """Start the trainer `spec` on `engine` under an init (`--init`: SIGTERM reaches it; a
    migration's replacement keeps it) (host network, the managed label and `labels`,
    POLICYD_CONTAINER = its name, its checkpoint directory under `ckpt_root`, a host path
    both engines see). `held`: create it and leave it unstarted (`docker create`), a job held
    for a policy that admits to start, here or on another engine."""
    ckpt = ckpt_root / spec.name
    ckpt.mkdir(parents=True, exist_ok=True)
    command = trainer_command(port, steps=spec.steps, step_sleep=spec.step_sleep, extra=[
        "--lr", str(spec.lr), "--smoothing-steps", str(spec.smoothing),
        "--print-every", str(spec.print_every), "--checkpoint-every", str(spec.checkpoint_every),
        "--job-name", spec.name, *spec.extra])
    kwargs: dict[str, Any] = {}
    if spec.cpuset is not None:
        kwargs["cpuset_cpus"] = spec.cpuset
    if spec.cpu_shares is not None:
        kwargs["cpu_shares"] = spec.cpu_shares
    make = engine.client().containers.create if held else engine.client().containers.run
    return make(
        TRAINER_TAG, command, name=spec.name, detach=True, network_mode="host", init=True,
        labels={"policyd.io/managed": "true", "app": "train", **(labels or {})},
        environment={"POLICYD_CONTAINER": spec.name, "POLICYD_JOB_NAME": spec.name},
        volumes=host_binds(f"{ckpt}:/ckpt"), **kwargs)


def log_points(container: Container) -> list[tuple[float, int, float]]:
    """(time, step, smoothed loss) of every progress line of the container's log."""
    text = container.logs(timestamps=True).decode(errors="replace")
    out = []
    for line in text.splitlines():
        m = LOG_LINE.match(line)
        if m:
            out.append((docker_time(m.group(1)), int(m.group(2)), float(m.group(4))))
    return out


def logged_speed(points: Sequence[tuple[float, int, float]]) -> float:
    """Steps/s from a job's first to its last logged progress line (`log_points`): its speed
    with its start-up left out."""
    (t0, s0, _), (t1, s1, _) = points[0], points[-1]
    return (s1 - s0) / max(1e-9, t1 - t0)


def probe_steps_per_second(engine: Engine, spec: JobSpec, port: int, ckpt_root: Path) -> float:
    """Steps/s of the job `spec` run alone to its end on `engine` (a probe of the core's speed
    that a shape sizes its jobs by), from its log (`logged_speed`); the container removed."""
    container = run_job(engine, spec, port, ckpt_root)
    try:
        container.wait(timeout=300)
        points = log_points(container)
    finally:
        container.remove(force=True)
    assert len(points) >= 2, f"{spec.name} logged {len(points)} progress lines"
    return logged_speed(points)


def steps_at(points: Sequence[tuple[float, int, float]], at: float) -> float:
    """A job's steps done at `at`, interpolated between its logged steps (0 before the first)."""
    previous: tuple[float, float] | None = None
    for t, step, _ in points:
        if t >= at:
            if previous is None:
                return 0.0
            t0, s0 = previous
            return s0 + (step - s0) * (at - t0) / (t - t0)
        previous = (t, float(step))
    return previous[1] if previous is not None else 0.0


def find(engines: Sequence[Engine], name: str) -> tuple[Engine, Container] | None:
    for e in engines:
        with contextlib.suppress(docker.errors.NotFound):
            return e, e.client().containers.get(name)
    return None


# --- policyd run ------------------------------------------------------------------------------


def flowcon_policy(*, interval: float = 4, alpha: float = 0.04, beta: float = 2,
                   window: int = 10, max_interval: float = 16) -> str:
    return f"""\
apiVersion: policyd.io/v1alpha1
kind: FlowCon
metadata: {{name: e2e-flowcon}}
spec:
  alpha: {alpha}
  interval_seconds: {interval}
  max_interval_seconds: {max_interval}
  beta: {beta}
  mode: shares
  window_intervals: {window}
  evaluation: {{query: policyd_training_loss, normalization: absolute}}
  selector: {{labels: {{app: train}}}}
"""


def specon_policy(*, interval: float = 3, alpha: float = 0.01, window: int = 10,
                  grace: float = 20) -> str:
    return f"""\
apiVersion: policyd.io/v1alpha1
kind: SpeCon
metadata: {{name: e2e-specon}}
spec:
  alpha: {alpha}
  interval_seconds: {interval}
  rebalance: false
  migration_grace_seconds: {grace}
  window_intervals: {window}
  evaluation: {{query: policyd_training_loss, normalization: absolute}}
  selector: {{labels: {{app: train}}}}
  safety: {{max_migrations_per_cycle: 1, max_migrations_per_node: 1, cooldown_seconds: 0,
           min_job_age_seconds: 0}}
"""


def predictive_policy(*, interval: float = 4, alpha: float = 0.04) -> str:
    """Predictive at its defaults but for the interval (FlowCon's e2e interval: these jobs last
    about a minute) and the evaluation and selector of the FlowCon policy above."""
    return f"""\
apiVersion: policyd.io/v1alpha1
kind: Predictive
metadata: {{name: e2e-predictive}}
spec:
  interval_seconds: {interval}
  alpha: {alpha}
  mode: shares
  evaluation: {{query: policyd_training_loss, normalization: absolute}}
  selector: {{labels: {{app: train}}}}
"""


@dataclass
class Policyd:
    """`policyd run --config FILE` as a child process; its HTTP port answers /metrics."""

    process: subprocess.Popen[bytes]
    log: Path
    port: int

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def metrics(self) -> str:
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=5) as response:
            return str(response.read().decode())

    def category(self, container: str) -> str | None:
        """The category policyd reports for `container` (policyd_job_category), or None."""
        with contextlib.suppress(OSError):
            for line in self.metrics().splitlines():
                if line.startswith("policyd_job_category{") and f'container="{container}"' in line \
                        and line.rstrip().endswith(" 1.0"):
                    m = re.search(r'category="(\w+)"', line)
                    if m:
                        return m.group(1)
        return None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextlib.contextmanager
def policyd_run(directory: Path, policy: str, *, engines: Sequence[Engine], prometheus_url: str,
                alertmanager_url: str | None = None, grace_seconds: float = 20,
                crash_at: str | None = None) -> Iterator[Policyd]:
    """Write the settings and the policy, start `policyd run`, wait for /readyz.
    `crash_at`: `docker.test_crash_at` (the chaos test: policyd SIGKILLs itself after that
    step of a migration). A second run in the same `directory` keeps the state file."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "policy.yaml").write_text(policy)
    port = free_port()
    hosts = "".join(f"\n    {e.name}: {e.url}" for e in engines)
    alerts = (f"alertmanager:\n  url: {alertmanager_url}\n  resend_interval_seconds: 60\n"
              if alertmanager_url else "")
    settings = directory / "settings.yaml"
    settings.write_text(
        "backend: docker\nlog_level: info\npolicies: [policy.yaml]\n"
        f"prometheus:\n  url: {prometheus_url}\n  profile: docker-stats\n"
        f"  scrape_interval_seconds: {SCRAPE_SECONDS}\n  timeout_seconds: 5\n"
        f"docker:\n  hosts:{hosts}\n  grace_seconds: {grace_seconds}\n"
        f"  state_path: {directory / 'docker-state.json'}\n"
        + (f"  test_crash_at: {crash_at}\n" if crash_at else "") +
        f"{alerts}http:\n  addr: {LOOPBACK}\n  port: {port}\n")
    log = directory / "policyd.log"
    with log.open("ab") as out:  # a second run (after a crash) goes on in the same log
        process = subprocess.Popen([str(POLICYD), "run", "--config", str(settings)],
                                   stdout=out, stderr=subprocess.STDOUT, cwd=directory,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
    run = Policyd(process=process, log=log, port=port)
    try:
        def ready() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"policyd exited with {process.returncode}:\n{run.text()}")
            with contextlib.suppress(OSError), \
                    urllib.request.urlopen(f"{run.url}/readyz", timeout=2) as response:
                return bool(response.status == 200)
            return False
        wait_for(ready, timeout_seconds=60, what="policyd's /readyz")
        yield run
    finally:
        run.stop()


# --- the lab: engines + Prometheus (+ Alertmanager) ------------------------------------------


@dataclass
class Lab:
    engines: list[Engine]
    prometheus: Prometheus
    ports: dict[str, int]
    directory: Path
    events: EventLog
    shares: ShareLog
    alertmanager: Alertmanager | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ckpt(self) -> Path:
        return self.directory / "ckpt"

    def engine(self, name: str) -> Engine:
        return next(e for e in self.engines if e.name == name)

    def run(self, engine: str, spec: JobSpec) -> Container:
        return run_job(self.engine(engine), spec, self.ports[spec.name], self.ckpt)

    def query(self, promql: str) -> list[Any]:
        address = f"{self.prometheus.url}/api/v1/query?" + urllib.parse.urlencode(
            {"query": promql})
        with urllib.request.urlopen(address, timeout=5) as response:
            return list(json.load(response)["data"]["result"])

    def series(self, metric: str, container: str, seconds: int = 600
               ) -> list[tuple[float, float]]:
        result = self.query(f'{metric}{{container="{container}"}}[{seconds}s]')
        points: dict[float, float] = {}
        for r in result:
            for t, v in r["values"]:
                points[float(t)] = float(v)
        return sorted(points.items())

    def remove_all(self) -> None:
        for e in self.engines:
            e.remove_all_containers()


@contextlib.contextmanager
def lab(directory: Path, *, engines: int, jobs: Sequence[str], with_alertmanager: bool = False,
        cpus: EngineCpus = None) -> Iterator[Lab]:
    """`engines` real engines (the trainer image built on each; on the CPUs `cpus` when given,
    one list for all or one per engine, so that each reports that many cores: `Engine.cpus`),
    a Prometheus scraping one port per job name every 0.5 s, optionally an Alertmanager, and
    the event and share logs."""
    directory.mkdir(parents=True, exist_ok=True)
    ports = {name: free_port() for name in jobs}
    with contextlib.ExitStack() as stack:
        started = stack.enter_context(docker_engines(engines, prefix="pd-e2e-", cpus=cpus))
        for e in started:
            build_trainer_image(e)
        (directory / "prom").mkdir(exist_ok=True)
        prom = stack.enter_context(prometheus(
            directory / "prom", [f"{LOOPBACK}:{p}" for p in ports.values()],
            scrape_seconds=SCRAPE_SECONDS))
        am = None
        if with_alertmanager:
            (directory / "am").mkdir(exist_ok=True)
            am = stack.enter_context(alertmanager(directory / "am"))
        events = EventLog(started)
        stack.callback(events.close)
        shares = ShareLog(started)
        stack.callback(shares.close)
        yield Lab(engines=started, prometheus=prom, ports=ports, directory=directory,
                  events=events, shares=shares, alertmanager=am)



# --- scenario (a): FlowCon on one engine, three jobs sharing core 0 ---------------------------

FLOWCON_JOBS = ("fc-job-1", "fc-job-2", "fc-job-3")


@dataclass(frozen=True)
class FlowConShape:
    """Three identical jobs started at 0, t, 2t, all pinned to CPU 0 (one thread each).

    The scenario is the thesis's: job 2 arrives when job 1 has converged. So t is not a fixed
    number of seconds: in the FlowCon run it is when job 1 has done at least `stagger_steps`
    alone (its log) *and* policyd reports it CL; the NA run reuses that t, so both runs have
    the same start times. With wall-clock starts, a fast moment of this shared machine finished
    job 1 before job 3 started (n = 3 never happened: a CI failure) and a slow one left job 1
    still NL when job 2 came. Growth efficiency is gain per core used, so the step at which
    job 1 becomes CL does not depend on the machine's speed: 70,000-100,000 steps in our runs
    (its time-to-quality is ~30,000). By 2t job 1 has done at most 1.5 times its steps at t
    (alone until t, then at most half the core), under 180,000 while t comes before step
    120,000, so it is still running when job 3 arrives (the test asserts it)."""

    steps: int = 180_000
    stagger_steps: int = 60_000
    lr: float = 0.001
    smoothing: int = 500
    quality: float = 0.25
    """Time-to-quality: until the smoothed loss (the exporter's mean) is at most this."""

    def spec(self, name: str) -> JobSpec:
        return JobSpec(name, steps=self.steps, lr=self.lr, smoothing=self.smoothing,
                       cpuset="0", print_every=1000)


@dataclass
class JobResult:
    name: str
    started: float
    finished: float
    exit_code: int
    quality_at: float | None
    points: list[tuple[float, int, float]]
    log_tail: str = ""
    """The last lines of its log when it exited otherwise than 0 (why a trainer died)."""

    @property
    def jct(self) -> float:
        return self.finished - self.started

    @property
    def ttq(self) -> float | None:
        return None if self.quality_at is None else self.quality_at - self.started


@dataclass
class StaggeredRun:
    """Jobs started one after another on one engine, run to their end: what the engines
    showed (`JobResult`s from `docker inspect` and the logs, CPU weight changes)."""

    label: str
    origin: float
    jobs: dict[str, JobResult]
    shares: dict[str, list[ShareChange]]
    stagger_seconds: float
    """t: when job 2 started (job 1 alone until then), from the run's origin."""
    alone_steps_per_second: float
    """Job 1's speed alone (its log), before job 2 started."""
    step_at_stagger: int
    """Job 1's last logged step when job 2 started."""

    @property
    def makespan(self) -> float:
        return max(j.finished for j in self.jobs.values()) - min(
            j.started for j in self.jobs.values())

    @property
    def average_jct(self) -> float:
        return sum(j.jct for j in self.jobs.values()) / len(self.jobs)

    def table(self) -> list[dict[str, Any]]:
        return [{"job": j.name, "start": round(j.started - self.origin, 1),
                 "jct": round(j.jct, 1), "ttq": None if j.ttq is None else round(j.ttq, 1),
                 **exit_of(j.exit_code, j.log_tail)}
                for j in self.jobs.values()]


FAILED_LOG_LINES = 20


def exit_of(code: int, log_tail: str) -> dict[str, Any]:
    """A result table's exit columns: the code, and the log's last lines when it is not 0."""
    return {"exit": code} | ({"log_tail": log_tail} if code != 0 else {})


def finish_jobs(lab_: Lab, containers: dict[str, Container], *, origin: float,
                deadline: float, quality: float) -> tuple[dict[str, JobResult],
                                                          dict[str, list[ShareChange]]]:
    """Wait until every one of `containers` has exited (the engine's `die` event, before
    `deadline`); their results (times from `docker inspect`, time-to-quality: the first logged
    smoothed loss at most `quality`) and CPU weight changes since `origin`; then remove them."""
    results: dict[str, JobResult] = {}
    for name, c in containers.items():
        wait_for(functools.partial(lab_.events.of, name, "die", since=origin),
                 timeout_seconds=max(1.0, deadline - time.time()), what=f"{name} to finish",
                 every=0.5)
        c.reload()
        state = c.attrs["State"]
        points = log_points(c)
        reached = next((t for t, _, mean in points if mean <= quality), None)
        code = int(state["ExitCode"])
        tail = (c.logs(tail=FAILED_LOG_LINES).decode(errors="replace") if code != 0 else "")
        results[name] = JobResult(name=name, started=docker_time(state["StartedAt"]),
                                  finished=docker_time(state["FinishedAt"]),
                                  exit_code=code, quality_at=reached, points=points,
                                  log_tail=tail + (f" (OOMKilled: {state.get('OOMKilled')}, "
                                                   f"error: {state.get('Error') or 'none'})"
                                                   if code != 0 else ""))
    shares = {n: [c for c in lab_.shares.of(n) if c.time >= origin] for n in containers}
    for c in containers.values():
        c.remove(force=True)
    return results, shares


def run_flowcon_jobs(lab_: Lab, shape: FlowConShape, label: str,
                     during: Callable[[str, Container], None] | None = None, *,
                     converged: Callable[[str], bool] | None = None,
                     stagger_seconds: float | None = None) -> StaggeredRun:
    """Start job 1 on e1; job 2 at t; job 3 at 2t; wait for all to exit; their results.
    t is `stagger_seconds` when given, else when job 1 has done `shape.stagger_steps` and
    `converged(job 1)` holds (policyd says CL). `during(name, container)` runs right after
    each start (the test's assertions hook)."""
    engine = lab_.engine("e1")
    origin = time.time()
    containers: dict[str, Container] = {}
    one, two, three = FLOWCON_JOBS

    def start(name: str) -> None:
        containers[name] = run_job(engine, shape.spec(name), lab_.ports[name],
                                   lab_.ckpt / label)  # a fresh checkpoint root per run
        if during is not None:
            during(name, containers[name])

    start(one)

    def reached() -> list[tuple[float, int, float]] | None:
        points = log_points(containers[one])
        if stagger_seconds is not None:
            return points if time.time() >= origin + stagger_seconds and points else None
        if not points or points[-1][1] < shape.stagger_steps:
            return None
        return points if converged is None or converged(one) else None
    points = wait_for(reached, timeout_seconds=600, every=0.2,
                      what=f"{one} at step {shape.stagger_steps} and converged",
                      state=lambda: log_points(containers[one])[-1:])
    stagger = time.time() - origin
    alone_rate = logged_speed(points)
    start(two)
    while time.time() < origin + 2 * stagger:
        time.sleep(min(0.2, max(0.0, origin + 2 * stagger - time.time())))
    start(three)
    # all the work at job 1's lone speed, twice over, plus start-up
    timeout_seconds = 2 * len(FLOWCON_JOBS) * shape.steps / alone_rate + 60
    results, shares = finish_jobs(lab_, containers, origin=origin,
                                  deadline=origin + timeout_seconds, quality=shape.quality)
    return StaggeredRun(label=label, origin=origin, jobs=results, shares=shares,
                        stagger_seconds=stagger, alone_steps_per_second=alone_rate,
                        step_at_stagger=points[-1][1])


# --- scenario (b): SpeCon across two engines ---------------------------------------------------

SPECON_CONVERGED = "sc-converged"
SPECON_PROGRESSING = ("sc-progress-1", "sc-progress-2")
SPECON_JOBS = (SPECON_CONVERGED, *SPECON_PROGRESSING)


@dataclass(frozen=True)
class SpeConShape:
    """Host e1: one job that converges fast (full speed) and two slow, still-learning jobs
    (small learning rate, a sleep per step); host e2: nothing. SpeCon's score of e1 is then
    CC + 2 PC and e2's 0, the minimum: the converged job is the one to move, to e2.

    The margins against the policy's alpha (0.01 absolute per 3 s interval) are wide on
    purpose: the progressing jobs' loss falls by 0.03-0.08 an interval (lr 0.001; at lr 0.0005
    a CI run saw 0.014-0.019, below the then alpha 0.02, so they were CC, |PC|+|WC| <= 1 and
    nothing moved), the converged one's by under 0.007 after ~15 s, and it runs ~60 s, so
    there is time to move it (recorded runs moved it after ~20-25 s)."""

    converged: JobSpec = JobSpec(SPECON_CONVERGED, steps=60_000, lr=0.02, step_sleep=0.0005,
                                 smoothing=500, print_every=500)
    progressing: JobSpec = JobSpec("", steps=6_000, lr=0.001, step_sleep=0.01, smoothing=50,
                                   print_every=100)
    head_start_seconds: float = 8.0

    def progressing_spec(self, name: str) -> JobSpec:
        from dataclasses import replace  # noqa: PLC0415
        return replace(self.progressing, name=name)


@dataclass
class Migration:
    """What the engines, Prometheus and the logs show of the converged job's move."""

    from_node: str
    to_node: str
    converged_started: float
    old_died: float
    new_started: float
    finished: float
    checkpoint_step: int
    resume_step: int
    loss_first: float
    loss_before: float
    loss_after: float
    steps_before: float
    steps_after_max: float
    exit_code: int
    labels: dict[str, str]
    alerts: list[dict[str, Any]]
    migrations_metric: str = ""

    @property
    def pause_seconds(self) -> float:
        return self.new_started - self.old_died


def run_specon(lab_: Lab, shape: SpeConShape, policyd_: Policyd, timeout_seconds: float = 360
               ) -> Migration:
    """Start the jobs on e1, let `policyd_` (already running) move the converged one; wait
    until the moved job has finished on its new engine; the figures."""
    assert lab_.alertmanager is not None
    name = SPECON_CONVERGED
    origin = time.time()
    old = lab_.run("e1", shape.converged)
    old_log: list[str] = []

    def follow() -> None:  # the old container is removed after the move: keep its log
        with contextlib.suppress(Exception):
            for chunk in old.logs(stream=True, follow=True):
                old_log.append(chunk.decode(errors="replace"))
    threading.Thread(target=follow, daemon=True).start()
    time.sleep(shape.head_start_seconds)  # the stagger itself (a scenario input, not a wait)
    for p in SPECON_PROGRESSING:
        lab_.run("e1", shape.progressing_spec(p))
    deadline = origin + timeout_seconds

    def moved() -> Event | None:
        return next((e for e in lab_.events.of(name, "start") if e.node == "e2"), None)
    def categories() -> dict[str, object]:
        return {n: (policyd_.category(n), bool(lab_.events.of(n, "die"))) for n in SPECON_JOBS}
    started_new: Event = wait_for(moved, timeout_seconds=deadline - time.time(),
                                  what=f"{name} to be started on e2 by policyd", every=0.2,
                                  state=categories)
    new = lab_.engine("e2").client().containers.get(name)
    migrations = wait_for(lambda: "\n".join(
        line for line in policyd_.metrics().splitlines()
        if line.startswith("policyd_migrations_total{") and 'to="e2"' in line),
        timeout_seconds=30, what="policyd_migrations_total to count the move")
    alerts = wait_for(lambda: lab_.alertmanager.alerts(  # type: ignore[union-attr]
        filter=urllib.parse.quote('alertname="PolicydMigration"')), timeout_seconds=30,
        what="the PolicydMigration alert in Alertmanager")
    wait_for(lambda: [e for e in lab_.events.of(name, "die") if e.node == "e2"],
             timeout_seconds=max(1.0, deadline - time.time()),
             what=f"{name} to finish on e2", every=0.5)
    new.reload()
    died_old = next(e for e in lab_.events.of(name, "die") if e.node == "e1")
    first_start = next(e for e in lab_.events.of(name, "start") if e.node == "e1")
    text = new.logs().decode(errors="replace")
    resume = re.search(r"resumed: step=(\d+)", text)
    checkpoint = re.search(r"checkpoint: step=(\d+)", "".join(old_log))
    loss = lab_.series("policyd_training_loss", name)
    steps = lab_.series("policyd_training_steps_total", name)
    before = [v for t, v in loss if t <= died_old.time]
    after = [v for t, v in loss if t >= started_new.time]
    steps_before = [v for t, v in steps if t <= died_old.time]
    return Migration(
        from_node="e1", to_node="e2", converged_started=first_start.time,
        old_died=died_old.time, new_started=started_new.time,
        finished=docker_time(new.attrs["State"]["FinishedAt"]),
        checkpoint_step=int(checkpoint.group(1)) if checkpoint else -1,
        resume_step=int(resume.group(1)) if resume else -1,
        loss_first=loss[0][1] if loss else float("nan"),
        loss_before=before[-1] if before else float("nan"),
        loss_after=after[0] if after else float("nan"),
        steps_before=steps_before[-1] if steps_before else -1.0,
        steps_after_max=max((v for t, v in steps if t >= started_new.time), default=-1.0),
        exit_code=int(new.attrs["State"]["ExitCode"]), labels=dict(new.labels),
        alerts=list(alerts), migrations_metric=migrations)


# --- (c) the listener: container start -> first allocation -------------------------------------


@dataclass
class Latency:
    container: str
    started: float
    own_update: float
    neighbour_update: float

    @property
    def own_seconds(self) -> float:
        return self.own_update - self.started

    @property
    def neighbour_seconds(self) -> float:
        return self.neighbour_update - self.started


def measure_listener(lab_: Lab, policyd_: Policyd, rounds: int = 3) -> list[Latency]:
    """A converged job `lat-base` runs on e1; then, `rounds` times, a new job starts parked at
    a low weight (256 shares): FlowCon's Algorithm 2 makes it NL (limit 1 -> 1024 shares) and
    puts the converged one at the floor (256), both by `docker update`. Timed from the engine's
    `start` event to the first `update` event of each container."""
    base = JobSpec("lat-base", steps=2_000_000, lr=0.02, smoothing=500, cpuset="0",
                   print_every=5000)
    lab_.run("e1", base)
    wait_for(lambda: policyd_.category("lat-base") == "CL", timeout_seconds=90,
             what="lat-base to be CL in policyd's metrics", every=0.5)
    api = lab_.engine("e1").client().api

    def shares(name: str) -> int:
        return int(api.inspect_container(name)["HostConfig"]["CpuShares"] or 1024)

    wait_for(lambda: shares("lat-base") == 1024, timeout_seconds=30, what="lat-base at 1024")

    out: list[Latency] = []
    for k in range(1, rounds + 1):
        name = f"lat-new-{k}"
        wait_for(lambda: policyd_.category("lat-base") == "CL", timeout_seconds=90,
                 what="lat-base to be CL again", every=0.3)
        lab_.run("e1", JobSpec(name, steps=2_000_000, lr=0.02, cpuset="0", cpu_shares=256,
                               print_every=5000))
        start = wait_for(functools.partial(lab_.events.of, name, "start"), timeout_seconds=30,
                         what=f"{name} to start")[0]
        own = wait_for(functools.partial(lab_.events.of, name, "update"), timeout_seconds=30,
                       what=f"policyd's first update of {name}")[0]
        # By the engine's own clock: an update of lat-base made before the start (putting it
        # back to 1024 after the previous round) may reach the event log after the start.
        neighbour = wait_for(functools.partial(lab_.events.of, "lat-base", "update",
                                               since=start.time),
                             timeout_seconds=30, what="policyd's update of lat-base")[0]
        out.append(Latency(name, start.time, own.time, neighbour.time))
        assert shares(name) == 1024 and shares("lat-base") == 256, (shares(name),
                                                                    shares("lat-base"))
        lab_.engine("e1").client().containers.get(name).remove(force=True)
        wait_for(lambda: shares("lat-base") == 1024, timeout_seconds=30,
                 what="lat-base back at 1024 once the new job is gone")
    return out


def listener_latencies(directory: Path, rounds: int) -> list[Latency]:
    """A one-engine lab with `policyd run` (FlowCon) and `measure_listener` over `rounds`."""
    jobs = ("lat-base", *(f"lat-new-{k}" for k in range(1, rounds + 1)))
    with lab(directory, engines=1, jobs=jobs) as world, \
            policyd_run(directory / "policyd", flowcon_policy(), engines=world.engines,
                        prometheus_url=world.prometheus.url) as policyd:
        return measure_listener(world, policyd, rounds=rounds)


def all_converged_at_full_weight(lab_: Lab, policyd_: Policyd, names: Sequence[str]) -> bool:
    """Every running job of `names` is CL in policyd's metrics and at 1024 shares (inspect)."""
    api = lab_.engine("e1").client().api
    running = []
    for n in names:
        with contextlib.suppress(docker.errors.NotFound):
            attrs = api.inspect_container(n)
            if attrs["State"]["Running"]:
                running.append((n, int(attrs["HostConfig"]["CpuShares"] or 1024)))
    return len(running) >= 2 and all(
        shares == 1024 and policyd_.category(n) == "CL" for n, shares in running)
