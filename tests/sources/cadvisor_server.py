"""A local HTTP server on 127.0.0.1 that answers as cAdvisor (and Prometheus) do, from the real
payloads in payloads/cadvisor/ (see its README).

`POST /api/v1.3/docker/` reads the JSON `ContainerInfoRequest` body and filters each container's
stats as cAdvisor's `TimedStore.InTimeRange` does with a start and no end: samples at or after
`start`, the last `num_stats` of them (-1: all); `docker_body`, when set, is answered as it is
(a benchmark's pre-encoded answer). `GET /api/v1.3/machine` answers the MachineInfo.
`GET /api/v1/query_range` answers the Prometheus matrix given (or made from the query's
parameters), `GET /api/v1/query` the instant answer given. Every request is recorded; a
`fault` makes the server answer badly (status, garbage body, or a delay longer than the
client's timeout). A Prometheus query waits `query_delay_seconds` before its answer (or its
`query_faults` entry: the fault of the first key its PromQL contains), and the server counts
how many queries were in flight at once (`most_in_flight`) and how many were answered.
"""

from __future__ import annotations

import contextlib
import copy
import json
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from policyd.sources.cadvisor_info import parse_timestamp

PAYLOADS = Path(__file__).parent / "payloads" / "cadvisor"


def load(name: str) -> Any:
    return json.loads((PAYLOADS / name).read_text(encoding="utf-8"))


@dataclass
class Fault:
    """How the server misbehaves on `path` (None: every path)."""

    status: int = 200
    body: str | None = None
    delay_seconds: float = 0.0
    path: str | None = None


def refused(error: str, delay_seconds: float = 0.0) -> Fault:
    """Prometheus's answer to a query it cannot run (400 bad_data: never retried)."""
    return Fault(status=400, delay_seconds=delay_seconds, body=json.dumps(
        {"status": "error", "errorType": "bad_data", "error": error}))


@dataclass
class Stub:
    """What the server answers, and what it was asked."""

    docker: list[dict[str, Any]] = field(default_factory=list)
    machine: Any = None
    prometheus: dict[str, Any] | Callable[[dict[str, str]], dict[str, Any]] | None = None
    instant: dict[str, Any] | None = None
    """The answer of Prometheus's instant queries (`/api/v1/query`), when set."""
    fault: Fault | None = None
    docker_body: str | None = None
    query_delay_seconds: float = 0.0
    gather_queries: int = 0
    """A query waits (2 s at most) until this many are in flight before its delay, so that a
    test of queries sent together does not hang on when each thread got a core."""
    query_faults: dict[str, Fault] = field(default_factory=dict)
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0
    answered: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def seen_beside(self, queries: int) -> tuple[bool, int]:
        """For a read alongside a cycle's `queries`: waits (2 s at most) until one of them is
        in flight or all were answered; then whether any is in flight, and how many were
        answered (a cycle that sends them together: True, 0; one after the other: False, all)."""
        deadline = time.monotonic() + 2.0
        while self.in_flight == 0 and self.answered < queries and time.monotonic() < deadline:
            time.sleep(0.005)
        return self.in_flight > 0, self.answered

    @contextlib.contextmanager
    def query(self) -> Iterator[None]:
        """One Prometheus query in flight, counted, for at least `query_delay_seconds` (after
        `gather_queries` are in flight); counted answered before its answer is written, so that
        a client that has its answer finds it counted."""
        with self.lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            deadline = time.monotonic() + 2.0
            while self.in_flight < self.gather_queries and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(self.query_delay_seconds)
        finally:
            with self.lock:
                self.in_flight -= 1
                self.answered += 1
        yield

    def served_docker(self, body: Any) -> dict[str, Any]:
        start = body.get("start") if isinstance(body, dict) else None
        limit = int(body.get("num_stats", 60)) if isinstance(body, dict) else 60
        since = parse_timestamp(start) if start else None
        out: dict[str, Any] = {}  # the envelope of api/versions.go: {name: ContainerInfo}
        for info in self.docker:
            entry = copy.deepcopy(info)
            stats = [s for s in entry.get("stats", [])
                     if since is None or parse_timestamp(s["timestamp"]) >= since]
            entry["stats"] = stats if limit == -1 else stats[-limit:]
            out[entry["name"]] = entry
        return out


def _handler(stub: Stub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self, method: str) -> None:
            path = self.path.split("?", 1)[0]
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            stub.requests.append((method, path, body))
            if path.startswith("/api/v1/query"):
                with stub.query():
                    self._answer_query(method, path)
                return
            fault = stub.fault
            if fault is not None and fault.path in (None, path):
                time.sleep(fault.delay_seconds)
                self._send(fault.status, fault.body if fault.body is not None else "{}")
                return
            if method == "POST" and path == "/api/v1.3/docker/":
                text = stub.docker_body or json.dumps(stub.served_docker(body))
                self._send(200, text)
            elif method == "GET" and path == "/api/v1.3/machine" and stub.machine is not None:
                self._send(200, json.dumps(stub.machine))
            else:
                self._send(404, "404 page not found")

        def _answer_query(self, method: str, path: str) -> None:
            params = {k: v[0] for k, v in urllib.parse.parse_qs(
                urllib.parse.urlsplit(self.path).query).items()}
            fault = next((f for key, f in stub.query_faults.items()
                          if key in params.get("query", "")), stub.fault)
            if fault is not None and fault.path in (None, path):
                time.sleep(fault.delay_seconds)
                self._send(fault.status, fault.body if fault.body is not None else "{}")
            elif method == "GET" and path == "/api/v1/query_range" and stub.prometheus:
                answer = stub.prometheus
                if callable(answer):
                    answer = answer(params)
                self._send(200, json.dumps(answer))
            elif method == "GET" and path == "/api/v1/query" and stub.instant is not None:
                self._send(200, json.dumps(stub.instant))
            elif method == "GET" and path == "/api/v1/query" and stub.prometheus:
                # The cycle's one instant query (the progress ratio): no job reports a total.
                self._send(200, json.dumps({"status": "success",
                                            "data": {"resultType": "vector", "result": []}}))
            else:
                self._send(404, "404 page not found")

        def _send(self, status: int, text: str) -> None:
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(data)

        def do_GET(self) -> None:
            self._answer("GET")

        def do_POST(self) -> None:
            self._answer("POST")

    return Handler


@contextlib.contextmanager
def serving(stub: Stub) -> Iterator[str]:
    """Serve `stub` on 127.0.0.1 (a free port); yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stub))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
