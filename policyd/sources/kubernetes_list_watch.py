"""List, then watch: one Kubernetes resource followed as `ContainerEvent`s (the
`policyd.tick.EventSource` protocol); the watch that `PodWatch` (pods starting and stopping)
and `JobWatch` (Jobs submitted held) share.

What differs between them is given, not subclassed: a `Listing` (the list calls, all
namespaces or one per configured namespace, and their selectors) and a `track` function
(an object -> `Tracked`, or None while it is not of interest: a pod not running, a Job not
held), with the event kinds an object makes when it becomes tracked and when it stops being
tracked (pods: started / stopped; Jobs: submitted / nothing). Objects are known by uid, so an
object is reported once each time it enters; the first list reports nothing (what exists at
start is the snapshot's business), a relist (after 410 Gone or a failure) the difference. What
is tracked now is also there to read (`tracked`), as an informer's cache is: the manager's
source takes the held Jobs from the Job watch instead of listing every Job each cycle, and the
source of every role its pods from the pod watch instead of listing them. A list or a watch
that fails (the API server unreachable, a 5xx) forgets the view until the next list succeeds:
a reader then lists for itself, and fails as the API does, rather than read a view that
nobody keeps up to date.

The loop itself (watch windows from the list's resourceVersion, 410 relists, back-off, the
prompt stop) is `policyd.clients.kubernetes_follow.Follower`'s, shared with the policy
custom resources' watch.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Unpack

from policyd.clients.kubernetes_follow import Follower, FollowOptions, Listing
from policyd.model.events import ContainerEvent, EventKind


@dataclass(frozen=True, kw_only=True)
class Tracked:
    """An object of interest: its uid, and the `container` and `node` its events name (the
    ids the snapshot uses); `item`, what the watch keeps of it for its readers (`JobWatch`:
    the pending job)."""

    uid: str
    container: str
    node: str
    item: Any = field(default=None, compare=False)


def event(kind: EventKind, tracked: Tracked, now: float) -> ContainerEvent:
    return ContainerEvent(kind=kind, container=tracked.container, node=tracked.node, time=now)


def diff(before: Mapping[str, Tracked], after: Mapping[str, Tracked], now: float, *,
         entered: EventKind | None, left: EventKind | None) -> list[ContainerEvent]:
    """The events between two views of the tracked objects (by uid; pure): `left` for those
    gone, then `entered` for those new; None: that change is not reported."""
    gone = [event(left, t, now) for uid, t in before.items() if uid not in after] \
        if left is not None else []
    new = [event(entered, t, now) for uid, t in after.items() if uid not in before] \
        if entered is not None else []
    return gone + new


class WatchOptions(FollowOptions, total=False):
    """`ListWatch`'s timing and seams, as a watch built on it passes them on."""

    clock: Callable[[], float]


class ListWatch(Follower):
    """One resource listed and watched (see the module docstring). `name` ("pod", "job")
    names it in the log; `relists` counts the lists made (1 + relists)."""

    def __init__(self, listing: Listing, track: Callable[[Mapping[str, Any]], Tracked | None],
                 *, entered: EventKind | None, left: EventKind | None, name: str,
                 clock: Callable[[], float] = time.time,
                 **options: Unpack[FollowOptions]) -> None:
        super().__init__(listing, label=f"kubernetes {name} watch", **options)
        self.track = track
        self.entered, self.left, self.name = entered, left, name
        self._clock = clock
        self._lock = threading.Lock()
        self._known: dict[str, Tracked] | None = None  # None: not listed yet (or stopped)
        self._current = False  # whether `_known` is kept up to date (`tracked`)

    def _tracked(self, items: Iterable[Mapping[str, Any]]) -> dict[str, Tracked]:
        return {t.uid: t for t in map(self.track, items) if t is not None}

    def tracked(self) -> list[Tracked] | None:
        """The objects tracked now, as the list and the watch's events since have shown them
        (a reader's copy); None while the watch does not run, has not listed yet, or has lost
        the API server since its last list."""
        with self._lock:
            if self._known is None or not self._current:
                return None
            return list(self._known.values())

    def view(self) -> list[Tracked] | None:
        """What a snapshot may read instead of a list, as an informer's cache: `tracked()`,
        but only when one watch call covers every object (all namespaces, or one). With several
        (one per namespace) the calls are watched in turn, so a change in one namespace waits
        up to a window while another is watched: too stale for a snapshot, which lists then."""
        if len(self.listing.calls) != 1:
            return None
        return self.tracked()

    def watch(self, on_event: Callable[[ContainerEvent], None], stop: threading.Event) -> None:
        def listed(items: list[dict[str, Any]]) -> None:
            fresh = self._tracked(items)
            with self._lock:
                known, self._known, self._current = self._known, fresh, True
            if known is not None:
                for found in diff(known, fresh, self._clock(), entered=self.entered,
                                  left=self.left):
                    on_event(found)

        def changed(kind: str, obj: dict[str, Any]) -> None:
            self._apply(kind, obj, on_event)

        def lost() -> None:
            with self._lock:
                self._current = False  # kept for the next list's difference, not to be read

        try:
            self.follow(listed, changed, stop, lost)
        finally:
            with self._lock:
                self._known = None  # no longer kept up to date

    def _apply(self, kind: str, obj: Mapping[str, Any],
               on_event: Callable[[ContainerEvent], None]) -> None:
        now = self.track(obj) if kind != "DELETED" else None
        uid = str((obj.get("metadata") or {}).get("uid", ""))
        with self._lock:
            known = self._known
            assert known is not None  # a change comes only after a list
            was = known.get(uid)
            if now is not None:
                known[uid] = now  # entered, or changed while tracked (the newest kept)
            elif was is not None:
                del known[uid]
        if now is not None and was is None:
            self._report(self.entered, now, on_event)
        elif now is None and was is not None:
            self._report(self.left, was, on_event)

    def _report(self, kind: EventKind | None, tracked: Tracked,
                on_event: Callable[[ContainerEvent], None]) -> None:
        if kind is not None:
            on_event(event(kind, tracked, self._clock()))
