"""The simulated cluster: a discrete-event world in virtual time, a Source and an Actuator.

Theory of operation. Virtual time runs in seconds from 0; `snapshot().time` is
`EPOCH_SECONDS` + virtual time. Between two events every job's cores, hence its speed, are
constant, so the world jumps straight to the next event and advances every job exactly
(`SimJob.run_for`). The events, and the order in which those falling on the same instant are
handled:

1. a job completes its last iteration (its container disappears);
2. a migration completes (the job's new container starts on the target node);
3. a job is submitted (placed: `JobSpec.node`, else the default scheduler's choice). A job
   handed over held (`JobSpec.held`) waits instead, when a live policy that admits runs
   (`Kind.acts_on` holds "admission"), until that policy's `Admit`; under the deadline oracle
   the oracle admits it (`policyd.sim.deadline_oracle`); otherwise it starts at once, as the
   baseline has it. Then every node's CPU is shared again (`policyd.sim.cpu`, or an oracle's
   allocation: SRPT, EDF for deadlines, or the most QoE targets met);
4. a scrape, every `scenario.scrape_seconds` from 0: each running job's loss, its steps done
   and its cores averaged over the scrape interval are appended to its series
   (`policyd.sim.source`); a job shows its total steps when its spec says it reports them;
5. policy ticks, in ownership order (highest priority first, then by name): each policy on its
   `policyd.engine.schedule.Schedule` (first at the first submission + its base interval, then
   every `decision.next_interval`), and at once when a container appeared or disappeared at
   this instant and the policy's kind wakes on that (FlowCon's Algorithm 2 listener, which
   also resets the interval to the base one): the rule the daemon follows. A tick is
   `policyd.tick.tick(source=world, policy, actuator=world, peers=every policy)`, which also
   routes a dry-run decision away from the world.

The world contains no policy logic: it shares CPU, runs, pauses and moves jobs, and measures.
Placement of new jobs (`placement`) imitates the Kubernetes default scheduler (DS): "kube" is
its default scoring (`policyd.sim.kube_scheduler`: the non-zero default requests,
least-allocated and balanced-allocation scores, image locality, a seeded random choice among
equal scores); "fewest" the earlier rule, the node with the fewest jobs (running, or being
restored there), ties by the fewest cores in use, then by name. A worker's cores train at its
speed (`NodeSpec.speed`): a job's iterations per second on it are its speed times its rate on
as many average cores.

As an actuator it carries out `SetCpu`, `Migrate`, `MarkMigrated`, `Stop`
(`policyd.sim.actuator`) and `Admit` (a held job starts on the node named); a decision marked
dry-run is not applied. It also keeps the score of the jobs' declared targets
(`policyd.sim.targets`): each scrape interval's rate against a QoE target, and every job's
CPU-seconds.

It also measures what deadlines need: each running job's allocation (the cores it is entitled
to: in quota mode its cap; in shares mode its weighted share of what the quota jobs of its node
leave; under an oracle what the oracle gives it) and how much of it the job used.
"""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Literal

import numpy as np

from policyd.engine.ownership import precedence
from policyd.engine.registry import KINDS
from policyd.engine.schedule import Schedule, base_interval_seconds, wakes_on
from policyd.engine.spec import PolicyDocument
from policyd.model import Action, Admit, Decision, Migrate, Node, Snapshot, Stop
from policyd.model.events import EventKind
from policyd.sim import kube_scheduler
from policyd.sim.actuator import carry_out
from policyd.sim.cpu import share_node, weight_and_cap
from policyd.sim.deadline_oracle import edf_admit, edf_share
from policyd.sim.job import SimJob, quality_iteration
from policyd.sim.oracle import srpt_share
from policyd.sim.qoe_oracle import OracleJob, deadline_need, qoe_share
from policyd.sim.source import EPOCH_SECONDS, Ring, history_seconds, ring_capacity
from policyd.sim.targets import declared, score
from policyd.sim.types import JobResult, RunResult, Sample, Scenario, Strategy
from policyd.tick import Outcome, tick

Allocation = Literal["fair", "srpt", "edf", "qoe"]
Placement = Literal["kube", "fewest"]


