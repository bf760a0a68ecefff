"""SIGTERM and SIGINT set a stop event; the previous handlers come back afterwards.

The daemon never exits from a signal handler: the handler only sets `stop`, and the main loop
then shuts down in order (no new tick, the running one finishes, alerts flushed), so a signal
can never cut a decision in half. Handlers can only be installed from the main thread.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

LOG = logging.getLogger(__name__)
SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[threading.Event]:
    """Within the block, SIGTERM and SIGINT set `stop` (a second one is only logged)."""

    def handle(number: int, _: FrameType | None) -> None:
        name = signal.Signals(number).name
        if stop.is_set():
            LOG.warning("%s again: already stopping, letting the running tick finish", name)
        else:
            LOG.warning("%s: stopping after the running tick", name)
        stop.set()

    previous = {number: signal.signal(number, handle) for number in SIGNALS}
    try:
        yield stop
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
