"""How far a long command has got (many scenarios, sweeps), told on stderr as it goes.

On a terminal a one-line bar is redrawn in place: `[#####.....] 3/10 label`. Anywhere else (a
pipe, a CI log, a file) a redrawn bar is noise, so one plain line is written as each item
finishes instead: `policyd simulate: 3/10 flowcon-random-10: FlowCon 4.9% sooner than NA`.
Both go to the stream given (stderr), never into the command's output, so a JSON or text
report can be piped or redirected as it is.
"""

from __future__ import annotations

from typing import TextIO


class Progress:
    def __init__(self, total: int, stream: TextIO, *, prefix: str = "", width: int = 24) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.stream = stream
        self.prefix = prefix
        self.width = width
        self.bar = stream.isatty()

    def start(self, label: str) -> None:
        """Announce the item about to run (the bar shows what is done so far)."""
        if not self.bar:
            return
        filled = self.width * self.done // self.total
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(f"\r\033[K[{bar}] {self.done}/{self.total} {label}")
        self.stream.flush()

    def finish(self, message: str) -> None:
        """One item is done; off a terminal, say so with `message` (what came of it)."""
        self.done += 1
        if not self.bar:
            self.stream.write(f"{self.prefix}{self.done}/{self.total} {message}\n")
            self.stream.flush()

    def close(self) -> None:
        if self.bar:
            self.stream.write(f"\r\033[K[{'#' * self.width}] {self.total}/{self.total} done\n")
            self.stream.flush()
