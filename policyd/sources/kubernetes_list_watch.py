"""List, then watch: one Kubernetes resource followed as `ContainerEvent`s (the
`policyd.tick.EventSource` protocol); the loop that `PodWatch` (pods starting and stopping) and
`JobWatch` (Jobs submitted held) share.

What differs between them is given, not subclassed: a `Listing` (the list calls, all
namespaces or one per configured namespace, and their selectors) and a `track` function
(an object -> `Tracked`, or None while it is not of interest: a pod not running, a Job not
held), with the event kinds an object makes when it becomes tracked and when it stops being
tracked (pods: started / stopped; Jobs: submitted / nothing). Objects are known by uid, so an
object is reported once each time it enters; the first list reports nothing (what exists at
start is the snapshot's business).

The loop: list, then `watch.Watch().stream(<list call>, resource_version=<list's>,
timeout_seconds=...)` in windows of `window_seconds` (with `timeout_seconds` set the client
does not resume by itself and raises ApiException(410) at once); each window resumes from the
last resourceVersion seen. 410 Gone (that version expired): relist and report the
difference. Other failures: relist after a back-off doubling up to `max_backoff_seconds`.
With several namespaces one watch per namespace runs in turn on this thread, so an event may
wait up to a window while another namespace is watched (none is lost: the version carries
on). All namespaces: one watch. When `stop` is set, the open watch response is shut down
(`policyd.clients.kubernetes_watch`), so `watch` returns at once.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict, cast

from kubernetes import watch as k8s_watch  # type: ignore[import-untyped]
from kubernetes.client.exceptions import ApiException  # type: ignore[import-untyped]

from policyd.clients.kubernetes_watch import Stoppable
from policyd.model.events import ContainerEvent, EventKind

LOG = logging.getLogger(__name__)
GONE = 410


def body(resp: Any) -> dict[str, Any]:
    """The JSON of a raw response (`_preload_content=False`)."""
    data = getattr(resp, "data", resp)
    return cast(dict[str, Any], json.loads(data) if isinstance(data, bytes | str) else data)


@dataclass(frozen=True, kw_only=True)
class Listing:
    """How to list one resource: `every` (e.g. `list_pod_for_all_namespaces`) when
    `namespaces` is empty, else `namespaced` (e.g. `list_namespaced_pod`) once per namespace;
    `selectors` are the calls' keyword arguments (label_selector, field_selector)."""

    every: Callable[..., Any]
    namespaced: Callable[..., Any]
    namespaces: tuple[str, ...]
    selectors: Mapping[str, str]

    def calls(self) -> list[tuple[Callable[..., Any], tuple[str, ...]]]:
        """Each list call to make: (method, positional arguments)."""
        if not self.namespaces:
            return [(self.every, ())]
        return [(self.namespaced, (ns,)) for ns in self.namespaces]

    def list(self) -> tuple[list[dict[str, Any]], str]:
        """The objects, one call (or one per namespace); and the resourceVersion to watch
        from (the last namespace's, when several)."""
        items: list[dict[str, Any]] = []
        version = ""
        for method, args in self.calls():
            got = body(method(*args, **self.selectors, _preload_content=False))
            items.extend(got.get("items") or [])
            version = str((got.get("metadata") or {}).get("resourceVersion", ""))
        return items, version


@dataclass(frozen=True, kw_only=True)
class Tracked:
    """An object of interest: its uid, and the `container` and `node` its events name (the
    ids the snapshot uses)."""

    uid: str
    container: str
    node: str


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


class WatchOptions(TypedDict, total=False):
    """`ListWatch`'s timing and seams, as a watch built on it passes them on."""

    window_seconds: int
    backoff_seconds: float
    max_backoff_seconds: float
    clock: Callable[[], float]
    make_watch: Callable[[], Any]


