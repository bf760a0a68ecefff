"""Hand fakes at the daemon's seams: a source, actuators, an event source, and builders.

Snapshots come from the FlowCon test builders (`tests.engine.flowcon_builders`), so the real
engine decides: `converged` containers back off, `with_newcomer` resets the interval,
`one_to_limit` yields one SetCpu action.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from policyd.engine.spec import PolicyDocument
from policyd.model import Action, Container, Decision, Snapshot
from policyd.model.events import ContainerEvent
from policyd.sources.errors import SourceError
from tests.engine.flowcon_builders import NOW, POLICY, flowcon, job, losses, snapshot

SCALE = 0.01
"""Wall seconds per policy second in the daemon tests: a 20 s interval runs every 0.2 s."""


def converged(interval: float) -> tuple[Container, ...]:
    """Two jobs deep in CL at this interval: FlowCon doubles the interval."""
    return (job("a", losses(0.01, 0.01), interval=interval, allocation=0.25),
            job("b", losses(0.02, 0.02), interval=interval, allocation=0.4))


def with_newcomer(interval: float) -> tuple[Container, ...]:
    """The converged jobs plus one that just started: back to the base interval."""
    return (*converged(interval), job("c", [], started_at=NOW - 5))


def one_to_limit(interval: float) -> tuple[Container, ...]:
    """Job a goes WL -> CL and gets a SetCpu to 0.25 (b keeps learning)."""
    return (job("a", losses(0.2, 0.01, 0.01)), job("b", losses(0.3, 0.3, 0.3)))


class FakeSource:
    """Builds snapshots from `containers(interval)`; records the intervals it was given;
    raises `fail` SourceErrors first when asked to."""

    def __init__(self, containers: Callable[[float], Sequence[Container]] = converged,
                 *, fail: int = 0) -> None:
        self.containers = containers
        self.fail = fail
        self.seen: list[tuple[str, float]] = []
        self._lock = threading.Lock()

    def snapshot(self, policies: Sequence[PolicyDocument], *,
                 intervals: Mapping[str, float] | None = None) -> Snapshot:
        (policy,) = policies
        interval = (intervals or {}).get(policy.name, 20.0)
        with self._lock:
            self.seen.append((policy.name, interval))
            if self.fail > 0:
                self.fail -= 1
                raise SourceError(kind="connection", url="http://fake", what="query_range",
                                  query="up", detail="connection refused")
        return snapshot(*self.containers(interval), intervals=intervals)

    def intervals(self, name: str = POLICY) -> list[float]:
        with self._lock:
            return [seconds for policy, seconds in self.seen if policy == name]


class FakeActuator:
    """Records actions; raises for every action when `error` is set; `block_seconds` makes
    each apply take that long (signals `entered`, then `done`)."""

    def __init__(self, *, error: str | None = None, block_seconds: float = 0.0) -> None:
        self.error = error
        self.block_seconds = block_seconds
        self.applied: list[Action] = []
        self.entered = threading.Event()
        self.done = threading.Event()

    def apply(self, action: Action, decision: Decision) -> None:
        self.entered.set()
        if self.block_seconds:
            time.sleep(self.block_seconds)
        if self.error:
            raise RuntimeError(self.error)
        self.applied.append(action)
        self.done.set()


class FakeEvents:
    """An EventSource whose events the test emits; `watch` returns when stopped."""

    def __init__(self) -> None:
        self._on_event: Callable[[ContainerEvent], None] | None = None
        self.watching = threading.Event()
        self.stopped = threading.Event()

    def watch(self, on_event: Callable[[ContainerEvent], None], stop: threading.Event) -> None:
        self._on_event = on_event
        self.watching.set()
        stop.wait()
        self.stopped.set()

    def emit(self, kind: str = "started", container: str = "c") -> None:
        assert self._on_event is not None, "not watching"
        self._on_event(ContainerEvent(kind=kind, container=container, node="w1",  # type: ignore[arg-type]
                                      time=NOW))


def wait_for(condition: Callable[[], bool], timeout: float = 5.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        time.sleep(0.01)


def policy_yaml(name: str = POLICY, *, interval: float = 20, dry_run: bool = False) -> str:
    return (f"apiVersion: policyd.io/v1alpha1\nkind: FlowCon\nmetadata: {{name: {name}}}\n"
            f"spec:\n  alpha: 0.05\n  interval_seconds: {interval}\n  beta: 2\n"
            f"  dry_run: {'true' if dry_run else 'false'}\n")


def write(path: Path, text: str) -> None:
    """Write `text` and make sure the modification time moves (coarse file systems)."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(text)
    stat = path.stat()
    if stat.st_mtime_ns <= before:
        import os  # noqa: PLC0415

        os.utime(path, ns=(stat.st_atime_ns, before + 1_000_000))


__all__ = ["NOW", "POLICY", "flowcon"]
