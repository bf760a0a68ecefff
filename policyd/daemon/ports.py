"""The daemon's seams beyond the tick's: what it tells the alerter after every tick.

Sources and actuators meet the daemon through `policyd.tick.Source` and
`policyd.tick.Actuator`; `OutcomeObserver` is what the daemon calls after every tick
(`policyd.alerts.Alerter` is one).
"""

from __future__ import annotations

import logging
from typing import Protocol

from policyd.tick import Outcome

LOG = logging.getLogger(__name__)


class OutcomeObserver(Protocol):
    """Told about every tick's outcome (alerts); `flush` on shutdown."""

    def on_outcome(self, outcome: Outcome, now: float) -> None: ...

    def flush(self) -> None: ...


class Observers:
    """Several observers as one (the alerts, a backend's own), told in order; one that fails
    does not keep the outcome from the next."""

    def __init__(self, *observers: OutcomeObserver) -> None:
        self.observers = observers

    def on_outcome(self, outcome: Outcome, now: float) -> None:
        for observer in self.observers:
            try:
                observer.on_outcome(outcome, now)
            except Exception:
                LOG.exception("observer %s failed on the outcome of policy %s",
                              type(observer).__name__, outcome.decision.policy)

    def flush(self) -> None:
        for observer in self.observers:
            flush_observer(observer)


def joined(*observers: OutcomeObserver | None) -> OutcomeObserver | None:
    """The observers given (None for none, the one itself for one)."""
    present = [o for o in observers if o is not None]
    return None if not present else present[0] if len(present) == 1 else Observers(*present)


def flush_observer(observer: OutcomeObserver | None) -> None:
    """`observer.flush()` on shutdown (resolves what is still firing); a failure is logged, so
    the daemon still stops cleanly."""
    if observer is None:
        return
    try:
        observer.flush()
    except Exception:
        LOG.exception("flushing alerts failed")
