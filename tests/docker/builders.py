"""Small builders for the Docker unit tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from policyd.actuators.docker import DockerActuator, DockerHost, DockerSettings
from policyd.model import Decision, MarkMigrated, Migrate, SetCpu
from tests.docker.fakes import FakeEngine, as_clients


def settings(state_path: Path | None = None, **kw: Any) -> DockerSettings:
    args: dict[str, Any] = {"backoff_seconds": 0.5, "retries": 3, "confirm_seconds": 0.0, **kw}
    return DockerSettings(hosts={"a": DockerHost(url="unix:///a.sock"),
                                 "b": DockerHost(url="unix:///b.sock")},
                          state_path=state_path, **args)


class Clock:
    """A clock that the fake sleep advances."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def actuator(a: FakeEngine, b: FakeEngine | None = None, *more: FakeEngine,
             clock: Clock | None = None, state_path: Path | None = None,
             **kw: Any) -> DockerActuator:
    """An actuator on fake engines named a, b (a fresh one when not given), then c, d, ..."""
    clock = clock or Clock()
    engines = {"a": a, "b": b if b is not None else FakeEngine(),
               **{chr(ord("c") + i): engine for i, engine in enumerate(more)}}
    return DockerActuator(settings(state_path, **kw), clients=as_clients(**engines),
                          clock=clock, sleep=clock.sleep)


def decision(policy: str = "p") -> Decision:
    return Decision(policy=policy, kind="FlowCon", time=0.0, actions=(), assessments=(),
                    next_interval=10.0)


def set_cpu(fraction: float = 0.25, mode: Any = "shares", container: str = "job",
            node: str = "a") -> SetCpu:
    return SetCpu(policy="p", container=container, node=node, fraction=fraction, mode=mode,
                  reason="test")


def migrate(container: str = "job", *, rebalance: bool = False,
            converged_at: float | None = 1_700_000_000.0,
            grace_seconds: float | None = None) -> Migrate:
    return Migrate(policy="p", container=container, from_node="a", to_node="b",
                   reason="converged", rebalance=rebalance, converged_at=converged_at,
                   grace_seconds=grace_seconds)


def mark(container: str = "job") -> MarkMigrated:
    return MarkMigrated(policy="p", container=container, node="a", converged_at=1234.5,
                        reason="stays")
