"""One Kubernetes resource followed until asked to stop: listed, then watched; the loop under
the pod and Job watches (`policyd.sources.kubernetes_list_watch`) and the policy custom
resources' (`policyd.daemon.policy_resources`).

What is made of the objects is the caller's, given as two functions: `listed` gets every
object of each list, `changed` each watch event after it ("ADDED", "MODIFIED" or "DELETED",
and the object). A `Listing` says which list calls to make: `list_pod_for_all_namespaces`,
`list_namespaced_pod` once per namespace, `list_cluster_custom_object` with a custom
resource's group, version and plural.

The loop: list, then `watch.Watch().stream(<list call>, resource_version=<list's>,
timeout_seconds=...)` in windows of `window_seconds` (with `timeout_seconds` set the client
does not resume by itself and raises ApiException(410) at once); each window resumes from the
last resourceVersion seen, bookmarks included; a read silent for two windows (a connection
gone without being closed) fails the window. 410 Gone (that version expired): relist.
Other failures, of the calls or of `listed` / `changed`: relist after a back-off doubling up
to `max_backoff_seconds`. With several calls (one per namespace) one watch per call runs in
turn on this thread, so an event may wait up to a window while another namespace is watched
(none is lost: the version carries on). When `stop` is set, the open watch response is shut
down (`kubernetes_watch.Stoppable`), so `follow` returns at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from kubernetes import watch as k8s_watch  # type: ignore[import-untyped]
from kubernetes.client.exceptions import ApiException  # type: ignore[import-untyped]

from policyd.clients.kubernetes_json import body
from policyd.clients.kubernetes_watch import Stoppable

LOG = logging.getLogger(__name__)
GONE = 410
CHANGES = ("ADDED", "MODIFIED", "DELETED")  # the rest, BOOKMARK: only its version matters
READ_TIMEOUT_WINDOWS = 2
"""A watch read that waits this many windows is a connection lost without being closed (the
server ends every window itself): it fails as a lost API server does, rather than hang."""

LIST_TIMEOUT_SECONDS = (10.0, 60.0)
"""A list's (connect, read) timeouts: an API server that accepted the connection and never
answers fails the list (and the cycle that waits on it) instead of holding it for ever. The
read timeout bounds the wait for each piece of the answer, not the whole list: 100,000 pods
(445 MB) stream for longer than a minute without reaching it, while an API server that stops
mid-answer is given up a minute later."""

Call = tuple[Callable[..., Any], tuple[str, ...]]


@dataclass(frozen=True, kw_only=True)
class Listing:
    """How to list one resource: `calls`, each a list method and its positional arguments;
    `selectors`, the keyword arguments of every call (label_selector, field_selector);
    `timeout_seconds`, each call's (connect, read) timeouts."""

    calls: tuple[Call, ...]
    selectors: Mapping[str, str] = field(default_factory=dict)
    timeout_seconds: tuple[float, float] = LIST_TIMEOUT_SECONDS

    @classmethod
    def scoped(cls, *, every: Callable[..., Any], namespaced: Callable[..., Any],
               namespaces: tuple[str, ...], selectors: Mapping[str, str]) -> Listing:
        """`every` (e.g. `list_pod_for_all_namespaces`) when `namespaces` is empty, else
        `namespaced` (e.g. `list_namespaced_pod`) once per namespace."""
        if not namespaces:
            return cls(calls=((every, ()),), selectors=selectors)
        return cls(calls=tuple((namespaced, (ns,)) for ns in namespaces), selectors=selectors)

    def list(self) -> tuple[list[dict[str, Any]], str]:
        """The objects, one call (or one per namespace); and the resourceVersion to watch
        from (the last call's, when several)."""
        items: list[dict[str, Any]] = []
        version = ""
        for method, args in self.calls:
            got = body(method(*args, **self.selectors, _preload_content=False,
                              _request_timeout=self.timeout_seconds))
            items.extend(got.get("items") or [])
            version = str((got.get("metadata") or {}).get("resourceVersion", ""))
        return items, version


class FollowOptions(TypedDict, total=False):
    """`Follower`'s timing and seams, as a watch built on it passes them on."""

    window_seconds: int
    backoff_seconds: float
    max_backoff_seconds: float
    make_watch: Callable[[], Any]


class Follower:
    """One resource listed and watched (see the module docstring). `label` ("kubernetes pod
    watch") begins its log lines; `relists` counts the lists made (1 + relists)."""

    def __init__(self, listing: Listing, *, label: str, window_seconds: int = 30,
                 backoff_seconds: float = 0.5, max_backoff_seconds: float = 30.0,
                 make_watch: Callable[[], Any] = k8s_watch.Watch) -> None:
        self.listing, self.label = listing, label
        self.window_seconds = window_seconds
        self.backoff_seconds, self.max_backoff_seconds = backoff_seconds, max_backoff_seconds
        self._make_watch = make_watch
        self.relists = 0

    def follow(self, listed: Callable[[list[dict[str, Any]]], None],
               changed: Callable[[str, dict[str, Any]], None], stop: threading.Event,
               lost: Callable[[], None] | None = None) -> None:
        """List and watch until `stop`, giving each list to `listed` and each change after it
        to `changed`; `lost` is called when a list or a watch fails for another reason than an
        expired version (what was seen may be going stale until the next list)."""
        stoppable = Stoppable(stop)
        stopper = stoppable.close_on_stop()
        delay = self.backoff_seconds
        while not stop.is_set():
            try:
                items, version = self.listing.list()
                self.relists += 1
                listed(items)
                self._windows(version, changed, stoppable)
                delay = self.backoff_seconds
            except ApiException as exc:
                if stop.is_set():
                    break
                if exc.status == GONE:
                    LOG.info("%s: resourceVersion expired (410 Gone); relisting", self.label)
                    continue
                LOG.warning("%s: HTTP %s; relisting in %.1f s", self.label, exc.status, delay)
                if lost is not None:
                    lost()
                stop.wait(delay)
                delay = min(delay * 2, self.max_backoff_seconds)
            except Exception as exc:  # connection problems of every kind: relist later
                if stop.is_set():
                    break  # the stopper closed the stream under the client
                LOG.warning("%s: %s; relisting in %.1f s", self.label, exc, delay)
                if lost is not None:
                    lost()
                stop.wait(delay)
                delay = min(delay * 2, self.max_backoff_seconds)
        stopper.join(timeout=1)

    def _windows(self, version: str, changed: Callable[[str, dict[str, Any]], None],
                 stoppable: Stoppable) -> None:
        """Watch windows until `stop`; raises ApiException(410) when the version expired."""
        stop = stoppable.stop
        while not stop.is_set():
            for method, args in self.listing.calls:
                w = self._make_watch()
                for raw in w.stream(stoppable.method(method), *args, **self.listing.selectors,
                                    resource_version=version, allow_watch_bookmarks=True,
                                    timeout_seconds=self.window_seconds,
                                    _request_timeout=(self.window_seconds,
                                                      READ_TIMEOUT_WINDOWS * self.window_seconds)):
                    kind: str = raw.get("type", "")
                    obj = raw.get("raw_object") or {}
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    if kind in CHANGES:
                        changed(kind, obj)
                    if stop.is_set():
                        w.stop()
                        break
                stoppable.done()
                if stop.is_set():
                    return
