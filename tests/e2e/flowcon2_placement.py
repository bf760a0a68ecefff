"""Scenario (g): FlowCon2 on two real engines of unequal cores: a converged job moves off the
crowded larger engine, and a new job, submitted held, starts on the engine where it grows
fastest. Every figure from the engines (events, `docker inspect`, `/proc`) and the trainers'
logs; policyd's own word (its log) only for why it acted.

The engines. This machine has two cores. `lab(cpus=("0", "0-1"))` starts e1 under `taskset
-c 0` and e2 under `taskset -c 0-1`: `docker info` reports NCPU 1 and 2, which is what
policyd reads as each worker's cores. The containers run where their engine runs: Debian's
runc (1.1.5, cgroup v1) leaves the CPU affinity a container's processes inherit from the
engine's containerd as it is (the container's cpuset cgroup says 0-1, its processes'
`Cpus_allowed_list` says 0 on e1); the proof reads every job's `Cpus_allowed_list` from
`/proc/<pid>/status` while it runs and shows it, so a runc that reset it would be seen. No
job is pinned by the harness (no `--cpuset-cpus`): a copy policyd makes on another engine
(an admission's or a move's) carries no CPU settings, and it must be confined by its engine
alone, as the originals are. On two cores the two engines cannot be disjoint: e1's CPU 0 is
also one of e2's, so a job on e1 shares CPU 0 with what the kernel puts there from e2.
policyd is not told (it sees 1 and 2 cores); the jobs' speeds in the logs show what they got.

The shape. On e2 (2 cores) three single-threaded jobs start together: `converged`, a job that
converges within seconds (lr 0.02), and two that keep learning for most of their run
(`grow-1`, `grow-2`, lr 0.001); e1 (1 core) is empty. Three jobs on two cores: once FlowCon's
Algorithm 1 puts the converged job at the floor 1 / (beta n), it gets a sixth of the weight
there while e1 would give it a whole core, and the growing jobs get its share: the predicted
gain beats the move's cost, and FlowCon2 moves it (checkpoint, stop, resume on e1: the
existing protocol, `policyd.actuators.docker.migration`). Once the engines show it running on
e1, a new job (`new`, lr 0.001) is created held on e1 (`docker create`, policyd's label; a
Docker user's submission). FlowCon2 starts a held job where it gets the most effective cores
at an equal share beside the jobs already there, converged ones counted in full: e1 offers
1/2 core (beside the converged job), e2 2/3 (beside the two growing ones). So it starts on
e2: policyd copies it there and removes the held original (`admission.py`).

What this does not show: FlowCon2 decides its moves before its admissions, from the jobs that
run (docs/design.md, "FlowCon2"); a held job does not make a converged job move. The move
here comes first, because the converged job is squeezed on a crowded engine, and the new job
is then placed beside the growing jobs rather than the converged one. Submitted before the
move, with e1 empty, the new job would start on e1 (a whole core) and the converged job would
stay (e1 would then not be empty). `admission_min_cores` is 0.5 in this proof's policy: at the
default 1 neither engine offers a whole effective core, and the job would wait for one to end.

Without policyd (`run_placement(..., policyd_=None)`, the NA run), the same jobs start at the
same times where they are submitted: the three on e2, the new one on e1 (started by the
harness), and nothing moves.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import docker
import docker.errors
from docker.models.containers import Container

from tests.e2e.harness import (
    Event,
    JobSpec,
    Lab,
    Policyd,
    policyd_run,
    round_prefix,
    run_job,
    wait_for,
)

ENGINE_CPUS = ("0", "0-1")
"""e1 on CPU 0 (one core), e2 on CPUs 0 and 1 (two): `lab(cpus=ENGINE_CPUS)`."""
SMALL, LARGE = "e1", "e2"
ROLES = ("converged", "grow-1", "grow-2", "new")
RUNS = {"fc2": "FlowCon2", "na": "NA"}
"""Each run's job-name prefix and its label: fresh names per run and round."""


