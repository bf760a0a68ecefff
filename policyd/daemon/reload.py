"""Hot reload of policy files: poll their modification times, re-validate on a change.

`PolicyWatcher.poll()` is called from the daemon's main loop every few seconds. When any file's
(mtime, size) changed since the last look, every file is validated again
(`policyd.policy.validate_files`); the result is either a complete valid set of policies, or
every problem found, in which case the caller keeps its last good policies. Polling is plain
and portable (no inotify); the cost is a `stat` per file per poll.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from policyd.engine.spec import PolicyDocument
from policyd.policy import Problem, validate_files

_Stamp = tuple[int, int] | None


@dataclass(frozen=True, kw_only=True)
class Reload:
    """What changed: the policies to run and every problem found. From the files alone, the
    policies when they are all valid, else only the problems (the caller keeps its last good
    set); with policy custom resources (`policy_set.PolicySources`), the whole set that still
    stands (the last good files and the good resources) with the files' problems."""

    policies: tuple[PolicyDocument, ...] = ()
    problems: tuple[Problem, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems


class PolicyPoller(Protocol):
    """What the daemon polls for policy changes: files (`PolicyWatcher`), or files and
    policy custom resources (`policy_set.PolicySources`)."""

    def poll(self) -> Reload | None: ...


class PolicyWatcher:
    """Watches `paths`; `poll()` returns a `Reload` when they changed, None otherwise."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = tuple(paths)
        self._stamps = self._stat()

    def load(self) -> Reload:
        """Validate the files now (the first load, or a forced one)."""
        self._stamps = self._stat()
        policies, problems = validate_files(self.paths)
        return Reload(policies=tuple(policies) if not problems else (),
                      problems=tuple(problems))

    def poll(self) -> Reload | None:
        if self._stat() == self._stamps:
            return None
        return self.load()

    def _stat(self) -> tuple[_Stamp, ...]:
        stamps: list[_Stamp] = []
        for path in self.paths:
            try:
                info = os.stat(path)
            except OSError:
                stamps.append(None)
            else:
                stamps.append((info.st_mtime_ns, info.st_size))
        return tuple(stamps)
