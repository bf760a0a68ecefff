"""The daemon's seams: what it needs from a source and from the alerter, as small Protocols.

`SnapshotSource` is `policyd.tick.Source` plus the policies' current intervals, which only the
daemon knows (FlowCon's back-off is decided by the engine from the interval in the snapshot).
`bind_intervals` adapts one to the other for one tick, and makes sure the snapshot carries the
daemon's intervals even when a source does not fill them in itself. `OutcomeObserver` is what
the daemon calls after every tick: `policyd.alerts.Alerter` is one.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Protocol

from policyd.engine.spec import PolicyDocument
from policyd.model import Snapshot
from policyd.tick import Outcome, Source

LOG = logging.getLogger(__name__)


class SnapshotSource(Protocol):
    """A source that takes the policies' current intervals (PrometheusSource is one)."""

    def snapshot(self, policies: Sequence[PolicyDocument], *,
                 intervals: Mapping[str, float] | None = None) -> Snapshot: ...


class OutcomeObserver(Protocol):
    """Told about every tick's outcome (alerts); `flush` on shutdown."""

    def on_outcome(self, outcome: Outcome, now: float) -> None: ...

    def flush(self) -> None: ...


def flush_observer(observer: OutcomeObserver | None) -> None:
    """`observer.flush()` on shutdown (resolves what is still firing); a failure is logged, so
    the daemon still stops cleanly."""
    if observer is None:
        return
    try:
        observer.flush()
    except Exception:
        LOG.exception("flushing alerts failed")


def _takes_intervals(source: object) -> bool:
    try:
        parameters = inspect.signature(source.snapshot).parameters  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        return False
    return "intervals" in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())


class _Bound:
    """`source` as a `policyd.tick.Source` for one tick, with `intervals` bound."""

    def __init__(self, source: SnapshotSource | Source, intervals: Mapping[str, float]) -> None:
        self._source = source
        self._intervals = dict(intervals)

    def snapshot(self, policies: Sequence[PolicyDocument]) -> Snapshot:
        if _takes_intervals(self._source):
            snapshot = self._source.snapshot(  # type: ignore[call-arg]
                policies, intervals=self._intervals)
        else:
            snapshot = self._source.snapshot(policies)
        merged = {**snapshot.intervals, **self._intervals}
        if merged != dict(snapshot.intervals):
            snapshot = replace(snapshot, intervals=merged)
        return snapshot


def bind_intervals(source: SnapshotSource | Source, intervals: Mapping[str, float]) -> Source:
    """A `policyd.tick.Source` that asks `source` with `intervals` and returns a snapshot
    carrying them."""
    return _Bound(source, intervals)
