"""A Kubernetes watch that stops when asked, not at its next event or the end of its window.

`watch.Watch().stream(...)` blocks in a read of the HTTP response until the server sends an
event or the window (`timeout_seconds`) ends; `Watch.stop()` only takes effect after the next
event (client < 36). `Stoppable` keeps the response that is open (`method(...)` wraps the list
method the stream calls) and `close_on(stop)` runs a helper thread that shuts that response
down the moment `stop` is set, so the blocked read returns at once: a daemon's shutdown (and
with it the release of the leader's Lease) does not wait up to a watch window.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any


def close_response(response: Any) -> None:
    """Shut an open streaming response down from another thread: its blocked read returns
    (urllib3's `shutdown`, 2.3+; else the socket itself)."""
    try:
        if hasattr(response, "shutdown"):
            response.shutdown()
            return
        sock = getattr(getattr(response, "connection", None), "sock", None)
        if sock is not None:
            sock.shutdown(socket.SHUT_RDWR)
    except (OSError, ValueError, AttributeError):
        pass  # already closed, or released to the pool


class Stoppable:
    """The watch response open now, shut down when `stop` is set (see the module docstring)."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self._open: Any = None
        self._lock = threading.Lock()

    def method(self, method: Callable[..., Any]) -> Callable[..., Any]:
        """`method`, keeping the response it returns (with its docstring: the client's Watch
        reads the return type from it)."""
        def call(*args: Any, **kwargs: Any) -> Any:
            response = method(*args, **kwargs)
            with self._lock:
                self._open = response
            if self.stop.is_set():  # stopped while the request was being made
                close_response(response)
            return response
        call.__doc__ = method.__doc__
        return call

    def done(self) -> None:
        """The stream ended by itself: nothing to shut down any more."""
        with self._lock:
            self._open = None

    def close_on_stop(self) -> threading.Thread:
        """Start the helper thread (a daemon thread: it ends when `stop` is set)."""
        def wait_and_close() -> None:
            self.stop.wait()
            with self._lock:
                opened, self._open = self._open, None
            if opened is not None:
                close_response(opened)
        thread = threading.Thread(target=wait_and_close, name="policyd-watch-stop",
                                  daemon=True)
        thread.start()
        return thread