def names(prefix: str) -> dict[str, str]:
    """Role -> container name in a run with that prefix."""
    return {role: f"{prefix}-{role}" for role in ROLES}


def all_job_names(rounds: int = 1) -> list[str]:
    """Every job name of `rounds` rounds of both runs (the lab's scrape targets)."""
    return [n for r in range(rounds) for run in RUNS
            for n in names(round_prefix(run, r)).values()]


def flowcon2_policy(*, interval: float = 4, alpha: float = 0.04, beta: float = 2,
                    min_cores: float = 0.5, cost: float = 10, margin: float = 1,
                    grace: float = 20) -> str:
    """FlowCon2 at FlowCon's e2e settings (interval 4 s, alpha 0.04 absolute, beta 2, shares)
    with moves costed at `cost` s (a move here pauses a job for a few seconds: its checkpoint,
    a new container, torch's import) and held jobs started on half an effective core (module
    docstring)."""
    return f"""\
apiVersion: policyd.io/v1alpha1
kind: FlowCon2
metadata: {{name: e2e-flowcon2}}
spec:
  alpha: {alpha}
  interval_seconds: {interval}
  beta: {beta}
  mode: shares
  window_intervals: 10
  admission_min_cores: {min_cores}
  migrate: true
  migration_cost_seconds: {cost}
  migration_margin: {margin}
  migration_grace_seconds: {grace}
  evaluation: {{query: policyd_training_loss, normalization: absolute}}
  selector: {{labels: {{app: train}}}}
  safety: {{max_migrations_per_cycle: 1, max_migrations_per_node: 1, cooldown_seconds: 0,
           min_job_age_seconds: 10}}
"""


@dataclass(frozen=True)
class PlacementShape:
    """The jobs (module docstring): single-threaded, CPU-bound (no sleep), no pinning."""

    converged_steps: int = 80_000
    grow_steps: int = 72_000
    new_steps: int = 48_000
    """0.8 of the first recording's 100,000, 90,000 and 60,000 (benchmarks/README.md): a round
    of FlowCon2 and NA took 4.2-5 min with those."""
    converged_lr: float = 0.02
    grow_lr: float = 0.001
    smoothing: int = 500
    move_timeout_seconds: float = 120.0
    """How long the converged job may take to be moved (the FlowCon2 run)."""

    def spec(self, role: str, name: str) -> JobSpec:
        steps = {"converged": self.converged_steps, "new": self.new_steps}.get(
            role, self.grow_steps)
        lr = self.converged_lr if role == "converged" else self.grow_lr
        return JobSpec(name, steps=steps, lr=lr, smoothing=self.smoothing, print_every=1000)

    def scaled(self, factor: float) -> PlacementShape:
        return replace(self, converged_steps=round(self.converged_steps * factor),
                       grow_steps=round(self.grow_steps * factor),
                       new_steps=round(self.new_steps * factor))


class AffinityLog:
    """Every running managed container's engine, `Cpus_allowed_list` (`/proc/<pid>/status`
    of its init, which its trainer inherits) and CPU settings (`HostConfig`: CpuShares,
    CpusetCpus, NanoCpus), polled; each distinct reading per (name, engine) kept."""

    def __init__(self, lab_: Lab, every: float = 0.5) -> None:
        self.seen: dict[tuple[str, str], set[tuple[str, int, str, int]]] = {}
        self._stop = threading.Event()
        self._apis = [(e.name, docker.APIClient(base_url=e.url, version="auto", timeout=30))
                      for e in lab_.engines]
        self._every = every
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for node, api in self._apis:
                with contextlib.suppress(docker.errors.DockerException, OSError):
                    for c in api.containers(filters={"label": "policyd.io/managed=true"}):
                        with contextlib.suppress(docker.errors.DockerException, OSError,
                                                 KeyError, ValueError):
                            attrs = api.inspect_container(c["Id"])
                            pid = int(attrs["State"]["Pid"])
                            status = Path(f"/proc/{pid}/status").read_text()
                            allowed = re.search(r"Cpus_allowed_list:\s*(\S+)", status)
                            host = attrs["HostConfig"]
                            reading = (allowed.group(1) if allowed else "?",
                                       int(host.get("CpuShares") or 0),
                                       str(host.get("CpusetCpus") or ""),
                                       int(host.get("NanoCpus") or 0))
                            key = (str(attrs["Name"]).lstrip("/"), node)
                            self.seen.setdefault(key, set()).add(reading)
            self._stop.wait(self._every)

    def allowed(self, name: str, node: str) -> list[str]:
        """The distinct CPU lists `name`'s processes were allowed on `node`."""
        return sorted({r[0] for r in self.seen.get((name, node), set())})

    def settings(self, name: str, node: str) -> list[dict[str, object]]:
        return [{"cpus_allowed": a, "cpu_shares": s, "cpuset_cpus": c, "nano_cpus": n}
                for a, s, c, n in sorted(self.seen.get((name, node), set()))]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for _, api in self._apis:
            api.close()


