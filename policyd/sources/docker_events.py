"""`DockerEvents`: containers created, starting and dying on Docker engines (FlowCon's
Algorithm 2 listener, and the admitting kinds' wake-up on a held job; the
`policyd.tick.EventSource` protocol).

One thread per host reads `client.events(decode=True, filters={"type": "container", "label":
managed, "event": ["create", "start", "die"]})` and reports each as a `ContainerEvent` (`Action`,
`Actor.ID` and `Actor.Attributes["name"]`; the deprecated `status`/`id` keys are not read).
The event's container is the container's *name*, the id the Docker snapshot uses.

When a stream ends or fails (the engine restarted, the socket was reset), the thread
reconnects with exponential back-off (`backoff_seconds` doubling up to `max_backoff_seconds`)
and asks for the events since the last one it saw, so nothing the engine still holds is
missed; what happened while the engine itself was down is not replayed (an engine keeps no
events across a restart): the next snapshot sees it. When `stop` is set, the open streams are
closed at once, so `watch` returns promptly (within about a second).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import docker
import docker.errors
import requests

from policyd.clients.docker_engine import connect
from policyd.model.events import ContainerEvent, EventKind
from policyd.sources.docker_poll import DockerTargets

LOG = logging.getLogger(__name__)

KINDS: dict[str, EventKind] = {"start": "started", "die": "stopped", "create": "submitted"}
"""Docker's actions -> events. A managed container created is a job submitted held (or one
policyd itself creates to move or admit a job, which starts a moment later): either way the
admitting policies look at once, rather than an interval later."""


def event_of(raw: Mapping[str, Any], node: str) -> ContainerEvent | None:
    """One decoded Docker event -> ContainerEvent, or None for anything else (pure)."""
    kind = KINDS.get(str(raw.get("Action", "")))
    actor = raw.get("Actor") or {}
    attributes = actor.get("Attributes") or {}
    name = attributes.get("name") or actor.get("ID")
    if kind is None or not name or raw.get("Type", "container") != "container":
        return None
    nanos = raw.get("timeNano")
    at = float(nanos) / 1e9 if nanos else float(raw.get("time", 0))
    return ContainerEvent(kind=kind, container=str(name), node=node, time=at)


class DockerEvents:
    """Watches every host of `targets` (or `clients`, node -> SDK client)."""

    def __init__(self, targets: DockerTargets, *,
                 clients: Mapping[str, docker.DockerClient] | None = None,
                 backoff_seconds: float = 0.5, max_backoff_seconds: float = 30.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.targets = targets
        self._clients = dict(clients or {})
        self._made: list[docker.DockerClient] = []
        self.backoff_seconds = backoff_seconds
        self.max_backoff_seconds = max_backoff_seconds
        self._clock = clock
        self._streams: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.connects: dict[str, int] = {}
        """How many times each host's stream was opened (1 + reconnections)."""

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.targets.hosts) | set(self._clients)))

    def watch(self, on_event: Callable[[ContainerEvent], None], stop: threading.Event) -> None:
        threads = [threading.Thread(target=self._follow, args=(node, on_event, stop),
                                    name=f"docker-events-{node}", daemon=True)
                   for node in self.nodes]
        for t in threads:
            t.start()
        stop.wait()
        with self._lock:
            streams = list(self._streams.values())
        for stream in streams:
            self._close(stream)
        for t in threads:
            t.join(timeout=5)
        with self._lock:
            made, self._made = self._made, []
        for client in made:
            self._clients = {n: c for n, c in self._clients.items() if c is not client}
            client.close()

    @staticmethod
    def _close(stream: Any) -> None:
        try:
            stream.close()
        except Exception as exc:  # closing a broken stream may fail in many ways; it is gone
            LOG.debug("docker events: closing a stream: %s", str(exc))

    def _client(self, node: str) -> docker.DockerClient:
        if node not in self._clients:
            t = self.targets
            made = connect(t.hosts[node], api_version=t.api_version,
                                 timeout_seconds=t.timeout_seconds)
            with self._lock:
                self._made.append(made)
            self._clients[node] = made
        return self._clients[node]

    def _follow(self, node: str, on_event: Callable[[ContainerEvent], None],
                stop: threading.Event) -> None:
        delay = self.backoff_seconds
        since: float | None = None
        while not stop.is_set():
            try:
                stream = self._client(node).events(
                    decode=True, since=None if since is None else int(since),
                    filters={"type": "container", "label": self.targets.managed_label,
                             "event": list(KINDS)})
            except (docker.errors.DockerException, requests.exceptions.RequestException,
                    OSError) as exc:
                LOG.warning("docker events: node %s: cannot connect (%s); again in %.1f s",
                            node, str(exc), delay)
                stop.wait(delay)
                delay = min(delay * 2, self.max_backoff_seconds)
                continue
            with self._lock:
                self._streams[node] = stream
                self.connects[node] = self.connects.get(node, 0) + 1
            if stop.is_set():
                self._close(stream)
            delay = self.backoff_seconds
            try:
                for raw in stream:
                    event = event_of(raw, node)
                    if event is not None and (since is None or event.time > since):
                        since = event.time  # a reconnection asks from this second on:
                        on_event(event)     # what it repeats is not reported twice
                    if stop.is_set():
                        break
            except (docker.errors.DockerException, requests.exceptions.RequestException,
                    OSError, ValueError) as exc:
                LOG.warning("docker events: node %s: stream broke (%s)", node, str(exc))
            finally:
                with self._lock:
                    self._streams.pop(node, None)
            if not stop.is_set():
                since = since if since is not None else self._clock()
                LOG.warning("docker events: node %s: stream ended; reconnecting in %.1f s",
                            node, delay)
                stop.wait(delay)
                delay = min(delay * 2, self.max_backoff_seconds)
