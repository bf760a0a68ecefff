"""`Checkpointer`: stop on SIGTERM at a step boundary with a checkpoint, and resume from it.

Owns the checkpoint protocol that policyd's migration relies on (README.md, "Checkpoint
protocol"): policyd (or Kubernetes, or `docker stop`) sends SIGTERM; the handler only sets a flag;
the training loop notices it between two steps, writes `directory/step-<N>.ckpt` atomically,
points `directory/latest` at it and exits 0 (or `stop_exit_code`, for Kubernetes Jobs) within the
grace period; the replacement process, on
any node that mounts the same volume, calls `resume()` and goes on from step N.

The stop request can be caught before the Checkpointer exists: `catch_stop_signals()` on the
job's first lines returns the event the Checkpointer then shares (`stop_requested=`), so a
SIGTERM during imports or the resume is not lost (README.md, "SIGTERM first").

It does not know how to serialise anything: `save(path)` and `load(path)` are the caller's
(`torch.save` / `torch.load` in the example), so this module imports no framework.

Atomicity: `save` writes a hidden temp file in the same directory, which is fsynced, renamed over
the final name with `os.replace` (atomic on POSIX), and the directory is fsynced. A process killed
mid-save leaves only a temp file, which `resume()` ignores and the next save removes; the previous
checkpoint is untouched. Of the complete checkpoints the newest `keep` are kept, and never the
newest one, nor the one just written, is deleted.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Generic, TypeAlias, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
_Handler: TypeAlias = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None

LATEST = "latest"
"""The pointer file: one line, the file name of the newest complete checkpoint."""
_COMPLETE = re.compile(r"^step-(\d+)\.ckpt$")
_TEMP = re.compile(r"^\.(step-\d+\.ckpt|latest)\.[0-9a-f]+\.tmp$")


def checkpoint_name(step: int) -> str:
    return f"step-{step}.ckpt"


def catch_stop_signals(signals: Sequence[signal.Signals] = (signal.SIGTERM,)
                       ) -> threading.Event:
    """Install, first thing in a job (before its slow imports), handlers that only set the
    returned event; hand it to `Checkpointer(stop_requested=...)`. A SIGTERM that arrives
    before the model is even loaded is then a stop at the first step boundary, with a
    checkpoint, instead of a death without one. Standard library only: call it before
    importing torch. Main thread only."""
    event = threading.Event()
    for sig in signals:
        signal.signal(sig, lambda signum, frame: event.set())
    return event


class CheckpointError(RuntimeError):
    """Checkpoints exist but none could be loaded, or `save` did not write its file."""


@dataclass(frozen=True, kw_only=True)
class Resumed(Generic[T]):
    """What `resume()` found: the step of the checkpoint, its file, and what `load` returned."""

    step: int
    path: Path
    state: T


class Checkpointer(Generic[T]):
    """Checkpoints of one training job in `directory` (created if missing).

    * `save(path)` writes the job's state to `path` (one file); `load(path)` reads it back.
    * `keep`: complete checkpoints kept (>= 1).
    * `every_steps`: `step()` also saves every that many steps (None: only when stopping).
    * `grace_seconds`: the time the orchestrator waits between SIGTERM and SIGKILL
      (`terminationGracePeriodSeconds`, `docker stop -t`); a stop that takes longer is logged as
      an error, and `remaining_seconds()` tells the loop how much is left.
    * `signals`: the signals that request a stop (handlers are installed now, restored by
      `close()`; this needs the main thread). Pass `()` and call `request_stop()` yourself
      elsewhere.
    * `stop_exit_code`: the exit status after a stop's checkpoint. 0 is the protocol ("the
      checkpoint is written"; policyd's Docker and bare-pod moves require it). In a Kubernetes
      Job use 143 (128 + SIGTERM) with a podFailurePolicy rule that ignores it: a Job counts an
      exit 0 as done, and the moved job would be Complete instead of replaced.
    * `stop_requested`: a `threading.Event` the job's own first-line SIGTERM handler sets
      (`catch_stop_signals()`), so a SIGTERM that came during imports, data loading or the
      resume counts: the loop checkpoints at its first step boundary. Without one, the
      handlers are installed first thing in the constructor.
    * `clock`: monotonic seconds (a seam for tests).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        save: Callable[[Path], object],
        load: Callable[[Path], T],
        keep: int = 3,
        every_steps: int | None = None,
        grace_seconds: float = 30.0,
        signals: Sequence[signal.Signals] = (signal.SIGTERM,),
        clock: Callable[[], float] = time.monotonic,
        stop_exit_code: int = 0,
        stop_requested: threading.Event | None = None,
    ) -> None:
        if keep < 1:
            raise ValueError(f"keep must be >= 1, got {keep}")
        if every_steps is not None and every_steps < 1:
            raise ValueError(f"every_steps must be >= 1 or None, got {every_steps}")
        if grace_seconds <= 0:
            raise ValueError(f"grace_seconds must be positive, got {grace_seconds}")
        if not 0 <= stop_exit_code <= 255:
            raise ValueError(f"stop_exit_code must be in 0..255, got {stop_exit_code}")
        # First thing after the argument checks (no I/O before it): a SIGTERM from now on is
        # a stop request, never the default (death without a checkpoint) nor, as PID 1 in a
        # container without an init, ignored.
        self._clock = clock
        self._stop = stop_requested if stop_requested is not None else threading.Event()
        self._stop_at: float | None = clock() if self._stop.is_set() else None
        self._previous: dict[signal.Signals, _Handler] = {}
        for sig in signals:
            self._previous[sig] = signal.signal(sig, self._on_signal)
        self.stop_exit_code = stop_exit_code
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._save, self._load = save, load
        self._keep, self._every = keep, every_steps
        self._grace = grace_seconds
        self._last_saved: int | None = None

    # -- stopping -----------------------------------------------------------------------------

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # Runs between two bytecodes of the main thread: set a flag, nothing else.
        self.request_stop()

    def request_stop(self) -> None:
        """Ask the loop to checkpoint and stop at the next step boundary (what SIGTERM does)."""
        if self._stop_at is None:
            self._stop_at = self._clock()
        self._stop.set()

    def should_stop(self) -> bool:
        """True once a stop was requested: save and leave the loop."""
        if self._stop.is_set() and self._stop_at is None:  # set by the job's early handler
            self._stop_at = self._clock()
        return self._stop.is_set()

    def remaining_seconds(self) -> float | None:
        """Seconds left of the grace period since the stop request (None: no stop requested)."""
        if self._stop_at is None:
            return None
        return self._grace - (self._clock() - self._stop_at)

    def step(self, step: int) -> None:
        """Call after each optimizer step with the steps done: saves every `every_steps`, and on
        a stop request saves (unless this step is saved already) and raises
        SystemExit(`stop_exit_code`)."""
        due = self._every is not None and step % self._every == 0
        if (due or self.should_stop()) and self._last_saved != step:
            self.save(step)
        if self.should_stop():
            log.info("checkpointed at step %d; exiting %d as asked", step, self.stop_exit_code)
            raise SystemExit(self.stop_exit_code)

    # -- writing ------------------------------------------------------------------------------

    def save(self, step: int) -> Path:
        """Write the checkpoint of `step` atomically, point `latest` at it, prune old ones."""
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        final = self.directory / checkpoint_name(step)
        tmp = self.directory / f".{final.name}.{uuid.uuid4().hex}.tmp"
        try:
            self._save(tmp)
            if not tmp.is_file():
                raise CheckpointError(f"save({tmp}) returned without writing that file")
            _fsync_path(tmp)
            os.replace(tmp, final)
            _write_atomically(self.directory / LATEST, final.name + "\n")
            _fsync_path(self.directory)
        finally:
            tmp.unlink(missing_ok=True)
        self._last_saved = step
        self._prune(final)
        left = self.remaining_seconds()
        if left is not None and left < 0:
            log.error(
                "checkpoint of step %d finished %.1f s after the grace period of %.1f s: the "
                "orchestrator may have killed us first; raise the grace period",
                step, -left, self._grace,
            )
        return final

    def _prune(self, written: Path) -> None:
        complete = self.checkpoints()
        keep = {p for _, p in complete[-self._keep :]} | {written}
        for _, path in complete:
            if path not in keep:
                path.unlink(missing_ok=True)
        for entry in self.directory.iterdir():
            if _TEMP.match(entry.name):  # left by a writer that died; we are the writer now
                entry.unlink(missing_ok=True)

    # -- reading ------------------------------------------------------------------------------

    def checkpoints(self) -> list[tuple[int, Path]]:
        """The complete checkpoints, oldest (lowest step) first; temp files are not listed."""
        found = []
        for entry in self.directory.iterdir():
            m = _COMPLETE.match(entry.name)
            if m and entry.is_file():
                found.append((int(m.group(1)), entry))
        return sorted(found)

    def resume(self) -> Resumed[T] | None:
        """Load the newest complete checkpoint; None when there is none (a fresh start).

        A checkpoint that fails to load is renamed `*.unloadable` (kept for inspection, never
        tried again) and the next older one is tried; if none loads, CheckpointError.
        """
        errors = []
        for step, path in reversed(self.checkpoints()):
            try:
                state = self._load(path)
            except Exception as exc:
                log.error("checkpoint %s does not load (%r); trying an older one", path, exc)
                errors.append(f"{path.name}: {exc!r}")
                os.replace(path, path.with_name(path.name + ".unloadable"))
                continue
            self._last_saved = step
            log.info("resuming from %s (step %d)", path, step)
            return Resumed(step=step, path=path, state=state)
        if errors:
            raise CheckpointError("no checkpoint could be loaded: " + "; ".join(errors))
        return None

    # -- lifetime -----------------------------------------------------------------------------

    def close(self) -> None:
        """Restore the signal handlers that were there before."""
        for sig, previous in self._previous.items():
            # None: the handler was not set from Python; the default is the closest we can do.
            signal.signal(sig, signal.SIG_DFL if previous is None else previous)
        self._previous.clear()

    def __enter__(self) -> Checkpointer[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