@dataclass
class PlacedJob:
    """One job as the engines saw it: each start and exit on which engine (events), its
    steps (the logs of every container it ran as), the CPUs it ran on."""

    name: str
    role: str
    created_on: str
    starts: list[tuple[float, str]]
    """(time, engine) of every `start` event, in order."""
    dies: list[tuple[float, str, int]]
    """(time, engine, exit code) of every `die` event, in order."""
    steps: int
    checkpoint_step: int | None = None
    """The step its checkpoint on SIGTERM was written at (a move), from the old log."""
    resume_step: int | None = None
    """The step it resumed from (`resumed: step=N`), from the log of its copy."""
    first_step_after_resume: int | None = None
    last_step: int | None = None
    """The last step it logged (`done: step=N`)."""
    cpus_allowed: dict[str, list[str]] = field(default_factory=dict)
    """Engine -> the CPU lists its processes were allowed there."""
    cpu_settings: dict[str, list[dict[str, object]]] = field(default_factory=dict)

    @property
    def cpusets(self) -> dict[str, list[str]]:
        """Engine -> the distinct `HostConfig.CpusetCpus` it had there ("": none set)."""
        return {node: sorted({str(r["cpuset_cpus"]) for r in readings})
                for node, readings in self.cpu_settings.items()}

    @property
    def engines(self) -> list[str]:
        return [node for _, node in self.starts]

    @property
    def finished(self) -> float:
        return self.dies[-1][0]

    @property
    def jct(self) -> float:
        return self.finished - self.starts[0][0]

    @property
    def exit_codes(self) -> list[int]:
        return [code for _, _, code in self.dies]


@dataclass
class PlacementRun:
    label: str
    origin: float
    submitted_at: float
    """When the new job was submitted (held, or started by the harness in NA), from origin."""
    jobs: dict[str, PlacedJob]
    actions: list[str]
    """policyd's log lines of the actions it applied, with their reasons (none in NA)."""
    engine_cpus: dict[str, int]
    """Each engine's NCPU (`docker info`)."""
    stopped: frozenset[str] = frozenset()
    """Jobs the harness stopped before their last step (`run_placement(cut_short=True)`)."""

    def role(self, role: str) -> PlacedJob:
        return next(j for j in self.jobs.values() if j.role == role)

    @property
    def average_jct(self) -> float:
        return sum(j.jct for j in self.jobs.values()) / len(self.jobs)

    @property
    def makespan(self) -> float:
        return max(j.finished for j in self.jobs.values()) - self.origin

    def table(self) -> list[dict[str, object]]:
        return [{"job": j.name, "created_on": j.created_on, "ran_on": j.engines,
                 "start": [round(t - self.origin, 1) for t, _ in j.starts],
                 "died": [round(t - self.origin, 1) for t, _, _ in j.dies],
                 "end": round(j.finished - self.origin, 1), "jct": round(j.jct, 1),
                 "exit_codes": j.exit_codes, "steps": j.steps,
                 "checkpoint_step": j.checkpoint_step, "resume_step": j.resume_step,
                 "first_step_after_resume": j.first_step_after_resume,
                 "last_step": j.last_step, "cpus_allowed": j.cpus_allowed,
                 "cpuset_cpus": j.cpusets}
                for j in self.jobs.values()]


