"""What `/healthz` and `/readyz` report: the daemon's liveness and readiness, with reasons.

Live: the daemon's main loop is running and has beaten recently (`beat` every loop turn).
Ready: policies are loaded and either the first snapshot succeeded or the backend is the
simulator (which cannot fail to observe). Notes (a rejected policy reload, say) are shown on
`/readyz` without making the daemon unready: it keeps working with its last good policies.
All methods are thread-safe; time comes from the injected clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Health:
    """Liveness, readiness and notes, updated by the daemon and read by the HTTP server."""

    def __init__(self, *, simulated: bool = False, stale_after_seconds: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._stale_after = stale_after_seconds
        self._simulated = simulated
        self._running = False
        self._beat = 0.0
        self._policies = False
        self._snapshot = False
        self._notes: dict[str, str] = {}

    def running(self, value: bool) -> None:
        with self._lock:
            self._running = value
            self._beat = self._clock()

    def beat(self) -> None:
        with self._lock:
            self._beat = self._clock()

    def policies_loaded(self) -> None:
        with self._lock:
            self._policies = True

    def snapshot_succeeded(self) -> None:
        with self._lock:
            self._snapshot = True

    def note(self, key: str, text: str | None) -> None:
        """Show `text` on /readyz under `key` (None removes it)."""
        with self._lock:
            if text is None:
                self._notes.pop(key, None)
            else:
                self._notes[key] = text

    def live(self) -> tuple[bool, str]:
        with self._lock:
            if not self._running:
                return False, "the daemon loop is not running"
            age = self._clock() - self._beat
            if age > self._stale_after:
                return False, f"the daemon loop has not run for {age:.0f} s"
            return True, "ok"

    def ready(self) -> tuple[bool, str]:
        with self._lock:
            notes = [f"{k}: {v}" for k, v in sorted(self._notes.items())]
            if not self._policies:
                reason = "policies are not loaded yet"
                ok = False
            elif not (self._snapshot or self._simulated):
                reason, ok = "no snapshot has succeeded yet", False
            else:
                reason, ok = "ok", True
            return ok, "\n".join([reason, *notes])
