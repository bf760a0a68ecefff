"""`follow()`: the lines of a log file as it grows, like `tail -F`.

Owns following one path across the ways a log file changes under a reader:
* growth: read what was appended; a line is yielded once its newline arrives;
* rotation (the path is renamed or removed and a new file created there — logrotate's `create`,
  a restarted job that recreates its log): finish reading the old file, then read the new one
  from its start;
* truncation in place (logrotate's `copytruncate`, `> file`): start again from the beginning;
* a path that does not exist yet: wait for it.

It polls (no inotify: works the same on every filesystem, including network volumes shared
between a training container and a sidecar). It does not parse anything.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


def _identity(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def follow(
    path: str | os.PathLike[str],
    *,
    stop: threading.Event,
    poll_seconds: float = 0.5,
    chunk_bytes: int = 1 << 16,
) -> Iterator[str]:
    """Yield each complete line of `path` (without its line ending) until `stop` is set.

    Reads the file from its start, then follows it; decodes UTF-8, replacing invalid bytes.
    """
    path = Path(path)
    f: BinaryIO | None = None
    opened: tuple[int, int] | None = None
    pending = b""
    try:
        while not stop.is_set():
            if f is None:
                try:
                    f = open(path, "rb")  # noqa: SIM115 (kept open across iterations)
                except FileNotFoundError:
                    stop.wait(poll_seconds)
                    continue
                opened, pending = _identity(os.fstat(f.fileno())), b""
            chunk = f.read(chunk_bytes)
            if chunk:
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    yield line.rstrip(b"\r").decode("utf-8", "replace")
                continue
            # At the end of what is there: has the path moved on to another file, or shrunk?
            try:
                now = os.stat(path)
            except FileNotFoundError:
                now = None  # removed, not yet recreated: the writer may still append to ours
            if now is not None and _identity(now) != opened:
                if f.read(1):  # written to the old file after we looked: read that first
                    f.seek(-1, os.SEEK_CUR)
                    continue
                if pending:
                    yield pending.rstrip(b"\r").decode("utf-8", "replace")
                f.close()
                f = None
                continue
            if now is not None and now.st_size < f.tell():
                f.seek(0)
                pending = b""
                continue
            stop.wait(poll_seconds)
    finally:
        if f is not None:
            f.close()
