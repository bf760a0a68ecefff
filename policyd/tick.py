"""One tick of policyd: collect -> decide -> apply.

The daemon calls `tick` from APScheduler, the simulator from its virtual clock, and `plan` with
a dry-run actuator, so every path runs the same three steps with the same guarantees: the engine
sees one snapshot, and the actuator receives the decision's actions in order. Dry-run is decided
here, once for every path: a decision of a policy marked `dry_run: true` goes to the dry-run
actuator (it records and logs, changes nothing), never to the real one. This module imports no
scheduler and reads no clock: time lives in the snapshot.

The cyclic garbage collector is paused while the engine decides (`policyd.fastjson.paused_gc`,
as the sources pause it while they build the snapshot): a decision makes a few objects per
container (assessments, forecasts, actions), none in a reference cycle, and at 10,000 containers
the collector's passes over them and the snapshot (one or two full passes a decision) took
0.16-0.17 of its 0.9-1.3 CPU s on a slow host, 0.01-0.02 s paused, counting the young
collection the pause defers (benchmarks/README.md, "forecast_scale.py"). They are still freed
by reference counting; the collector runs again between decisions. The actuator's calls are
not under the pause.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from policyd.engine import decide
from policyd.engine.spec import PolicyDocument
from policyd.fastjson import paused_gc
from policyd.model import Action, Decision, Snapshot
from policyd.model.codec import action_to_dict
from policyd.model.events import ContainerEvent

LOG = logging.getLogger(__name__)


class Source(Protocol):
    """Turns the world into a snapshot (Prometheus, cAdvisor, Docker, Kubernetes, the simulator,
    a snapshot file)."""

    def snapshot(self, policies: Sequence[PolicyDocument], *,
                 intervals: Mapping[str, float] | None = None) -> Snapshot:
        """The cluster now, with the history the given policies need. `intervals` are the
        policies' current (backed-off) intervals, which only the scheduler knows; a policy
        missing from it runs at its base interval."""
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


@dataclass
class DryRunActuator:
    """Records every action (newest last, up to `keep`) and logs it; changes nothing."""

    keep: int = 10_000
    applied: list[Action] = field(default_factory=list)

    def apply(self, action: Action, decision: Decision) -> None:
        LOG.info("dry run, not applied: %s", action_to_dict(action))
        self.applied.append(action)
        if len(self.applied) > self.keep:
            del self.applied[: len(self.applied) - self.keep]


def close_source(source: object) -> None:
    """Close `source` when it can be closed (its query threads, HTTP sessions and engine
    connections: a source's `close()`); sources that wrap another pass it on. The daemon calls
    it once no tick runs any more."""
    close = getattr(source, "close", None)
    if callable(close):
        close()


@dataclass(frozen=True)
class FixedSource:
    """A source that always answers with one snapshot (a snapshot file, for `policyd plan`)."""

    fixed: Snapshot

    def snapshot(self, policies: Sequence[PolicyDocument], *,
                 intervals: Mapping[str, float] | None = None) -> Snapshot:
        return self.fixed


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What one tick did: the decision, and the actions that failed with the reason."""

    decision: Decision
    failed: tuple[tuple[Action, str], ...] = ()


def observe(source: Source, policy: PolicyDocument,
            interval_seconds: float | None = None) -> Snapshot:
    """The snapshot for one tick of `policy` at `interval_seconds` (None: as the source has it);
    the snapshot carries that interval whether or not the source wrote it in."""
    if interval_seconds is None:
        return source.snapshot([policy])
    snapshot = source.snapshot([policy], intervals={policy.name: interval_seconds})
    if snapshot.intervals.get(policy.name) != interval_seconds:
        snapshot = replace(snapshot,
                           intervals={**snapshot.intervals, policy.name: interval_seconds})
    return snapshot


def tick(source: Source, policy: PolicyDocument, actuator: Actuator, *,
         interval_seconds: float | None = None, peers: Sequence[PolicyDocument] = (),
         dry_run: Actuator | None = None, forecasts: bool = True) -> Outcome:
    """Collect a snapshot, decide, and apply every action; a failing action does not stop the
    others (each is independent: a CPU limit, a migration).

    `peers`: every policy running beside `policy` (ownership of shared containers). A dry-run
    decision goes to `dry_run` (a fresh `DryRunActuator` when None), never to `actuator`.
    `forecasts`: the decision carries every job's forecast (`policyd.engine.decide`).
    """
    snapshot = observe(source, policy, interval_seconds)
    with paused_gc():  # no collector passes over the decision's objects (module docstring)
        decision = decide(policy, snapshot, peers=peers, forecasts=forecasts)
    return act(decision, actuator, dry_run=dry_run)


def act(decision: Decision, actuator: Actuator, *, dry_run: Actuator | None = None) -> Outcome:
    """Apply every action of `decision` (a dry run's to `dry_run`, a fresh `DryRunActuator`
    when None); a failing action does not stop the others."""
    target = (dry_run or DryRunActuator()) if decision.dry_run else actuator
    failed: list[tuple[Action, str]] = []
    for action in decision.actions:
        try:
            target.apply(action, decision)
        except Exception as exc:  # an actuator failure is reported, never fatal to the tick
            failed.append((action, f"{type(exc).__name__}: {exc}"))
    return Outcome(decision=decision, failed=tuple(failed))
