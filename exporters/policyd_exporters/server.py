"""`serve()`: the /metrics endpoint, on a daemon thread, for a registry.

Owns the choice of listening address: there is no default, because the two sensible values
differ. A pod or container that Prometheus scrapes from elsewhere must listen on `0.0.0.0` (or
`::`); a process scraped on the same machine, or a test, listens on `127.0.0.1`.
prometheus_client's own `start_http_server` defaults to `0.0.0.0`, which is why this wrapper exists.
"""

from __future__ import annotations

import threading
from wsgiref.simple_server import WSGIServer

from prometheus_client.exposition import start_http_server
from prometheus_client.registry import REGISTRY, CollectorRegistry


class MetricsServer:
    """A running /metrics endpoint. `port` is the bound one (useful after `port=0`)."""

    def __init__(self, httpd: WSGIServer, thread: threading.Thread) -> None:
        self._httpd = httpd
        self._thread = thread

    @property
    def addr(self) -> str:
        return str(self._httpd.server_address[0])

    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        host = f"[{self.addr}]" if ":" in self.addr else self.addr
        return f"http://{host}:{self.port}/metrics"

    def close(self) -> None:
        """Stop serving and release the port."""
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve(port: int, *, addr: str, registry: CollectorRegistry = REGISTRY) -> MetricsServer:
    """Serve `registry` at http://addr:port/metrics from a daemon thread; port 0 picks a free one.

    `addr` is required: "0.0.0.0" in a pod or container to be scraped, "127.0.0.1" on the same
    machine or in tests.
    """
    httpd, thread = start_http_server(port, addr=addr, registry=registry)
    return MetricsServer(httpd, thread)