class LogKeeper:
    """Every container's log, followed from its start on each engine (a moved job's old
    container is removed by policyd: its log must be read while it exists)."""

    def __init__(self) -> None:
        self.text: dict[tuple[str, str], list[str]] = {}
        self._lock = threading.Lock()

    def follow(self, node: str, container: Container) -> None:
        key = (str(container.name), node)

        def read() -> None:
            with contextlib.suppress(Exception):
                for chunk in container.logs(stream=True, follow=True):
                    with self._lock:
                        self.text.setdefault(key, []).append(chunk.decode(errors="replace"))
        threading.Thread(target=read, daemon=True).start()

    def of(self, name: str, node: str) -> str:
        with self._lock:
            return "".join(self.text.get((name, node), []))


def _int(pattern: str, text: str, *, last: bool = False) -> int | None:
    found = re.findall(pattern, text)
    if not found:
        return None
    return int(found[-1] if last else found[0])


def _cut_short(lab_: Lab, job_names: dict[str, str], policyd_: Policyd) -> set[str]:
    """Stop policyd (an action under way ends first), then every job still running, as a
    user's `docker stop` would (SIGTERM: the trainer checkpoints and exits 0); the names
    stopped."""
    policyd_.stop()
    stopped = set()
    for e in lab_.engines:
        for name in job_names.values():
            with contextlib.suppress(docker.errors.NotFound):
                c = e.client().containers.get(name)
                if c.status == "running":
                    c.stop(timeout=30)
                    stopped.add(name)
    return stopped


def _proof_seen(lab_: Lab, job_names: dict[str, str]) -> bool:
    """The converged job ended on e1, where it was moved, and the new job started on e2."""
    converged = lab_.events.of(job_names["converged"], "start")
    return (bool(converged) and converged[-1].node == SMALL
            and _finished(lab_, job_names["converged"])
            and any(e.node == LARGE for e in lab_.events.of(job_names["new"], "start")))


