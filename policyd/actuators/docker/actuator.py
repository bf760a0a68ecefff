"""`DockerActuator`: SetCpu, Migrate, MarkMigrated, Stop and Admit on Docker engines
(policyd.tick.Actuator; Stop: `stop`; Admit: `admission`).

Only containers carrying `settings.managed_label` are touched, and none labelled
`policyd.io/opt-out=true` (checked on the container as read before acting:
`engines.actionable`). Every failure raises
`ActuationError` with a one-line reason; engine calls are retried on daemon and connection
errors (`calls`). Where markers live (`state`): labels on containers policyd creates, the
state file for the rest, with the count of failed moves the engine backs off on. Half-done
migrations are settled by `recover()` (`recovery`: every intent and every labelled pair),
which runs before the first action (again every minute until it succeeds: an engine may be
down), and by `settle_pending()` (the intents only), which the daemon calls at the start of
every cycle: one look at the state file when nothing is pending.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import assert_never

import docker

from policyd.actuators.docker.admission import Admission
from policyd.actuators.docker.calls import Caller
from policyd.actuators.docker.cpu import cpu_update
from policyd.actuators.docker.engines import Engines
from policyd.actuators.docker.migration import Migration
from policyd.actuators.docker.recovery import Recovered, Recovery
from policyd.actuators.docker.settings import DockerSettings
from policyd.actuators.docker.state import ActuatorState
from policyd.actuators.docker.steps import Steps, no_crash
from policyd.actuators.docker.stop import Stopper
from policyd.actuators.errors import ActuationError
from policyd.actuators.grace import grace_seconds
from policyd.model import (
    Action,
    Admit,
    Decision,
    Markers,
    MarkMigrated,
    Migrate,
    SetCpu,
    Stop,
)

LOG = logging.getLogger(__name__)

RECOVERY_RETRY_SECONDS = 60.0
"""After a failed start-up recovery (an engine down), how long actions go on before the next try."""


class DockerActuator:
    """Acts on the engines of `settings.hosts` (or on `clients`, node -> SDK client: the seam
    tests use; nodes missing from it are connected lazily). A migration's SIGTERM grace period
    is the action's `grace_seconds` (its policy's `migration_grace_seconds`), else
    `settings.grace_seconds` (`policyd.actuators.grace`)."""

    def __init__(self, settings: DockerSettings, *,
                 clients: Mapping[str, docker.DockerClient] | None = None,
                 clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep,
                 crash: Callable[[str], None] = no_crash) -> None:
        self.settings = settings
        self.clock = clock
        self.engines = Engines(settings, Caller(settings.retries, settings.backoff_seconds,
                                                sleep), clients)
        self.state = ActuatorState.load(settings.state_path)
        self._grace = settings.grace_seconds
        self.recovery = Recovery(self.engines, self.state, Steps(self.engines, clock, sleep),
                                 grace_seconds=lambda: self._grace)
        self.migration = Migration(self.engines, self.state,
                                   Steps(self.engines, clock, sleep, crash), self.recovery,
                                   clock=clock)
        self.stopper = Stopper(self.engines, self.state, clock=clock)
        self.admission = Admission(self.engines, self.migration,
                                   Steps(self.engines, clock, sleep), clock=clock,
                                   sleep=sleep)
        self._recovered = False
        self._next_recovery = -math.inf
        self._lock = threading.Lock()

    def apply(self, action: Action, decision: Decision) -> None:
        with self._lock:
            now = self.clock()
            if not self._recovered and now >= self._next_recovery:
                self._next_recovery = now + RECOVERY_RETRY_SECONDS
                try:
                    self.recover()
                except ActuationError as exc:
                    LOG.error("docker: %s (tried again in %.0f s)", str(exc),
                              RECOVERY_RETRY_SECONDS)
            with self.engines.opt_out.during(decision):
                self._apply(action)

    def _apply(self, action: Action) -> None:
        match action:
            case SetCpu():
                self.set_cpu(action)
            case Migrate():
                self.migrate(action)
            case MarkMigrated():
                self.mark_migrated(action)
            case Stop():
                self.stopper.run(action, grace_seconds=grace_seconds(
                    action, self.settings.grace_seconds))
            case Admit():
                self.admit(action)
            case _:
                assert_never(action)

    def close(self) -> None:
        """Close the engine connections this actuator opened."""
        self.engines.close()

    def recover(self) -> list[Recovered]:
        """Settle every half-done migration (see `recovery` for the rules), and remove the held
        originals of half-done admissions (`Admission.leftovers`)."""
        done = self.recovery.recover()
        for removed in self.admission.leftovers():
            LOG.info("docker: removed held container %s, which an admission had already "
                     "copied and started elsewhere", removed)
        self._recovered = True
        return done

    def settle_pending(self) -> list[Recovered]:
        """Finish or roll back the moves the state file says are pending; nothing (and no
        engine call) when none is. Raises ActuationError when one cannot be settled now."""
        if not self.state.migrations:
            return []
        with self._lock:
            return self.recovery.pending()

    def set_cpu(self, action: SetCpu) -> None:
        container = self.engines.actionable(action.node, action.container)
        host = container.attrs.get("HostConfig") or {}
        if action.mode == "quota" and host.get("NanoCpus"):
            raise ActuationError(
                f"container {action.container} on node {action.node} was created with --cpus "
                "(NanoCpus); Docker refuses a CPU quota next to it: recreate it without --cpus")
        cores = self.engines.cores(action.node) if action.mode == "quota" else 1.0
        update = cpu_update(action.fraction, action.mode, cores=cores,
                            current_shares=int(host.get("CpuShares") or 0),
                            current_quota=int(host.get("CpuQuota") or 0))
        self.engines.call(action.node, f"update cpu of {action.container} ({update})",
                          lambda: container.update(**update))
        self.state.record_marker(action.container, container.id or "",
                                 last_action_at=self.clock())

    def migrate(self, action: Migrate) -> None:
        grace = grace_seconds(action, self.settings.grace_seconds)
        self._grace = grace
        name = action.container
        try:
            intent = self.state.migrations.get(name)
            if intent is not None:  # a half-done move of this job, maybe in another direction
                done = self.recovery.settle(name, str(intent["from"]), str(intent["to"]))
                if name in self.state.migrations:
                    raise ActuationError(f"an earlier move of {name} ({intent['from']} -> "
                                         f"{intent['to']}) is still pending: {done.why}")
                if done.outcome == "finish":
                    raise ActuationError(f"an earlier move of {name} to {intent['to']} was "
                                         "finished just now; not moving it again")
            elif self.engines.get(action.to_node, name) is not None:
                self.recovery.settle(name, action.from_node, action.to_node)
            try:
                self.migration.run(action, grace_seconds=grace)
            except ActuationError:
                self.record_failure(action)
                raise
        finally:
            self._grace = self.settings.grace_seconds

    def record_failure(self, action: Migrate) -> None:
        """Count a failed move on the container that holds the job now (the engine backs
        off on the count: `policyd.engine.guards.move_backoff`)."""
        for node in (action.from_node, action.to_node):
            try:
                found = self.engines.get(node, action.container)
            except ActuationError:
                continue
            if found is not None and found.id:
                count = self.state.record_failed_move(action.container, found.id, self.clock())
                LOG.warning("docker: move of %s failed (%d in a row); the policy backs off",
                            action.container, count)
                return

    def admit(self, action: Admit) -> None:
        """Start a held container (`admission`); its start is policyd's action on it (none
        when its owner started it first: nothing is recorded)."""
        node = self.admission.run(action)
        if node is None:
            return
        started = self.engines.managed(node, action.container)
        self.state.record_marker(action.container, started.id or "",
                                 last_action_at=self.clock())

    def mark_migrated(self, action: MarkMigrated) -> None:
        """Labels cannot change on a running container: recorded in the state file, which
        `recorded_markers()` exposes to the source (the daemon wires it)."""
        container = self.engines.actionable(action.node, action.container)
        self.state.record_marker(action.container, container.id or "", migrated=True,
                                 converged_at=action.converged_at, last_action_at=self.clock())

    def recorded_markers(self) -> dict[str, Markers]:
        """Markers kept in the state file, by the container's engine id (so a later container
        of the same name, e.g. the replacement after a migration, inherits nothing); a source
        merges them with the container's labels (`DockerSnapshotSource(extra_markers=...)`)."""
        out: dict[str, Markers] = {}
        for entry in list(self.state.markers.values()):
            out[str(entry.get("id", ""))] = Markers(migrated=bool(entry.get("migrated", False)),
                                rebalanced=bool(entry.get("rebalanced", False)),
                                converged_at=entry.get("converged_at"),
                                last_action_at=entry.get("last_action_at"),
                                move_failures=int(entry.get("move_failures", 0)),
                                move_failed_at=entry.get("move_failed_at"))
        return out
