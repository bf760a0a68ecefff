"""Workers by the cores they have free (or to spare), most first, kept sorted as placements
change them: where a job goes is found without a pass over every worker.

Admission (`policyd.engine.admission.place`) and Deadline's moves
(`policyd.engine.deadline_moves`) both place one job after another on the roomiest worker
that takes it; with a pass over every worker for every job, 1,000 held jobs on 10,000 workers
cost ten million comparisons a cycle. Here a worker's figure changes in O(log n) lookups (a
sorted list: the shift of an insertion is a memory move), and the roomiest is the first.
Ties go by name, or to a preferred worker (the one a job is held on). Pure.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping


class Roomiest:
    """`cores` by worker (a copy, kept up to date in `cores`), in order: most first, then by
    name."""

    def __init__(self, cores: Mapping[str, float]) -> None:
        self.cores = dict(cores)
        self._order = sorted((-value, name) for name, value in self.cores.items())

    def __iter__(self) -> Iterator[str]:
        """The workers, roomiest first."""
        return (name for _, name in self._order)

    def first(self, prefer: str | None = None) -> str | None:
        """The roomiest worker (`prefer` when it has as many cores as the roomiest); None when
        there is none."""
        if not self._order:
            return None
        most, name = self._order[0]
        if prefer is not None and prefer != name and self.cores.get(prefer) == -most:
            return prefer
        return name

    def change(self, name: str, by: float) -> None:
        """`name`'s cores changed by `by`."""
        self.set(name, self.cores[name] + by)

    def set(self, name: str, cores: float) -> None:
        """`name`'s cores are now `cores`."""
        del self._order[bisect.bisect_left(self._order, (-self.cores[name], name))]
        self.cores[name] = cores
        bisect.insort(self._order, (-self.cores[name], name))
