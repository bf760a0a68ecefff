"""A local stand-in for the Kubernetes API server: `http.server` on 127.0.0.1, answering the
real `kubernetes` client the way a v1.36 API server did (`recorded/` holds its real answers
and a README of how they were captured).

Behind it is a `FakeCluster` (`fake_cluster`): objects seeded from the recorded responses,
real semantics for what policyd relies on (generation / observedGeneration, a resize answered
before the kubelet acts, conditions by generation, 409 on a stale resourceVersion, 422 bodies,
410 on a watch from too old a version), and controllers that follow the test's virtual clock.
`route(method, path, *answers)` overrides a path with scripted answers (status, recorded file
name or dict; the last one repeats; a `.jsonl` file is a watch stream). Every request is kept
in `requests` (method, path, query, content type, JSON body). Watches stream until their
`timeoutSeconds` or the server stops, as a real watch does.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kubernetes import client as k8s  # type: ignore[import-untyped]

from tests.kubernetes.fake_cluster import RECORDED, FakeCluster

Answer = tuple[int, "str | dict[str, Any]"]


class _Quiet(ThreadingHTTPServer):
    """A client hanging up (a watch it stopped) is not an error worth printing."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeApiServer:
    def __init__(self, clock: Callable[[], float] = lambda: 0.0) -> None:
        self.cluster = FakeCluster(clock)
        self.routes: dict[tuple[str, str], list[Answer]] = {}
        self.requests: list[dict[str, Any]] = []
        self.stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _serve(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
                body = json.loads(raw) if raw else None
                server.requests.append({
                    "method": self.command, "path": parts.path, "query": parse_qs(parts.query),
                    "content_type": self.headers.get("Content-Type"), "body": body})
                queue = server.routes.get((self.command, parts.path))
                if queue:
                    status, payload = queue.pop(0) if len(queue) > 1 else queue[0]
                    if isinstance(payload, str):
                        text = (RECORDED / payload).read_bytes()
                        data = text if payload.endswith(".jsonl") else json.dumps(
                            json.loads(text)["response"]).encode()
                    else:
                        data = json.dumps(payload).encode()
                    self._send(status, data)
                    return
                if self.command == "GET" and str(query.get("watch")).lower() in ("true", "1"):
                    self._watch(parts.path, query)
                    return
                status, out = server.cluster.handle(self.command, parts.path, query, body)
                self._send(status, json.dumps(out).encode())

            def _watch(self, path: str, query: dict[str, str]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                timeout = float(query.get("timeoutSeconds") or 1800)
                try:
                    for line in server.cluster.watch(path, query, server.stopping, timeout):
                        self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client hung up (a stopped watch)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

        Handler.protocol_version = "HTTP/1.1"
        Handler.disable_nagle_algorithm = True  # one small answer must not wait 40 ms
        self._httpd = _Quiet(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def route(self, method: str, path: str, *answers: Answer) -> None:
        self.routes[(method, path)] = list(answers)

    def api_client(self) -> Any:
        conf = k8s.Configuration()
        conf.host = self.url
        return k8s.ApiClient(conf)

    def __enter__(self) -> FakeApiServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        with self.cluster.lock:
            self.cluster.changed.notify_all()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)
