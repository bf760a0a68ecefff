"""docker_events: decoding events, reconnecting, stopping (fake clients at the seam)."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from typing import Any, cast

import docker
import requests

from policyd.actuators.docker import DockerHost, DockerSettings
from policyd.model.events import ContainerEvent
from policyd.sources.docker_events import DockerEvents, event_of

SETTINGS = DockerSettings(hosts={"a": DockerHost(url="unix:///a.sock")})


def raw(action: str, name: str, at: float = 100.0) -> dict[str, Any]:
    return {"Type": "container", "Action": action, "status": "deprecated",
            "Actor": {"ID": "f" * 64, "Attributes": {"name": name, "image": "x"}},
            "time": int(at), "timeNano": int(at * 1e9)}


def test_event_of_reads_action_and_actor() -> None:
    assert event_of(raw("start", "job", 100.5), "a") == ContainerEvent(
        kind="started", container="job", node="a", time=100.5)
    assert event_of(raw("die", "job"), "a").kind == "stopped"  # type: ignore[union-attr]
    assert event_of(raw("create", "job"), "a").kind == "submitted"  # type: ignore[union-attr]
    assert event_of(raw("kill", "job"), "a") is None
    assert event_of({"Type": "image", "Action": "start", "Actor": {"ID": "x"}}, "a") is None
    no_name = {"Action": "start", "Actor": {"ID": "abc"}, "time": 5}
    assert event_of(no_name, "a") == ContainerEvent(kind="started", container="abc", node="a",
                                                    time=5.0)


class Stream:
    """A CancellableStream look-alike: yields queued events; ends on `None` or close()."""

    def __init__(self, items: list[dict[str, Any] | None], hold: bool) -> None:
        self.queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        for item in items:
            self.queue.put(item)
        if not hold:
            self.queue.put(None)
        self.closed = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while True:
            item = self.queue.get()
            if item is None:
                return
            yield item

    def close(self) -> None:
        self.closed = True
        self.queue.put(None)


class Client:
    """events(): the first stream ends (engine restart), then one refused connection, then a
    stream that stays open until closed."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.plan: list[Any] = [
            Stream([raw("start", "j1", 100.0), raw("die", "j1", 101.0)], hold=False),
            requests.exceptions.ConnectionError("refused"),
            Stream([raw("die", "j1", 101.0), raw("start", "j2", 105.0)], hold=True),
        ]
        self.streams: list[Stream] = []

    def events(self, **kw: Any) -> Stream:
        self.calls.append(kw)
        step = self.plan.pop(0)
        if isinstance(step, Exception):
            raise step
        self.streams.append(step)
        return cast(Stream, step)


def test_watch_reconnects_without_repeating_and_stops_promptly() -> None:
    client = Client()
    seen: list[ContainerEvent] = []
    stop = threading.Event()
    watcher = DockerEvents(SETTINGS, clients=cast(dict[str, docker.DockerClient], {"a": client}),
                           backoff_seconds=0.01)
    thread = threading.Thread(target=watcher.watch, args=(seen.append, stop))
    thread.start()
    deadline = time.monotonic() + 5
    while len(seen) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    stopped = time.monotonic()
    stop.set()
    thread.join(timeout=5)
    assert not thread.is_alive() and time.monotonic() - stopped < 1
    assert [(e.kind, e.container) for e in seen] == [
        ("started", "j1"), ("stopped", "j1"), ("started", "j2")]
    assert watcher.connects == {"a": 2}
    assert client.calls[0]["since"] is None and client.calls[-1]["since"] == 101
    assert client.calls[0]["filters"] == {"type": "container", "label": "policyd.io/managed=true",
                                          "event": ["start", "die", "create"]}
    assert client.streams[-1].closed
