"""A local HTTP server on 127.0.0.1 that answers as cAdvisor (and Prometheus) do, from the real
payloads in payloads/cadvisor/ (see its README).

`POST /api/v1.3/docker/` reads the JSON `ContainerInfoRequest` body and filters each container's
stats as cAdvisor's `TimedStore.InTimeRange` does with a start and no end: samples at or after
`start`, the last `num_stats` of them (-1: all); `docker_body`, when set, is answered as it is
(a benchmark's pre-encoded answer). `GET /api/v1.3/machine` answers the MachineInfo.
`GET /api/v1/query_range` answers the Prometheus matrix given (or made from the query's
parameters), `GET /api/v1/query` the instant answer given. Every request is recorded; a
`fault` makes the server answer badly (status, garbage body, or a delay longer than the
client's timeout).
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
    requests: list[tuple[str, str, Any]] = field(default_factory=list)

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
            elif method == "GET" and path == "/api/v1/query_range" and stub.prometheus:
                answer = stub.prometheus
                if callable(answer):
                    query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                    answer = answer({k: v[0] for k, v in query.items()})
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
