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


def flush_observer(observer: OutcomeObserver | None) -> None:
    """`observer.flush()` on shutdown (resolves what is still firing); a failure is logged, so
    the daemon still stops cleanly."""
    if observer is None:
        return
    try:
        observer.flush()
    except Exception:
        LOG.exception("flushing alerts failed")
