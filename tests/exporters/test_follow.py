"""follow(): a log file that grows, is rotated, truncated, or appears late (in-process)."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from policyd_exporters.follow import follow

POLL = 0.01


class Tail:
    """follow() on a thread; `take(n)` returns the next n lines."""

    def __init__(self, path: Path) -> None:
        self.stop = threading.Event()
        self.lines: queue.Queue[str] = queue.Queue()
        self.thread = threading.Thread(target=self._run, args=(path,), daemon=True)
        self.thread.start()

    def _run(self, path: Path) -> None:
        for line in follow(path, stop=self.stop, poll_seconds=POLL):
            self.lines.put(line)

    def take(self, n: int) -> list[str]:
        return [self.lines.get(timeout=5) for _ in range(n)]

    def nothing_more(self) -> bool:
        try:
            extra = self.lines.get(timeout=10 * POLL)
        except queue.Empty:
            return True
        raise AssertionError(f"unexpected line {extra!r}")


@pytest.fixture
def log(tmp_path: Path) -> Iterator[tuple[Path, Tail]]:
    path = tmp_path / "train.log"
    tail = Tail(path)
    yield path, tail
    tail.stop.set()
    tail.thread.join(timeout=5)
    assert not tail.thread.is_alive()


def append(path: Path, text: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)


def test_waits_for_the_file_then_reads_it_as_it_grows(log: tuple[Path, Tail]) -> None:
    path, tail = log
    assert tail.nothing_more()
    append(path, "a\nb\n")
    assert tail.take(2) == ["a", "b"]
    append(path, "c\r\n")
    assert tail.take(1) == ["c"]


def test_a_line_is_yielded_once_complete(log: tuple[Path, Tail]) -> None:
    path, tail = log
    append(path, "loss=1.")
    assert tail.nothing_more()
    append(path, "5\n")
    assert tail.take(1) == ["loss=1.5"]


def test_rotation_finishes_the_old_file_then_reads_the_new_one(log: tuple[Path, Tail]) -> None:
    path, tail = log
    append(path, "old-1\n")
    assert tail.take(1) == ["old-1"]
    with open(path, "a", encoding="utf-8") as writer:  # the job still holds the old file
        os.rename(path, path.with_suffix(".log.1"))
        writer.write("old-2\n")
    append(path, "new-1\n")
    assert tail.take(2) == ["old-2", "new-1"]


def test_removed_and_recreated(log: tuple[Path, Tail]) -> None:
    path, tail = log
    append(path, "first\n")
    assert tail.take(1) == ["first"]
    path.unlink()
    assert tail.nothing_more()
    append(path, "second\n")
    assert tail.take(1) == ["second"]


def test_truncation_starts_again(log: tuple[Path, Tail]) -> None:
    path, tail = log
    append(path, "a-long-first-line\n")
    assert tail.take(1) == ["a-long-first-line"]
    with open(path, "r+", encoding="utf-8") as f:  # copytruncate: same file, emptied
        f.truncate(0)
    assert tail.nothing_more()
    append(path, "x\n")
    assert tail.take(1) == ["x"]