def run_placement(lab_: Lab, shape: PlacementShape, prefix_: str, label: str,
                  policyd_: Policyd | None, *, submit_after: float | None = None,
                  timeout_seconds: float = 400, cut_short: bool = False) -> PlacementRun:
    """The three jobs on e2; with `policyd_`, wait until the engines show the converged job
    running on e1 (moved), then submit the new job held on e1; without (NA), start the new
    job on e1 `submit_after` seconds after the origin. Wait until every job has exited on the
    engine it ended on; what the engines showed. `cut_short` (with `policyd_`): once the
    converged job has ended on e1 and the new job has started on e2, stop policyd and the
    jobs still running (`_cut_short`) rather than wait for their last steps."""
    job_names = names(prefix_)
    directory = lab_.ckpt / label
    origin = time.time()
    deadline = origin + timeout_seconds
    logs = LogKeeper()
    affinity = AffinityLog(lab_)
    large, small = lab_.engine(LARGE), lab_.engine(SMALL)
    try:
        for role in ("converged", "grow-1", "grow-2"):
            name = job_names[role]
            logs.follow(LARGE, run_job(large, shape.spec(role, name), lab_.ports[name],
                                       directory))
        converged, new = job_names["converged"], job_names["new"]
        if policyd_ is not None:
            def moved() -> Event | None:
                return next((e for e in lab_.events.of(converged, "start") if e.node == SMALL),
                            None)
            wait_for(moved, timeout_seconds=shape.move_timeout_seconds, every=0.2,
                     what=f"{converged} to be moved to {SMALL} by policyd",
                     state=lambda: {n: policyd_.category(n) for n in job_names.values()})
            submitted = time.time()
            run_job(small, shape.spec("new", new), lab_.ports[new], directory, held=True)
        else:
            assert submit_after is not None, "NA: give the FlowCon2 run's submission time"
            while time.time() < origin + submit_after:
                time.sleep(0.1)
            submitted = time.time()
            run_job(small, shape.spec("new", new), lab_.ports[new], directory)
        followed: set[tuple[str, str]] = set()
        cut: list[set[str]] = []  # the jobs `_cut_short` stopped, once it has

        def all_done() -> bool:
            # follow every new container's log as soon as it starts, wherever it runs
            for e in lab_.events.events[:]:
                key = (e.name, e.node)
                if e.action == "start" and e.name in job_names.values() and key not in followed:
                    followed.add(key)
                    with contextlib.suppress(docker.errors.NotFound):
                        logs.follow(e.node, lab_.engine(e.node).client().containers.get(e.name))
            if cut_short and policyd_ is not None and not cut and _proof_seen(lab_, job_names):
                cut.append(_cut_short(lab_, job_names, policyd_))
            return all(_finished(lab_, n) for n in job_names.values())
        wait_for(all_done, timeout_seconds=max(1.0, deadline - time.time()), every=0.2,
                 what=f"every job of {label} to finish",
                 state=lambda: {n: [(e.action, e.node) for e in lab_.events.of(n)
                                    if e.action in ("create", "start", "die")]
                                for n in job_names.values()})
        time.sleep(1.0)  # the last log lines of the followers
    finally:
        affinity.close()
    ncpu = {e.name: int(e.client().info()["NCPU"]) for e in lab_.engines}
    jobs = {}
    for role, name in job_names.items():
        starts = [(e.time, e.node) for e in lab_.events.of(name, "start", since=origin)]
        dies = [(e.time, e.node, int(e.attributes.get("exitCode", "-1")))
                for e in lab_.events.of(name, "die", since=origin)]
        creates = lab_.events.of(name, "create", since=origin)
        job = PlacedJob(name=name, role=role, created_on=creates[0].node if creates else "?",
                        starts=starts, dies=dies, steps=shape.spec(role, name).steps)
        texts = [logs.of(name, node) for _, node in starts]
        if len(starts) > 1:
            job.checkpoint_step = _int(r"checkpoint: step=(\d+)", texts[0], last=True)
            job.resume_step = _int(r"resumed: step=(\d+)", texts[-1])
            after = re.findall(r"step=(\d+) loss=", texts[-1])
            job.first_step_after_resume = int(after[0]) if after else None
        job.last_step = _int(r"done: step=(\d+)", texts[-1] if texts else "", last=True)
        for _, node in starts:
            job.cpus_allowed[node] = affinity.allowed(name, node)
            job.cpu_settings[node] = affinity.settings(name, node)
        jobs[name] = job
    actions = [] if policyd_ is None else [
        line.split(" policy ", 1)[-1] for line in policyd_.text().splitlines()
        if "policy e2e-flowcon2: " in line and "actions (" not in line
        and any(n in line for n in job_names.values())]
    for e in lab_.engines:
        for name in job_names.values():
            with contextlib.suppress(docker.errors.NotFound):
                e.client().containers.get(name).remove(force=True)
    return PlacementRun(label=label, origin=origin, submitted_at=submitted - origin, jobs=jobs,
                        actions=actions, engine_cpus=ncpu,
                        stopped=frozenset(cut[0] if cut else ()))


def _finished(lab_: Lab, name: str) -> bool:
    """`name` has exited for good: its latest start has a later `die` on the same engine and
    no managed container of that name runs or waits held on any engine."""
    starts = lab_.events.of(name, "start")
    if not starts:
        return False
    last = starts[-1]
    if not any(e.node == last.node and e.time >= last.time
               for e in lab_.events.of(name, "die")):
        return False
    for e in lab_.engines:
        with contextlib.suppress(docker.errors.NotFound):
            c = e.client().containers.get(name)
            if c.status in ("running", "created", "restarting"):
                return False
    return True