class World:
    """One scenario being played: call `run()` (or `run_until`), then `result()`."""

    def __init__(self, scenario: Scenario, *, policies: Sequence[PolicyDocument] = (),
                 allocation: Allocation = "fair", record_timeline: bool = False,
                 forecast_decisions: bool = False, placement: Placement = "kube",
                 ties_seed: int | None = None) -> None:
        _check(scenario)
        names = [p.name for p in policies]
        if len(set(names)) != len(names):
            raise ValueError(f"policy names must be unique in one world: {names}")
        self.scenario = scenario
        self.policies: tuple[PolicyDocument, ...] = tuple(sorted(policies, key=precedence))
        self.now = 0.0
        self.migrations = 0
        self.outcomes: list[tuple[float, Outcome]] = []  # (virtual time, what the tick did)
        self.tick_seconds: list[float] = []  # wall seconds each tick of `outcomes` took
        self.timeline: list[Sample] = []
        self._allocation: Allocation = allocation
        self._record = record_timeline
        # A measured run reads only actions; the forecasts beside a decision cost ~7 ms a tick
        # (kinds that act on forecasts make their own). The simulated daemon asks for them.
        self._forecasts = forecast_decisions
        self._capacity = {n.name: n.cores for n in scenario.nodes}
        self._speed = {n.name: n.core_speed for n in scenario.nodes}
        self._placement: Placement = placement
        # The default scheduler's ties: from the scenario's seed, or `ties_seed` to replay the
        # same jobs under other placement luck (benchmarks/placement_luck.py).
        self._rng = np.random.default_rng(scenario.seed if ties_seed is None else ties_seed)
        self._images: dict[str, set[str]] = {n.name: set() for n in scenario.nodes}
        capacity = ring_capacity(self.policies, scenario.scrape_seconds)
        self._jobs = [
            SimJob(spec=j, quality_iteration=quality_iteration(j.profile.reported),
                   evaluation=Ring(capacity), cpu=Ring(capacity), steps=Ring(capacity))
            for j in scenario.jobs
        ]
        self._targets = {j.id: declared(j.spec) for j in self._jobs}
        self._pending = sorted(self._jobs, key=lambda j: j.spec.submit_seconds)  # stable
        self._scrapes = 0  # index of the next scrape
        first = self._pending[0].spec.submit_seconds if self._pending else 0.0
        self._schedules = {p.name: Schedule.first(p, at=first + base_interval_seconds(p))
                           for p in self.policies}
        self._events: set[EventKind] = set()  # started/stopped/submitted at this instant
        self._held: list[SimJob] = []  # submitted, waiting for admission (in arrival order)
        # The fair share of a node is a function of its running jobs' demands, limits and
        # modes alone: `_share` skips a node whose jobs, their cores and their rates are as it
        # left them (what it would write is what they hold).
        self._fair_shares: dict[str, tuple[tuple[object, ...], ...]] = {}
        self._admits = allocation == "edf" or any(
            not p.spec.dry_run and "admission" in KINDS.of(p).acts_on_of(p)
            for p in self.policies)

    # --- the clock ---------------------------------------------------------------------------

    @property
    def finished(self) -> bool:
        return all(j.phase == "done" for j in self._jobs)

    def run(self, *, max_seconds: float = 1e7) -> None:
        """Play until every job is done."""
        self.run_until(max_seconds)
        if not self.finished:
            raise RuntimeError(f"{self.scenario.name}: jobs still running after {max_seconds} s")

    def run_until(self, until: float) -> None:
        """Play every event up to virtual time `until` (inclusive), then advance to it."""
        if until < self.now:
            raise ValueError(f"cannot go back from {self.now} s to {until} s")
        while not self.finished:
            at = self._next_event()
            if at > until:
                self._advance(until)
                return
            self._advance(at)
            self._instant()

    def _next_event(self) -> float:
        scrape = self._scrapes * self.scenario.scrape_seconds
        times = [scrape, *(s.next_run_at for s in self._schedules.values())]
        if self._pending:
            times.append(self._pending[0].spec.submit_seconds)
        for j in self._jobs:
            if j.phase == "running":
                times.append(self.now + j.seconds_to_finish())
            elif j.phase == "migrating":
                times.append(j.resume_at)
        return max(min(times), self.now)

    def _advance(self, to: float) -> None:
        seconds = to - self.now
        for j in self._jobs:
            j.run_for(self.now, seconds)
        self.now = to

    def _instant(self) -> None:
        now = self.now
        for j in self._jobs:
            if j.phase == "running" and j.complete:
                j.progress, j.finish_at, j.phase = float(j.iterations), now, "done"
                j.stop()
                self._events.add("stopped")
            elif j.phase == "migrating" and j.resume_at <= now:
                self._start(j, j.node)
                self._events.add("started")
        while self._pending and self._pending[0].spec.submit_seconds <= now:
            job = self._pending.pop(0)
            if job.spec.held and self._admits:
                job.phase = "held"
                self._held.append(job)
                self._events.add("submitted")  # as a Docker engine's "create" event
                continue
            self._start(job, job.spec.node or self._place(job))
            self._events.add("started")
        if self._allocation == "edf" and self._held:
            self._oracle_admits()
        self._share()
        if now >= self._scrapes * self.scenario.scrape_seconds:
            self._scrape()
            while now >= self._scrapes * self.scenario.scrape_seconds:
                self._scrapes += 1
        events = frozenset(self._events)
        for policy in self.policies:
            schedule = self._schedules[policy.name]
            if any(wakes_on(policy, event) for event in events):
                schedule = schedule.woken(now)  # Algorithm 2, line 8
            if schedule.due(now):
                schedule = self._tick(schedule)
            self._schedules[policy.name] = schedule
        self._events.clear()  # a move made by a tick at this instant wakes nobody now

    # --- placement, CPU, scrapes and ticks ---------------------------------------------------

    def _start(self, job: SimJob, node: str) -> None:
        """`job`'s container starts on `node` (at its speed); the node keeps its image."""
        job.start(self.now, node, speed=self._speed[node])
        self._images[node].add(image_of(job))

    def _place(self, job: SimJob) -> str:
        """DS (module docstring): the default scheduler's scoring, or the fewest jobs."""
        jobs: Counter[str] = Counter()
        used: defaultdict[str, float] = defaultdict(float)
        for j in self._jobs:
            if j.phase in ("running", "migrating"):
                jobs[j.node] += 1
                used[j.node] += j.cores
        if self._placement == "kube":
            return kube_scheduler.choose(self.scenario.nodes, jobs, image_of(job), self._images,
                                         self._rng)
        return min(self._capacity, key=lambda n: (jobs[n], used[n], n))

    def _running_by_node(self) -> defaultdict[str, list[SimJob]]:
        by_node: defaultdict[str, list[SimJob]] = defaultdict(list)
        for j in self._jobs:
            if j.phase == "running":
                by_node[j.node].append(j)
        return by_node

    def _oracle_admits(self) -> None:
        """The deadline oracle starts the held jobs it admits (`edf_admit`)."""
        for job, node in edf_admit(self._held, self._running_by_node(), self._capacity,
                                   self.now):
            self._held.remove(job)
            self._start(job, node)
            self._events.add("started")

    def _share(self) -> None:
        """Share every node's CPU among its running jobs (CFS, or an oracle's allocation), and
        note each job's allocation (module docstring)."""
        for node, jobs in self._running_by_node().items():
            capacity = self._capacity[node]
            if self._allocation == "fair" and self._fair_shares.get(node) == _share_state(jobs):
                continue  # the same share again: the same cores and entitlements
            demands = [j.demand for j in jobs]
            if self._allocation == "srpt":
                cores = srpt_share(capacity, demands,
                                   [j.remaining_work_seconds(capacity) for j in jobs]).tolist()
            elif self._allocation == "edf":
                cores = edf_share(capacity, jobs, self.now)
            elif self._allocation == "qoe":
                cores = [float(c) for c in qoe_share(capacity, [self._oracle_job(j, capacity)
                                                                for j in jobs])]
            else:
                cores = share_node(capacity, demands, [j.fraction for j in jobs],
                                   [j.mode for j in jobs]).tolist()
            allocated = (cores if self._allocation != "fair" else
                         _entitlements(capacity, [j.fraction for j in jobs],
                                       [j.mode for j in jobs]))
            for j, c, a in zip(jobs, cores, allocated, strict=True):
                j.set_cores(c)
                j.allocated = a
            if self._allocation == "fair":
                self._fair_shares[node] = _share_state(jobs)

    def _oracle_job(self, job: SimJob, capacity: float) -> OracleJob:
        rate = self._targets[job.id].rate
        need = None if rate is None else deadline_need(
            job.spec, rate, progress=job.progress, now=self.now, capacity=capacity)
        return OracleJob(demand=job.demand, need=need)

    def _scrape(self) -> None:
        now, stamp = self.now, EPOCH_SECONDS + self.now
        seen: dict[str, tuple[str, float, float]] = {}
        for j in self._jobs:
            if j.phase != "running":
                continue
            j.evaluation.append(stamp, j.loss)
            j.steps.append(stamp, j.steps_done)
            span = now - j.measured_since
            rate = self._targets[j.id].rate
            if rate is not None and span > 0:  # the scoring's view of this interval
                j.rate_seconds += span
                if (j.progress - j.scraped_progress) / span >= rate * (1 - 1e-9):
                    j.rate_met_seconds += span
            j.scraped_progress = j.progress
            used = j.cpu_seconds / span if span > 0 else j.cores
            if span > 0:  # a container started this instant has no interval to average yet
                j.cpu.append(stamp, used)
            # The pictures stack jobs per scrape interval: a job that started inside it counts
            # zero before its start, so the stack never exceeds the node's cores.
            seen[j.id] = (j.node, j.cpu_seconds / self.scenario.scrape_seconds, j.fraction)
            j.cpu_seconds, j.measured_since = 0.0, now
        if self._record:
            self.timeline.append(Sample(time=now, jobs=seen))

    def _tick(self, schedule: Schedule) -> Schedule:
        started = time.perf_counter()
        outcome = tick(source=self, policy=schedule.policy, actuator=self,
                       interval_seconds=schedule.interval_seconds, peers=self.policies,
                       forecasts=self._forecasts)
        self.tick_seconds.append(time.perf_counter() - started)
        self.outcomes.append((self.now, outcome))
        return schedule.ran(outcome.decision, self.now)

    def interval_seconds(self, name: str) -> float:
        """The current interval of the policy `name` (what its next snapshot carries)."""
        return self._schedules[name].interval_seconds

    # --- Source ------------------------------------------------------------------------------

    def snapshot(self, policies: Sequence[PolicyDocument], *,
                 intervals: Mapping[str, float] | None = None) -> Snapshot:
        """The cluster now, with the history `policies` read (the whole kept history if none)
        at `intervals` (default: each policy's current interval in this world)."""
        stamp = EPOCH_SECONDS + self.now
        running = [j for j in self._jobs if j.phase == "running"]
        used: defaultdict[str, float] = defaultdict(float)
        for j in running:
            used[j.node] += j.cores
        nodes = tuple(Node(name=n.name, cpu_capacity=n.cores, cpu_usage=used[n.name],
                           speed=n.stated_speed) for n in self.scenario.nodes)
        scrape = self.scenario.scrape_seconds
        current = {p.name: self._interval_of(p, intervals or {}) for p in policies}
        reach = max((history_seconds(p, current[p.name], scrape) for p in policies),
                    default=math.inf)
        containers = tuple(j.container(since=stamp - reach) for j in running)
        return Snapshot(time=stamp, nodes=nodes, containers=containers, intervals=current,
                        pending=tuple(j.pending_job() for j in self._held))

    def _interval_of(self, policy: PolicyDocument, given: Mapping[str, float]) -> float:
        if policy.name in given:
            return float(given[policy.name])
        schedule = self._schedules.get(policy.name)
        if schedule is not None and schedule.policy == policy:
            return schedule.interval_seconds
        return base_interval_seconds(policy)

    # --- Actuator ----------------------------------------------------------------------------

    def apply(self, action: Action, decision: Decision) -> None:
        """Carry out one action of `decision` now (see `policyd.sim.actuator`); raises when it
        names a job that is not running or a node that does not exist. (A dry-run decision
        never reaches here: the tick routes it to the dry-run actuator.)"""
        job = next((j for j in self._jobs if j.id == action.container), None)
        if isinstance(action, Admit):
            self._admit(job, action)
            return
        if job is None or job.phase != "running":
            state = "unknown" if job is None else job.phase
            raise LookupError(f"container {action.container!r} is not running ({state})")
        carry_out(job, action, now=self.now, migration_seconds=self.scenario.migration_seconds,
                  nodes=self._capacity)
        if isinstance(action, Migrate):
            self.migrations += 1
        if isinstance(action, Migrate | Stop):
            self._events.add("stopped")  # its container disappears
        self._share()

    def _admit(self, job: SimJob | None, action: Admit) -> None:
        if job is None or job.phase != "held":
            state = "unknown" if job is None else job.phase
            raise LookupError(f"job {action.container!r} is not held ({state}); not admitted")
        if action.node not in self._capacity:
            raise LookupError(f"no node {action.node!r} to admit {job.id!r} on")
        self._held.remove(job)
        self._start(job, action.node)
        if action.fraction is not None:
            job.fraction, job.mode = action.fraction, action.mode
        job.markers = replace(job.markers, last_action_at=EPOCH_SECONDS + self.now)
        self._events.add("started")
        self._share()

    # --- results -----------------------------------------------------------------------------

    def job(self, job_id: str) -> SimJob:
        """The live state of one job (read it; changing it bypasses the world)."""
        for j in self._jobs:
            if j.id == job_id:
                return j
        raise LookupError(f"no job {job_id!r}")

    def result(self, strategy: Strategy) -> RunResult:
        """The run's outcome; every job must be done."""
        jobs = []
        for j in self._jobs:
            if j.finish_at is None or j.quality_at is None:
                raise RuntimeError(f"job {j.id!r} has not finished")
            final = j.loss
            jobs.append(JobResult(
                id=j.id, model=j.spec.profile.model, submit=j.spec.submit_seconds,
                finish=j.finish_at, time_to_quality=j.quality_at - j.spec.submit_seconds,
                nodes=tuple(j.nodes), final_loss=final,
                full_loss=j.spec.profile.loss_after(j.iterations), stopped=j.stopped,
                target=score(j, self._targets[j.id], final_loss=final),
                deadline=j.spec.deadline_seconds, started=j.first_started_at))
        return RunResult(strategy=strategy, jobs=tuple(jobs), migrations=self.migrations,
                         timeline=tuple(self.timeline),
                         allocated_core_seconds=sum(j.allocated_seconds for j in self._jobs),
                         used_core_seconds=sum(j.used_seconds for j in self._jobs),
                         core_seconds=sum(j.cpu_seconds_total for j in self._jobs))


