"""HTTP to one cAdvisor's REST API (plain requests): the two calls the cadvisor-rest source makes.

* `docker_containers(since_seconds=...)`: `POST /api/v1.3/docker/` with the body
  `{"num_stats": -1, "start": "<RFC 3339>"}`, cAdvisor's `ContainerInfoRequest`: every Docker
  container of the host (spec and labels) with all the stats samples it holds from `start` on.
  cAdvisor's own Go client (`client.AllDockerContainers`) asks the same way: a POST carrying the
  request as JSON (the endpoint reads the body whatever the method).
* `machine()`: `GET /api/v1.3/machine`, the MachineInfo (`num_cores`).

Every failure is one `SourceError` naming the cAdvisor's URL, the node and the path: connection
refused, no answer within `timeout_seconds`, a non-200 answer (cAdvisor answers 500 with a text
body when a request fails inside it, 404 for a path it does not serve), or a body that is not
JSON. Connection errors, read timeouts and 429/5xx answers are retried `retries` times first.
The payloads are read by `cadvisor_info` (pure).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from policyd.sources.cadvisor_info import rfc3339
from policyd.sources.errors import SourceError
from policyd.sources.http import classify_requests, retry_policy

DOCKER_PATH = "/api/v1.3/docker/"
MACHINE_PATH = "/api/v1.3/machine"


class CadvisorClient:
    """One cAdvisor (one node); one session, a timeout and retries (see the module docstring)."""

    def __init__(self, base_url: str, *, node: str, timeout_seconds: float = 10,
                 retries: int = 2, retry_backoff_seconds: float = 0.5,
                 session: requests.Session | None = None) -> None:
        if not timeout_seconds > 0:
            raise ValueError("timeout_seconds must be positive")
        if retries < 0:
            raise ValueError("retries must be zero or more")
        self.base_url = base_url.rstrip("/")
        self.node = node
        self.timeout_seconds = timeout_seconds
        self._made = session is None
        self._session = session or requests.Session()
        adapter = HTTPAdapter(max_retries=retry_policy(retries, retry_backoff_seconds))
        self._session.mount(self.base_url + "/", adapter)

    def close(self) -> None:
        """Close the session if this client made it."""
        if self._made:
            self._session.close()

    def _error(self, kind: str, method: str, path: str, detail: str) -> SourceError:
        return SourceError(kind=kind, url=self.base_url, what=f"cAdvisor of node {self.node}: "
                           f"{method}", query=path, detail=detail)

    def request(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        """`method path` (with `body` as JSON) answered as JSON (raises SourceError)."""
        url = self.base_url + path
        try:
            response = self._session.request(
                method, url, timeout=self.timeout_seconds,
                data=None if body is None else json.dumps(body),
                headers=None if body is None else {"Content-Type": "application/json"})
            if response.status_code != 200:
                raise self._error("http", method, path,
                                  f"HTTP {response.status_code}: {response.text[:200]}")
            return response.json()
        except requests.RequestException as exc:
            found = classify_requests(exc)
            assert found is not None  # every RequestException has a kind
            raise self._error(found[0], method, path, found[1]) from exc

    def docker_containers(self, *, since_seconds: float | None) -> Any:
        """Every Docker container with its samples from `since_seconds` on (all it holds when
        None): the raw `/api/v1.3/docker/` answer."""
        body: dict[str, Any] = {"num_stats": -1}
        if since_seconds is not None:
            body["start"] = rfc3339(since_seconds)
        return self.request("POST", DOCKER_PATH, body)

    def machine(self) -> Any:
        """The raw MachineInfo answer."""
        return self.request("GET", MACHINE_PATH)
