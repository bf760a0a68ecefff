"""`DockerActuator`: SetCpu, Migrate, MarkMigrated and Stop on Docker engines
(policyd.tick.Actuator; Stop: `stop`).

Only containers carrying `settings.managed_label` are touched. Every failure raises
`ActuationError` with a one-line reason; engine calls are retried on daemon and connection
errors (`calls`). Where markers live (`state`): labels on containers policyd creates, the
state file for the rest. Half-done migrations are settled by `recover()` (`recovery`), which
runs before the first action (again every minute until it succeeds: an engine may be down),
and for a container before it is migrated. The daemon may also call it at start-up.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import assert_never

import docker

from policyd.actuators.docker.calls import Caller
from policyd.actuators.docker.cpu import cpu_update
from policyd.actuators.docker.engines import Engines
from policyd.actuators.docker.migration import Migration
from policyd.actuators.docker.recovery import Recovered, Recovery
from policyd.actuators.docker.settings import DockerSettings
from policyd.actuators.docker.state import ActuatorState
from policyd.actuators.docker.stop import Stopper
from policyd.actuators.errors import ActuationError
from policyd.actuators.grace import grace_seconds
from policyd.model import Action, Decision, Markers, MarkMigrated, Migrate, SetCpu, Stop

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
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.settings = settings
        self.clock = clock
        self.engines = Engines(settings, Caller(settings.retries, settings.backoff_seconds,
                                                sleep), clients)
        self.state = ActuatorState.load(settings.state_path)
        self._grace = settings.grace_seconds
        self.migration = Migration(self.engines, self.state, clock=clock, sleep=sleep)
        self.recovery = Recovery(self.engines, self.state, grace_seconds=lambda: self._grace)
        self.stopper = Stopper(self.engines, self.state, clock=clock)
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
                case _:
                    assert_never(action)

    def close(self) -> None:
        """Close the engine connections this actuator opened."""
        self.engines.close()

    def recover(self) -> list[Recovered]:
        """Settle every half-done migration (see `recovery` for the rules)."""
        done = self.recovery.recover()
        self._recovered = True
        return done

    def set_cpu(self, action: SetCpu) -> None:
        container = self.engines.managed(action.node, action.container)
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
        try:
            intent = self.state.migrations.get(action.container)
            if intent is not None:  # a half-done move of this job, maybe in another direction
                self.recovery.settle(action.container, str(intent["from"]), str(intent["to"]))
            elif self.engines.get(action.to_node, action.container) is not None:
                self.recovery.settle(action.container, action.from_node, action.to_node)
            self.migration.run(action, grace_seconds=grace)
        finally:
            self._grace = self.settings.grace_seconds

    def mark_migrated(self, action: MarkMigrated) -> None:
        """Labels cannot change on a running container: recorded in the state file, which
        `recorded_markers()` exposes to the source (the daemon wires it)."""
        container = self.engines.managed(action.node, action.container)
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
                                last_action_at=entry.get("last_action_at"))
        return out
