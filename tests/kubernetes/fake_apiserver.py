"""A local stand-in for the API server: `http.server` on 127.0.0.1 answering with the recorded
responses of `recorded/` (hand-written in the real wire format; see its README).

`FakeApiServer.route(method, path, *answers)` queues answers for a path (the query string is
ignored, but kept in `requests`); the last answer repeats. An answer is (status, file name or
dict). A `.jsonl` file is streamed line by line (a watch). Every request is recorded with its
method, path, query, content type and JSON body. Point the real client at `url`.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kubernetes import client as k8s  # type: ignore[import-untyped]

RECORDED = Path(__file__).parent / "recorded"
Answer = tuple[int, "str | dict[str, Any]"]


class FakeApiServer:
    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], list[Answer]] = {}
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                server.requests.append({
                    "method": self.command, "path": parts.path,
                    "query": parse_qs(parts.query),
                    "content_type": self.headers.get("Content-Type"),
                    "body": json.loads(body) if body else None})
                queue = server.routes.get((self.command, parts.path))
                payload: str | dict[str, Any]
                if not queue:
                    status, payload = 404, {"kind": "Status", "apiVersion": "v1",
                                            "status": "Failure", "reason": "NotFound",
                                            "code": 404, "message": f"{parts.path} not found"}
                else:
                    status, payload = queue.pop(0) if len(queue) > 1 else queue[0]
                if isinstance(payload, str) and payload.endswith(".jsonl"):
                    lines = (RECORDED / payload).read_bytes()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(lines)))
                    self.end_headers()
                    self.wfile.write(lines)
                    return
                data = ((RECORDED / payload).read_bytes() if isinstance(payload, str)
                        else json.dumps(payload).encode())
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
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
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)
