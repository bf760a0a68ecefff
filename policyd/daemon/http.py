"""The daemon's HTTP endpoints: `/metrics`, `/healthz`, `/readyz`, on a thread of their own.

A tiny `http.server` (prometheus_client's own text exposition, from the registry passed in):
no framework, nothing global. `/healthz` and `/readyz` answer 200 or 503 with a plain-text
reason (`Health`). Bind it to 127.0.0.1 unless Prometheus scrapes from elsewhere; port 0 picks
a free port (`StatusServer.port` says which).
"""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from policyd.daemon.health import Health

LOG = logging.getLogger(__name__)


class StatusServer:
    """Serves the endpoints on `addr:port` from `start()` until `close()`."""

    def __init__(self, addr: str, port: int, *, registry: CollectorRegistry,
                 health: Health) -> None:
        handler = _handler(registry, health)
        self._server = ThreadingHTTPServer((addr, port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.1,),
                                        name="policyd-http", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def addr(self) -> str:
        return str(self._server.server_address[0])

    def start(self) -> None:
        self._thread.start()
        LOG.info("serving /metrics, /healthz, /readyz on http://%s:%d", self.addr, self.port)

    def close(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()


def _handler(registry: CollectorRegistry, health: Health) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "policyd"

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, generate_latest(registry), CONTENT_TYPE_LATEST)
            elif path in ("/healthz", "/readyz"):
                ok, reason = health.live() if path == "/healthz" else health.ready()
                self._send(200 if ok else 503, (reason + "\n").encode(),
                           "text/plain; charset=utf-8")
            else:
                self._send(404, b"not found: try /metrics, /healthz, /readyz\n",
                           "text/plain; charset=utf-8")

        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            LOG.debug("http: " + format, *args)

    return Handler
