"""`MergedEvents`: several event sources as one `policyd.tick.EventSource`.

A daemon has one listener; a backend that follows more than one thing (Kubernetes' manager:
pods starting and stopping, Jobs submitted held) runs each source's `watch` on a thread of its
own, all calling the same `on_event` (which must therefore be thread-safe, as the daemon's is:
Docker's listener already calls it from one thread per host) and all stopped by the same `stop`
Event. `watch` returns when `stop` is set, once every one of them has returned (each is given
`join_seconds`, as `DockerEvents` gives its hosts' threads). A source that fails is logged and
the others go on: one broken watch must not blind the daemon to the rest.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from policyd.model.events import ContainerEvent
from policyd.tick import EventSource

LOG = logging.getLogger(__name__)


class MergedEvents:
    """The events of every source in `sources` (see the module docstring)."""

    def __init__(self, *sources: EventSource, join_seconds: float = 5.0) -> None:
        self.sources = sources
        self.join_seconds = join_seconds

    def watch(self, on_event: Callable[[ContainerEvent], None], stop: threading.Event) -> None:
        def run(source: EventSource) -> None:
            try:
                source.watch(on_event, stop)
            except Exception:
                LOG.exception("event source %s stopped", type(source).__name__)

        threads = [threading.Thread(target=run, args=(source,), daemon=True,
                                    name=f"policyd-events-{type(source).__name__}")
                   for source in self.sources]
        for thread in threads:
            thread.start()
        stop.wait()
        for thread in threads:
            thread.join(timeout=self.join_seconds)