class ListWatch:
    """One resource listed and watched (see the module docstring). `name` ("pod", "job")
    names it in the log; `relists` counts the lists made (1 + relists)."""

    def __init__(self, listing: Listing, track: Callable[[Mapping[str, Any]], Tracked | None],
                 *, entered: EventKind | None, left: EventKind | None, name: str,
                 window_seconds: int = 30, backoff_seconds: float = 0.5,
                 max_backoff_seconds: float = 30.0, clock: Callable[[], float] = time.time,
                 make_watch: Callable[[], Any] = k8s_watch.Watch) -> None:
        self.listing, self.track = listing, track
        self.entered, self.left, self.name = entered, left, name
        self.window_seconds = window_seconds
        self.backoff_seconds, self.max_backoff_seconds = backoff_seconds, max_backoff_seconds
        self._clock, self._make_watch = clock, make_watch
        self.relists = 0

    def _tracked(self, items: Iterable[Mapping[str, Any]]) -> dict[str, Tracked]:
        return {t.uid: t for t in map(self.track, items) if t is not None}

    def watch(self, on_event: Callable[[ContainerEvent], None], stop: threading.Event) -> None:
        stoppable = Stoppable(stop)
        stopper = stoppable.close_on_stop()
        known: dict[str, Tracked] | None = None
        delay = self.backoff_seconds
        while not stop.is_set():
            try:
                items, version = self.listing.list()
                self.relists += 1
                fresh = self._tracked(items)
                if known is not None:
                    for event in diff(known, fresh, self._clock(), entered=self.entered,
                                      left=self.left):
                        on_event(event)
                known = fresh
                self._follow(known, version, on_event, stoppable)
                delay = self.backoff_seconds
            except ApiException as exc:
                if stop.is_set():
                    break
                if exc.status == GONE:
                    LOG.info("kubernetes %s watch: resourceVersion expired (410 Gone); "
                             "relisting", self.name)
                    continue
                LOG.warning("kubernetes %s watch: HTTP %s; relisting in %.1f s", self.name,
                            exc.status, delay)
                stop.wait(delay)
                delay = min(delay * 2, self.max_backoff_seconds)
            except Exception as exc:  # connection problems of every kind: relist later
                if stop.is_set():
                    break  # the stopper closed the stream under the client
                LOG.warning("kubernetes %s watch: %s; relisting in %.1f s", self.name, exc,
                            delay)
                stop.wait(delay)
                delay = min(delay * 2, self.max_backoff_seconds)
        stopper.join(timeout=1)

    def _follow(self, known: dict[str, Tracked], version: str,
                on_event: Callable[[ContainerEvent], None], stoppable: Stoppable) -> None:
        """Watch windows until `stop`; raises ApiException(410) when the version expired."""
        stop = stoppable.stop
        while not stop.is_set():
            for method, args in self.listing.calls():
                w = self._make_watch()
                for raw in w.stream(stoppable.method(method), *args, **self.listing.selectors,
                                    resource_version=version, allow_watch_bookmarks=True,
                                    timeout_seconds=self.window_seconds):
                    kind: str = raw.get("type", "")
                    obj = raw.get("raw_object") or {}
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    self._apply(known, kind, obj, on_event)
                    if stop.is_set():
                        w.stop()
                        break
                stoppable.done()
                if stop.is_set():
                    return

    def _apply(self, known: dict[str, Tracked], kind: str, obj: Mapping[str, Any],
               on_event: Callable[[ContainerEvent], None]) -> None:
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            return  # BOOKMARK: only its resourceVersion matters
        now = self.track(obj) if kind != "DELETED" else None
        uid = str((obj.get("metadata") or {}).get("uid", ""))
        was = known.get(uid)
        if now is not None and was is None:
            known[uid] = now
            self._report(self.entered, now, on_event)
        elif now is None and was is not None:
            del known[uid]
            self._report(self.left, was, on_event)

    def _report(self, kind: EventKind | None, tracked: Tracked,
                on_event: Callable[[ContainerEvent], None]) -> None:
        if kind is not None:
            on_event(event(kind, tracked, self._clock()))