def image_of(job: SimJob) -> str:
    """A job's container image: one per model family (what image locality compares)."""
    return f"training/{job.spec.profile.model}"


def _share_state(jobs: Sequence[SimJob]) -> tuple[tuple[object, ...], ...]:
    """What a node's fair share reads (its jobs' demands, limits, modes) and writes (their
    cores, hence rates, and entitlements), job by job."""
    return tuple((id(j), j.demand, j.fraction, j.mode, j.speed, j.cores, j.rate, j.allocated)
                 for j in jobs)


def _entitlements(capacity: float, fractions: Sequence[float],
                  modes: Sequence[Literal["shares", "quota"]]) -> list[float]:
    """Cores each job of a node is entitled to: a quota job its cap; a shares job its weight's
    share of what the quota jobs' caps leave."""
    terms = [weight_and_cap(f, m, capacity) for f, m in zip(fractions, modes, strict=True)]
    capped = sum(cap for (_, cap), m in zip(terms, modes, strict=True) if m == "quota")
    left = max(capacity - capped, 0.0)
    weights = sum(w for (w, _), m in zip(terms, modes, strict=True) if m == "shares")
    return [cap if m == "quota" else left * w / weights
            for (w, cap), m in zip(terms, modes, strict=True)]


def _check(scenario: Scenario) -> None:
    """Reject a scenario the world cannot play, naming every problem."""
    problems = []
    names = [n.name for n in scenario.nodes]
    if not names or len(set(names)) != len(names):
        problems.append(f"node names must be unique and at least one: {names}")
    problems += [f"node {n.name}: cores must be positive" for n in scenario.nodes
                 if not n.cores > 0]
    problems += [f"node {n.name}: speed must be positive" for n in scenario.nodes
                 if n.speed is not None and not n.speed > 0]
    ids = [j.id for j in scenario.jobs]
    if len(set(ids)) != len(ids):
        problems.append("job ids must be unique")
    for j in scenario.jobs:
        if j.node is not None and j.node not in names:
            problems.append(f"job {j.id}: node {j.node!r} is not one of {names}")
        if not (j.submit_seconds >= 0 and j.work_scale > 0):
            problems.append(f"job {j.id}: submit_seconds must be >= 0 and work_scale > 0")
    if not scenario.scrape_seconds > 0 or not scenario.migration_seconds >= 0:
        problems.append("scrape_seconds must be > 0 and migration_seconds >= 0")
    if problems:
        raise ValueError(f"scenario {scenario.name}: " + "; ".join(problems))
