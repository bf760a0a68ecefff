"""`Listing.list` against an API server that accepts the connection and never answers: the
list fails within its read timeout instead of holding the cycle for ever (a real client on a
loopback socket)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import kubernetes.client as k8s  # type: ignore[import-untyped]
import pytest
import urllib3

from policyd.clients.kubernetes_follow import LIST_TIMEOUT_SECONDS, Listing


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A loopback server that accepts connections and reads requests but never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    held: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    done.set()
    thread.join(timeout=2)
    for conn in held:
        conn.close()
    listener.close()


def test_a_list_the_api_server_never_answers_fails_within_its_read_timeout(
        silent_server: str) -> None:
    conf = k8s.Configuration()
    conf.host = silent_server
    conf.retries = 0
    core = k8s.CoreV1Api(k8s.ApiClient(conf))
    listing = Listing(calls=((core.list_node, ()),), timeout_seconds=(1.0, 0.5))
    began = time.monotonic()
    with pytest.raises(urllib3.exceptions.HTTPError, match="Read timed out"):
        listing.list()  # what the source turns into the cycle's SourceError
    assert time.monotonic() - began < 5


def test_every_list_carries_the_timeouts() -> None:
    seen: list[object] = []

    def method(*args: str, **kwargs: object) -> object:
        seen.append(kwargs["_request_timeout"])
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError):
        Listing(calls=((method, ()),)).list()
    assert seen == [LIST_TIMEOUT_SECONDS]
