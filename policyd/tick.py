"""One tick of policyd: collect -> decide -> apply.

The daemon calls `tick` from APScheduler, the simulator from its virtual clock, and `plan` with a
dry-run actuator, so every path runs the same three steps with the same guarantees: the engine
sees one snapshot, and the actuator receives the decision's actions in order. This module
imports no scheduler and reads no clock: time lives in the snapshot.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from policyd.engine import decide
from policyd.engine.spec import PolicyDocument
from policyd.model import Action, Decision, Snapshot
from policyd.model.events import ContainerEvent


class Source(Protocol):
    """Turns the world into a snapshot (Prometheus, cAdvisor, the simulator)."""

    def snapshot(self, policies: Sequence[PolicyDocument]) -> Snapshot:
        """The cluster now, with the history the given policies need."""
        ...


class Actuator(Protocol):
    """Turns one action into an effect (Docker, Kubernetes, dry-run, the simulator)."""

    def apply(self, action: Action, decision: Decision) -> None:
        """Carry out `action` (one of `decision.actions`); raise to report a failure."""
        ...


class EventSource(Protocol):
    """Reports containers starting and stopping as they happen (Algorithm 2's listener)."""

    def watch(self, on_event: Callable[[ContainerEvent], None], stop: threading.Event) -> None:
        """Call `on_event` for every event until `stop` is set; returns then. Reconnects by
        itself after transient errors (it runs on its own thread)."""
        ...


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What one tick did: the decision, and the actions that failed with the reason."""

    decision: Decision
    failed: tuple[tuple[Action, str], ...] = ()


def tick(source: Source, policy: PolicyDocument, actuator: Actuator) -> Outcome:
    """Collect a snapshot, decide, and apply every action; a failing action does not stop the
    others (each is independent: a CPU limit, a migration)."""
    decision = decide(policy, source.snapshot([policy]))
    failed: list[tuple[Action, str]] = []
    for action in decision.actions:
        try:
            actuator.apply(action, decision)
        except Exception as exc:  # an actuator failure is reported, never fatal to the tick
            failed.append((action, f"{type(exc).__name__}: {exc}"))
    return Outcome(decision=decision, failed=tuple(failed))
