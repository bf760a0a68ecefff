"""`Daemon`: policies on APScheduler, FlowCon's back-off, the listener, hot reload, shutdown.

Theory of operation. Each policy is one APScheduler 3.x interval job (id = the policy's name,
`max_instances=1`, `coalesce=True`, never dropped for lateness) that runs `policyd.tick.tick`:
collect -> decide -> apply. Each policy's interval follows `policyd.engine.schedule.Schedule`,
the rule the simulator follows too: the *current* interval goes into the snapshot
(`intervals={name: seconds}`), so the engine decides the back-off; after the tick, when
`decision.next_interval` differs from the interval the job is scheduled at, the job is
rescheduled (`reschedule_job` sets the next run to now + N, so it is called only on a change).
Every tick knows every loaded policy (`peers`), so a container several policies select is acted
on by its owner only (`policyd.engine.ownership`).

Algorithm 2: an `EventSource` runs on its own thread; a container starting or stopping marks
every policy whose kind wakes on that event (`Kind.wakes_on`: FlowCon) for a reset (its
interval goes back to the base one) and wakes its job now (`modify_job(next_run_time=now)`).
A policy's ticks never overlap: one lock per policy, and a wake-up arriving during a tick is
replayed when that tick ends.

Scope: a node agent (`scope="node"`) runs only the policies whose kind decides each node on its
own; the others are left to the manager (logged at start and on every reload), but still count
as peers for ownership. With `node_reports`, a node agent also runs the cluster-wide policies
that can be decided from node reports (`Kind.reports_of`: SpeCon, Predictive with `migrate`,
Deadline, FlowCon2, and any policy that is cluster-wide only because it may stop jobs), as
reports: each tick takes its node's snapshot, makes the node's report
(`policyd.engine.report`) and publishes it on /metrics (`policyd.daemon.node_report_metrics`)
for the manager. Of such a policy the agent decides and applies only its node's part, when it
has one (`Kind.agent_part`: Predictive's, Deadline's or FlowCon2's CPU limits, a FlowCon
policy with `on_converged: stop` without its stops; SpeCon has none), from the same snapshot:
the jobs it would stop are in the report, for the manager to stop.

Pending moves: before each tick's snapshot, `settle` (the backend's, e.g. the Docker
actuator's `settle_pending`) finishes or rolls back what a crash or an engine outage left half
done.

Failures: a `SourceError` ends the tick with one log line and a count (nothing is acted on; the
job's next run retries); a failing action is counted as failed and the others still run; any
other exception is logged with its traceback and counted, and the daemon goes on.

Hot reload: the main loop polls the policy files (`PolicyWatcher`); a valid set replaces the
old one (jobs added, removed, or rescheduled when their base interval changed), an invalid one
is logged problem by problem, counted, and noted on /readyz, and the last good set stays.

Shutdown (`stop` set, e.g. by SIGTERM): no tick starts any more, a running tick finishes (no
half-applied decision), the listener stops, the scheduler shuts down, alerts are flushed.

`interval_scale` multiplies every interval on the wall clock (1.0 in production): tests and
demos run a 20 s policy every 0.2 s with 0.01. The snapshot's intervals stay in policy seconds.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.background import BackgroundScheduler

from policyd.daemon.health import Health
from policyd.daemon.metrics import DaemonMetrics
from policyd.daemon.ports import OutcomeObserver, flush_observer
from policyd.daemon.reload import PolicyPoller, Reload
from policyd.engine import report
from policyd.engine.kind import Scope
from policyd.engine.registry import KINDS
from policyd.engine.schedule import Schedule, wakes_on
from policyd.engine.spec import PolicyDocument
from policyd.fastjson import paused_gc
from policyd.model.action_text import describe
from policyd.model.codec import action_to_dict
from policyd.model.events import ContainerEvent
from policyd.sources.errors import SourceError
from policyd.tick import (
    Actuator,
    DryRunActuator,
    EventSource,
    Outcome,
    Source,
    act,
    observe,
    tick,
)

LOG = logging.getLogger(__name__)

ACTIONS_LOGGED_EACH = 20
"""A tick's applied actions are logged one a line with their reasons at info level up to this
many; more (FlowCon on thousands of containers) at debug level, the tick's line counting them."""


@dataclass(frozen=True, kw_only=True)
class TickReport:
    """What one tick of one policy came to: `result` ok | source_error | error | skipped."""

    policy: str
    result: str
    outcome: Outcome | None = None
    error: str | None = None


