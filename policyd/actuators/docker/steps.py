"""The engine calls a move is made of, shared by `migration` (a move) and `recovery` (the rest
of a half-done one): ask the old container to stop (its stop signal, the grace period, then
SIGKILL) and read its exit code, start a container and confirm that it keeps running, remove
one. Each goes through `Engines.call` (retries, ActuationError).

`crash(point)` is the chaos test's hook (`DockerSettings.test_crash_at`): called after each
named step of a move; in production it does nothing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import docker.errors
from docker.models.containers import Container

from policyd.actuators.docker.engines import Engines
from policyd.actuators.errors import ActuationError

CRASH_POINTS = ("intent", "create", "sigterm", "exit", "start")
"""Where a move can be cut short by the test hook: after the intent is recorded, after the
replacement's create, after the SIGTERM, after the old one's exit, after the replacement's
start."""


LOG = logging.getLogger(__name__)


def no_crash(point: str) -> None:
    """The production hook: nothing."""


def crash_at(point: str | None) -> Callable[[str], None]:
    """The hook `DockerSettings.test_crash_at` asks for: SIGKILL this process when the move
    reaches `point` (the chaos test's deterministic crash); `no_crash` for None."""
    if point is None:
        return no_crash

    def crash(reached: str) -> None:
        if reached == point:
            LOG.critical("docker: test_crash_at=%s reached: killing policyd (SIGKILL)", point)
            for handler in logging.getLogger().handlers:
                handler.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    return crash


RUNNING = ("running", "restarting", "paused")
"""A container's states in which it has not exited yet."""
EXIT_POLL_SECONDS = 0.1
"""How often `await_exit` asks the engine whether the job has exited."""


@dataclass
class Steps:
    engines: Engines
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    crash: Callable[[str], None] = field(default=no_crash)

    def signal_stop(self, node: str, container: Container) -> None:
        """Send the container's stop signal (SIGTERM unless its image says otherwise) without
        waiting: the job starts its checkpoint now. Only for a container without a restart
        policy that would bring it back after its exit (see `stop`)."""
        config = container.attrs.get("Config") or {}
        sig = config.get("StopSignal") or "SIGTERM"
        with contextlib.suppress(docker.errors.NotFound):
            self.engines.call(node, f"send {sig} to {container.name}",
                              lambda: container.kill(signal=sig))

    def await_exit(self, node: str, container: Container, grace_seconds: float) -> float:
        """After `signal_stop`: wait, up to the whole grace period, for the job to exit on that
        signal; the seconds of the grace period left (0 when it has run out). A second stop
        signal while the job is already exiting (what `docker stop` at once would send) can
        land in its interpreter's shutdown, where Python's signal handlers are gone, and kill a
        job that has just written its checkpoint (exit 143: seen in CI on a loaded machine)."""
        began = self.clock()
        while True:
            try:
                self.engines.call(node, f"inspect {container.name}", container.reload)
            except docker.errors.NotFound:
                return 0.0
            waited = self.clock() - began
            if container.status not in RUNNING or waited >= grace_seconds:
                return max(grace_seconds - waited, 0.0)
            self.sleep(min(EXIT_POLL_SECONDS, grace_seconds - waited))

    def stop(self, node: str, container: Container, grace_seconds: float) -> int:
        """Stop the container as `docker stop` does (stop signal, up to the grace period, then
        SIGKILL; the engine then never restarts it) and return its exit code (-1: still
        running)."""
        with contextlib.suppress(docker.errors.NotFound):
            self.engines.call(node, f"inspect {container.name}", container.reload)
        if container.status in RUNNING:
            self.engines.call(node, f"stop {container.name}",
                              lambda: container.stop(timeout=max(0, round(grace_seconds))))
        self.engines.call(node, f"inspect {container.name}", container.reload)
        state = container.attrs.get("State") or {}
        if state.get("Running"):
            return -1
        return int(state.get("ExitCode", -1))

    def start(self, node: str, container: Container) -> str | None:
        """Start and confirm; None when it runs, else what went wrong."""
        settings = self.engines.settings
        self.engines.call(node, f"start {container.name}", container.start)
        self.crash("start")
        deadline = self.clock() + settings.start_timeout_seconds
        confirmed_at: float | None = None
        while True:
            self.engines.call(node, f"inspect {container.name}", container.reload)
            state = container.attrs.get("State") or {}
            if not state.get("Running"):
                if state.get("Status") in ("exited", "dead"):
                    tail = self.log_tail(node, container)
                    return f"exited with code {state.get('ExitCode')}" + (
                        f" (log: {tail})" if tail else "")
            elif confirmed_at is None:
                confirmed_at = self.clock() + settings.confirm_seconds
            if confirmed_at is not None and self.clock() >= confirmed_at:
                return None
            if confirmed_at is None and self.clock() >= deadline:
                return f"was not running within {settings.start_timeout_seconds:g} s"
            self.sleep(0.2)

    def start_again(self, node: str, container: Container) -> None:
        """Start a stopped container again (a rollback: it resumes from its checkpoint)."""
        self.engines.call(node, f"start {container.name} again", container.start)

    def remove(self, node: str, container: Container) -> None:
        """Remove the container (forced: a replacement may have been started after all);
        gone already is fine. Bind-mounted checkpoints stay."""
        with contextlib.suppress(docker.errors.NotFound):
            self.engines.call(node, f"remove {container.name}",
                              lambda: container.remove(force=True))

    def log_tail(self, node: str, container: Container) -> str:
        try:
            raw = self.engines.call(node, "read logs", lambda: container.logs(tail=3))
        except (ActuationError, docker.errors.NotFound):
            return ""
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        return " | ".join(line for line in text.splitlines() if line.strip())[-300:]
