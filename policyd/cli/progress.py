"""A one-line progress bar for long work on a terminal (sweeps, many scenarios).

On a terminal it redraws `[#####.....] 3/10 label` in place; elsewhere (a pipe, a CI log, a
test) it stays silent so that machine-readable output is never interleaved with it.
"""

from __future__ import annotations

from typing import TextIO


class Progress:
    def __init__(self, total: int, stream: TextIO, *, width: int = 24) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.stream = stream
        self.width = width
        self.enabled = stream.isatty()

    def step(self, label: str) -> None:
        """Announce the item about to run (the bar shows what is done so far)."""
        if not self.enabled:
            return
        filled = self.width * self.done // self.total
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(f"\r\033[K[{bar}] {self.done}/{self.total} {label}")
        self.stream.flush()
        self.done += 1

    def close(self) -> None:
        if self.enabled:
            self.stream.write(f"\r\033[K[{'#' * self.width}] {self.total}/{self.total} done\n")
            self.stream.flush()