@dataclass(kw_only=True)
class _Job:
    """A policy's schedule state; flags are guarded by the daemon's lock."""

    schedule: Schedule
    """The policy and its current interval (policy seconds), passed into the next snapshot."""
    scheduled: float
    """The interval the APScheduler job runs at (policy seconds)."""
    tick_lock: threading.Lock = field(default_factory=threading.Lock)
    reset: bool = False
    running: bool = False

    @property
    def policy(self) -> PolicyDocument:
        return self.schedule.policy

    @property
    def interval(self) -> float:
        return self.schedule.interval_seconds


class Daemon:
    """Runs `policies` against `source` and `actuator` (see the module docstring)."""

    def __init__(self, policies: Sequence[PolicyDocument], *, source: Source,
                 actuator: Actuator, metrics: DaemonMetrics, health: Health | None = None,
                 events: EventSource | None = None, observer: OutcomeObserver | None = None,
                 watcher: PolicyPoller | None = None, interval_scale: float = 1.0,
                 loop_seconds: float = 0.5, reload_seconds: float = 2.0,
                 clock: Callable[[], float] = time.time, max_workers: int = 16,
                 scope: Scope | None = None,
                 settle: Callable[[], object] | None = None,
                 sees_held_jobs: bool = True, node_reports: bool = False) -> None:
        if not interval_scale > 0:
            raise ValueError("interval_scale must be positive")
        self.source = source
        self.actuator = actuator
        self.dry_run_actuator = DryRunActuator()
        self.metrics = metrics
        self.health = health or Health()
        self.events = events
        self.observer = observer
        self.watcher = watcher
        self.interval_scale = interval_scale
        self._loop_seconds = loop_seconds
        self._reload_seconds = reload_seconds
        self._clock = clock
        self.scope = scope
        self.node_reports = node_reports and scope is not None
        self.settle = settle
        self.sees_held_jobs = sees_held_jobs
        self._lock = threading.RLock()
        self._jobs: dict[str, _Job] = {}
        self._peers: tuple[PolicyDocument, ...] = tuple(policies)
        self._stopping = threading.Event()
        self._events_stop = threading.Event()
        self._events_thread: threading.Thread | None = None
        self.scheduler = BackgroundScheduler(
            timezone=UTC, executors={"default": ThreadPoolExecutor(max_workers)},
            job_defaults={"max_instances": 1, "coalesce": True, "misfire_grace_time": None})
        for policy in self._in_scope(policies):
            self._jobs[policy.name] = self._new_job(policy)
            metrics.set_interval(policy.name, self._jobs[policy.name].interval)
        self.health.policies_loaded()

    # --- life cycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Schedule every policy (first tick now), start the scheduler and the listener."""
        with self._lock:
            for name in self._jobs:
                self._schedule(name, first_run=True)
        self.scheduler.start()
        if self.events is not None:
            self._events_thread = threading.Thread(
                target=self._listen, name="policyd-events", daemon=True)
            self._events_thread.start()
        self.health.running(True)
        LOG.info("running %d policies: %s", len(self._jobs), ", ".join(self._jobs) or "none")

    def run(self, stop: threading.Event) -> None:
        """`start`, then beat, poll the policy files, until `stop` is set; then `shutdown`."""
        self.start()
        try:
            next_poll = time.monotonic() + self._reload_seconds
            while not stop.wait(self._loop_seconds):
                self.health.beat()
                if self.watcher is not None and time.monotonic() >= next_poll:
                    next_poll = time.monotonic() + self._reload_seconds
                    self.reload_if_changed()
        finally:
            self.shutdown()

    def shutdown(self) -> None:
        """Stop: no new tick, let a running tick finish, stop the listener, flush alerts."""
        self._stopping.set()
        self._events_stop.set()
        if self.scheduler.running:
            self.scheduler.shutdown(wait=True)  # waits for a running tick to complete
        if self._events_thread is not None:
            self._events_thread.join(timeout=10)
            if self._events_thread.is_alive():
                LOG.warning("the event listener did not stop within 10 s")
        flush_observer(self.observer)
        self.health.running(False)
        LOG.info("stopped")

    def run_once(self) -> list[TickReport]:
        """One tick per policy, one after the other, without the scheduler (`--once`)."""
        with self._lock:
            names = list(self._jobs)
        return [self.tick_policy(name) for name in names]

    # --- inspection --------------------------------------------------------------------------

    @property
    def policies(self) -> tuple[PolicyDocument, ...]:
        with self._lock:
            return tuple(job.policy for job in self._jobs.values())

    def interval_seconds(self, name: str) -> float:
        """The policy's current interval (policy seconds)."""
        with self._lock:
            return self._jobs[name].interval

    def scheduled_seconds(self, name: str) -> float:
        """The interval of the policy's APScheduler job (wall seconds)."""
        return self.schedule(name)[1]

    def schedule(self, name: str) -> tuple[float, float]:
        """(current interval in policy seconds, the APScheduler job's interval in wall
        seconds), read together."""
        with self._lock:
            job = self.scheduler.get_job(name)
            if job is None:
                raise LookupError(f"no scheduled job for policy {name!r}")
            return self._jobs[name].interval, float(job.trigger.interval.total_seconds())

    # --- one tick ----------------------------------------------------------------------------

    def tick_policy(self, name: str) -> TickReport:
        """Run one tick of policy `name` now (waiting for a running one to finish first)."""
        with self._lock:
            job = self._jobs.get(name)
        if job is None or self._stopping.is_set():
            return TickReport(policy=name, result="skipped")
        with job.tick_lock:
            if self._stopping.is_set():
                return TickReport(policy=name, result="skipped")
            with self._lock:
                job.running = True
                if job.reset:
                    job.reset = False
                    job.schedule = job.schedule.woken(self._clock())  # Algorithm 2, line 8
                policy, interval, peers = job.policy, job.interval, self._peers
            report: TickReport | None = None
            try:
                report = self._tick(policy, interval, peers)
            finally:
                with self._lock:
                    job.running = False
                    if report is not None and report.outcome is not None:
                        job.schedule = job.schedule.ran(report.outcome.decision, self._clock())
                    # A policy removed while its tick ran keeps no series and no job.
                    current = self._jobs.get(name) is job
                    if current:
                        self.metrics.set_interval(name, job.interval)
                        self._reschedule_if_changed(name, job)
                    else:
                        self.metrics.forget_policy(name)
                    wake = job.reset and current
            if wake:
                self._wake(name)
            assert report is not None
            return report

    def _tick(self, policy: PolicyDocument, interval: float,
              peers: Sequence[PolicyDocument]) -> TickReport:
        name = policy.name
        if self._reported(policy):
            return self._report(policy, interval, peers)
        dry_run = policy.spec.dry_run
        started = time.perf_counter()
        self._settle_pending()
        try:
            outcome = tick(self.source, policy, self.actuator, interval_seconds=interval,
                           peers=peers, dry_run=self.dry_run_actuator)
        except Exception as exc:  # a bug or an unexpected failure: report it, keep running
            return self._failed(name, exc, started, undone="nothing done", what="tick")
        self.health.snapshot_succeeded()
        self._record(name, outcome, dry_run, time.perf_counter() - started)
        return TickReport(policy=name, result="ok", outcome=outcome)

    def _record(self, name: str, outcome: Outcome, dry_run: bool, took: float) -> None:
        """A decided tick's metrics, log lines and alerts."""
        self.metrics.record_outcome(name, outcome, dry_run=dry_run, duration_seconds=took)
        self._log_outcome(outcome, took)
        if self.observer is not None:
            try:
                self.observer.on_outcome(outcome, self._clock())
            except Exception:
                LOG.exception("policy %s: alerting failed", name)

    def _failed(self, name: str, exc: Exception, started: float, *, undone: str,
                what: str) -> TickReport:
        """A tick that raised (call it in the `except`): a SourceError is one log line and a
        count, nothing done (the next run retries); anything else is logged with its
        traceback and counted, and the daemon goes on."""
        took = time.perf_counter() - started
        if isinstance(exc, SourceError):
            LOG.error("policy %s: no snapshot, %s this tick (%s): %s", name, undone, exc.kind,
                      exc)
            self.metrics.record_failure(name, "source_error", source_error_kind=exc.kind,
                                        duration_seconds=took)
            return TickReport(policy=name, result="source_error", error=str(exc))
        LOG.exception("policy %s: %s failed", name, what)
        self.metrics.record_failure(name, "error", duration_seconds=took)
        return TickReport(policy=name, result="error", error=f"{type(exc).__name__}: {exc}")

    def _reported(self, policy: PolicyDocument) -> bool:
        """Whether this node agent reports `policy` to the manager rather than deciding it."""
        return self.node_reports and KINDS.of(policy).reports_of(policy)

    def _report(self, policy: PolicyDocument, interval: float,
                peers: Sequence[PolicyDocument]) -> TickReport:
        """A reported policy's tick: its node's part decided and applied, when it has one
        (`Kind.agent_part`: Predictive's CPU limits, a FlowCon policy that may stop jobs
        whole), and its node's report published from the same snapshot, with the jobs to
        stop, which the manager stops (`policyd.engine.report`); the rest is the manager's."""
        name = policy.name
        started = time.perf_counter()
        outcome: Outcome | None = None
        try:
            snapshot = observe(self.source, policy, interval)
            with paused_gc():  # as `policyd.tick.tick` decides
                decision, reports = report(policy, snapshot, peers=peers)
            if decision is not None:
                outcome = act(decision, self.actuator, dry_run=self.dry_run_actuator)
        except Exception as exc:  # a bug or an unexpected failure: report it, keep running
            return self._failed(name, exc, started, undone="no node report", what="node report")
        self.metrics.node_reports.publish(name, reports)
        self.health.snapshot_succeeded()
        if outcome is not None:
            self._record(name, outcome, policy.spec.dry_run, time.perf_counter() - started)
        LOG.info("policy %s: node report of %s published (%d requests, %d candidates, %d "
                 "waiting, %d at risk, %d to stop)", name,
                 ", ".join(r.node for r in reports) or "no node",
                 *(sum(len(getattr(r, listed)) for r in reports)
                   for listed in ("requests", "candidates", "waiting", "at_risk", "stops")))
        return TickReport(policy=name, result="ok", outcome=outcome)

    def _settle_pending(self) -> None:
        """The backend's pending moves, finished or rolled back before the snapshot (so an
        engine that answers again gets them settled without a restart); a failure is logged
        and tried again next cycle."""
        if self.settle is None:
            return
        try:
            self.settle()
        except Exception as exc:  # an engine still down: the move stays pending
            LOG.error("pending moves not settled yet (tried again next cycle): %s", exc)

    @staticmethod
    def _log_outcome(outcome: Outcome, took: float) -> None:
        decision = outcome.decision
        LOG.info("policy %s: %d actions (%d failed), next interval %g s, %.3f s%s",
                 decision.policy, len(decision.actions), len(outcome.failed),
                 decision.next_interval, took, " [dry run]" if decision.dry_run else "")
        failed = {id(action) for action, _ in outcome.failed}
        # what was done, and why (a dry run's actions are logged by the dry-run actuator)
        applied = [] if decision.dry_run else [a for a in decision.actions if id(a) not in failed]
        level = logging.INFO if len(applied) <= ACTIONS_LOGGED_EACH else logging.DEBUG
        for action in applied:
            LOG.log(level, "policy %s: %s: %s", decision.policy, describe(action), action.reason)
        for action, reason in outcome.failed:
            LOG.error("policy %s: action failed: %s: %s", decision.policy,
                      action_to_dict(action), reason)

    # --- scheduling --------------------------------------------------------------------------

    def _new_job(self, policy: PolicyDocument) -> _Job:
        schedule = Schedule.first(policy, at=self._clock())
        return _Job(schedule=schedule, scheduled=schedule.interval_seconds)

    def _in_scope(self, policies: Sequence[PolicyDocument]) -> list[PolicyDocument]:
        """The policies this daemon runs (all, or a node agent's kinds of scope node); a
        warning for each that admits held jobs where the source cannot list them."""
        if not self.sees_held_jobs:
            for p in policies:
                if "admission" in KINDS.of(p).acts_on_of(p):
                    LOG.warning("policy %s (%s) admits held jobs, but this source cannot list "
                                "them (created, never started containers): they stay held. "
                                "On Docker, prometheus.profile docker-stats lists them",
                                p.name, p.kind)
        if self.scope is None:
            return list(policies)
        kept = [p for p in policies
                if KINDS.of(p).scope_of(p) == self.scope or self._reported(p)]
        for p in policies:
            if self._reported(p):
                LOG.info("policy %s (%s): this node agent publishes its node's report for the "
                         "manager (node_reports)", p.name, p.kind)
            elif KINDS.of(p).scope_of(p) != self.scope:
                LOG.warning("policy %s (%s) left out: this daemon runs policies of scope %s, "
                            "%s is of scope %s (it runs in the manager, --leader-elect)",
                            p.name, p.kind, self.scope, p.kind, KINDS.of(p).scope_of(p))
        return kept

    def _schedule(self, name: str, *, first_run: bool) -> None:
        job = self._jobs[name]
        self.scheduler.add_job(
            self.tick_policy, "interval", args=[name], id=name, name=f"policy {name}",
            seconds=job.scheduled * self.interval_scale, replace_existing=True,
            next_run_time=datetime.now(UTC) if first_run else None)

    def _reschedule_if_changed(self, name: str, job: _Job) -> None:
        """Reschedule only on a change: `reschedule_job` moves the next run to now + N."""
        if job.interval == job.scheduled or self._jobs.get(name) is not job:
            return
        LOG.info("policy %s: interval %g s -> %g s", name, job.scheduled, job.interval)
        job.scheduled = job.interval
        if self.scheduler.running and not self._stopping.is_set():
            with contextlib.suppress(JobLookupError):  # removed by a reload meanwhile
                self.scheduler.reschedule_job(name, trigger="interval",
                                              seconds=job.interval * self.interval_scale)

    def _wake(self, name: str) -> None:
        """Run the policy's tick now: through the scheduler when it runs, else directly."""
        if self._stopping.is_set():
            return
        if self.scheduler.running:
            with contextlib.suppress(JobLookupError):
                self.scheduler.modify_job(name, next_run_time=datetime.now(UTC))
        else:
            self.tick_policy(name)

    # --- Algorithm 2: the listener -----------------------------------------------------------

    def _listen(self) -> None:
        assert self.events is not None
        try:
            self.events.watch(self.on_event, self._events_stop)
        except Exception:
            LOG.exception("the event listener stopped")

    def on_event(self, event: ContainerEvent) -> None:
        """A container started or stopped: reset every policy whose kind wakes on it (FlowCon,
        Algorithm 2) and tick it now."""
        wake = []
        with self._lock:
            for name, job in self._jobs.items():
                if wakes_on(job.policy, event.kind):
                    job.reset = True
                    if not job.running:  # else the running tick wakes it when it ends
                        wake.append(name)
        if wake:
            LOG.info("container %s %s on %s: resetting the intervals of %s", event.container,
                     event.kind, event.node, ", ".join(wake))
        for name in wake:
            self._wake(name)

    # --- hot reload --------------------------------------------------------------------------

    def reload_if_changed(self) -> Reload | None:
        """Poll the policy files; apply a valid change, report an invalid one."""
        if self.watcher is None:
            return None
        found = self.watcher.poll()
        if found is not None:
            self.apply_reload(found)
        return found

    def apply_reload(self, found: Reload) -> None:
        """Report the problems (the last good policies stay), and run the new set: the valid
        files, or what still stands with the problems (`Reload`)."""
        if not found.ok:
            for problem in found.problems:
                LOG.error("policy reload: %s", problem)
            LOG.error("policy reload rejected (%d problems); keeping the last good policies",
                      len(found.problems))
            self.metrics.reload_errors.inc()
            self.health.note("policy reload", f"rejected ({len(found.problems)} problems); "
                             "running the last good policies")
            if not found.policies:
                return
        else:
            self.health.note("policy reload", None)
        self.replace_policies(found.policies)

    def replace_policies(self, policies: Sequence[PolicyDocument]) -> None:
        """Make `policies` the running set: add, remove and update jobs by name."""
        wanted: Mapping[str, PolicyDocument] = {p.name: p for p in self._in_scope(policies)}
        with self._lock:
            self._peers = tuple(policies)
            for name in [n for n in self._jobs if n not in wanted]:
                del self._jobs[name]
                self.metrics.forget_policy(name)
                with contextlib.suppress(JobLookupError):
                    self.scheduler.remove_job(name)
                LOG.info("policy %s removed", name)
            for name, policy in wanted.items():
                job = self._jobs.get(name)
                if job is None:
                    self._jobs[name] = self._new_job(policy)
                    self.metrics.set_interval(name, self._jobs[name].interval)
                    if self.scheduler.running:
                        self._schedule(name, first_run=True)
                    LOG.info("policy %s added", name)
                elif job.policy != policy:
                    if self._reported(job.policy) and not self._reported(policy):
                        # decided here alone now: its last report (its stop requests) goes
                        self.metrics.node_reports.forget(name)
                    before = job.interval
                    job.schedule = job.schedule.replaced(policy)
                    if job.interval != before:
                        self.metrics.set_interval(name, job.interval)
                        self._reschedule_if_changed(name, job)
                    LOG.info("policy %s updated", name)