def compare(lab_: Lab, shape: PlacementShape, directory: Path, *, round_: int = 0,
            baseline: bool = True, policy: str | None = None, cut_short: bool = False
            ) -> dict[str, PlacementRun]:
    """One run under `policyd run` with FlowCon2 (`policy`, `flowcon2_policy()` by default;
    `cut_short`: `run_placement`'s), then (`baseline`) one NA run with the new job submitted at
    the FlowCon2 run's time, started where it was submitted."""
    assert not (cut_short and baseline), "a run cut short has no JCTs to compare"
    name = round_prefix("fc2", round_)
    with policyd_run(directory / f"policyd-{name}", policy or flowcon2_policy(),
                     engines=lab_.engines,
                     prometheus_url=lab_.prometheus.url) as policyd:
        runs = {"FlowCon2": run_placement(lab_, shape, name, f"FlowCon2-{round_}", policyd,
                                          cut_short=cut_short)}
    if baseline:
        runs["NA"] = run_placement(lab_, shape, round_prefix("na", round_), f"NA-{round_}",
                                   None, submit_after=runs["FlowCon2"].submitted_at)
    return runs


def checks(run: PlacementRun) -> list[str]:
    """What the FlowCon2 run must show, each failure as a sentence (none: it did): the
    converged job moved from e2 to e1; the new job, held on e1, started on e2; every job that
    moved (the converged one, and any other once FlowCon2 counts it converged: a job moves
    at most once) resumed from the step of its checkpoint and went on; every job exited 0 at
    its last step (one the harness stopped, `PlacementRun.stopped`: exited 0, the trainer's
    answer to SIGTERM), on the CPUs of its engine, unpinned; the engines report 1 and 2
    cores."""
    problems = []
    conv, new = run.role("converged"), run.role("new")
    if conv.engines != [LARGE, SMALL]:
        problems.append(f"{conv.name} ran on {conv.engines}, not {LARGE} then {SMALL}")
    if new.created_on != SMALL or new.engines[:1] != [LARGE]:
        problems.append(f"{new.name} created on {new.created_on}, ran on {new.engines}, not "
                        f"held on {SMALL} and started on {LARGE}")
    for j in run.jobs.values():
        if len(j.starts) > 2:
            problems.append(f"{j.name} started {len(j.starts)} times: moved more than once")
        if len(j.starts) > 1 and (j.checkpoint_step is None
                                  or j.resume_step != j.checkpoint_step):
            problems.append(f"{j.name}: checkpoint step {j.checkpoint_step}, resumed from "
                            f"{j.resume_step}")
        if None not in (j.first_step_after_resume, j.resume_step) \
                and j.first_step_after_resume <= j.resume_step:  # type: ignore[operator]
            problems.append(f"{j.name} logged step {j.first_step_after_resume} after "
                            f"resuming at {j.resume_step}")
        if j.exit_codes[-1:] != [0] or any(code != 0 for code in j.exit_codes):
            problems.append(f"{j.name} exited with {j.exit_codes}")
        if j.last_step != j.steps and j.name not in run.stopped:
            problems.append(f"{j.name} ended at step {j.last_step}, not {j.steps}")
        if any(sets not in ([], [""]) for sets in j.cpusets.values()):
            problems.append(f"{j.name} was pinned by the engine's cpuset: {j.cpusets}")
        for node, allowed in j.cpus_allowed.items():
            want = ENGINE_CPUS[0] if node == SMALL else ENGINE_CPUS[1]
            if allowed and allowed != [want]:
                problems.append(f"{j.name} on {node} allowed CPUs {allowed}, not {want}")
    if run.engine_cpus != {SMALL: 1, LARGE: 2}:
        problems.append(f"engines report NCPU {run.engine_cpus}, not e1 1, e2 2")
    return problems


def summary(runs: Sequence[dict[str, PlacementRun]]) -> dict[str, object]:
    """Per round: whether FlowCon2 passed every check; average JCT and makespan per run."""
    return {"flowcon2_checks_passed": sum(not checks(r["FlowCon2"]) for r in runs),
            "rounds": len(runs),
            "average_jct": {label: [round(r[label].average_jct, 1) for r in runs if label in r]
                            for label in RUNS.values()},
            "makespan": {label: [round(r[label].makespan, 1) for r in runs if label in r]
                         for label in RUNS.values()}}

