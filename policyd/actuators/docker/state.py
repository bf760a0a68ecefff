"""What the Docker actuator remembers that Docker cannot hold on a running container.

Docker labels are fixed when a container is created, so policyd writes its markers as labels
only on containers it creates (the replacement after a migration: `migrated`, `converged_at`,
`rebalanced`, `migrated-from`, `last_action_at`); those are the facts docs/design.md requires on
the workload, and they survive anything. Two things happen to containers policyd does not
recreate, and are kept here instead, in a small JSON file (`DockerSettings.state_path`;
in memory only when it is None):

* `markers[name]`: `last_action_at` of a SetCpu (a cooldown convenience: a lost file means a
  cooldown restarts, which docs/design.md accepts) and MarkMigrated's `migrated` + `converged_at`
  (Algorithm 4 keeps a job in place). Losing these makes SpeCon ask for the job again, and at
  worst move it once more, after which the replacement carries the labels. Entries are keyed
  by container name plus its engine id, so a different container of the same name later does
  not inherit them.
* `markers[name]` also counts failed moves (`move_failures`, `move_failed_at`): the engine's
  back-off reads them (`policyd.engine.guards.move_backoff`).
* `migrations[name]`: the intent of a move in progress (from, to, started_at, the old
  container's id, the move's id that labels its replacement, and its `stage`: moving ->
  starting, or rolling_back; `policyd.actuators.move_recovery`), written before anything is
  created or stopped and cleared when the move is settled. Recovery reads it: without it,
  "old exited 0, new missing" cannot be told apart from a job that simply finished. Whether
  anything is pending is one look at this table, so the actuator checks it every cycle.

Writes are atomic (a temp file, fsync, `os.replace`). One process owns the file.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class ActuatorState:
    """The two tables above, loaded from and saved to `path` (None: memory only)."""

    path: Path | None = None
    markers: dict[str, dict[str, Any]] = field(default_factory=dict)
    migrations: dict[str, dict[str, Any]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def load(cls, path: Path | None) -> ActuatorState:
        """The saved state, or an empty one when there is no file yet; a corrupt file raises."""
        state = cls(path=path)
        if path is not None and path.exists():
            doc = json.loads(path.read_text())
            state.markers = dict(doc.get("markers", {}))
            state.migrations = dict(doc.get("migrations", {}))
        return state

    def record_marker(self, name: str, container_id: str, **values: Any) -> None:
        with self._lock:
            entry = self.markers.get(name)
            if entry is None or entry.get("id") != container_id:
                entry = {"id": container_id}
            entry.update(values)
            self.markers[name] = entry
            self._save()

    def begin_migration(self, name: str, *, from_node: str, to_node: str, at: float,
                        move_id: str = "", old_id: str = "") -> None:
        with self._lock:
            self.migrations[name] = {"from": from_node, "to": to_node, "started_at": at,
                                     "move_id": move_id, "old_id": old_id, "stage": "moving"}
            self._save()

    def set_stage(self, name: str, stage: str) -> None:
        """Mark the pending move of `name` as `stage` (starting, rolling_back)."""
        with self._lock:
            intent = self.migrations.get(name)
            if intent is not None and intent.get("stage") != stage:
                intent["stage"] = stage
                self._save()

    def stage(self, name: str) -> str:
        """The stage of the pending move of `name` ("none" without one; "moving" for a record
        written before stages were kept)."""
        intent = self.migrations.get(name)
        return "none" if intent is None else str(intent.get("stage") or "moving")

    def record_failed_move(self, name: str, container_id: str, at: float) -> int:
        """One more failed move of the container `container_id`; the count in a row."""
        entry = self.markers.get(name)
        failures = 1 + (int(entry.get("move_failures", 0))
                        if entry is not None and entry.get("id") == container_id else 0)
        self.record_marker(name, container_id, move_failures=failures, move_failed_at=at,
                           last_action_at=at)
        return failures

    def end_migration(self, name: str) -> None:
        with self._lock:
            if self.migrations.pop(name, None) is not None:
                self._save()

    def _save(self) -> None:
        if self.path is None:
            return
        doc = {"version": 1, "markers": self.markers, "migrations": self.migrations}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            with os.fdopen(fd, "w") as out:
                json.dump(doc, out, indent=1, sort_keys=True)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
