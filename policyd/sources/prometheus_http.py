"""prometheus-api-client's `PrometheusConnect`, with its two query calls decoding with orjson.

A 10,000-container cycle is ~40 MB of JSON; the client decodes it with requests' `.json()`
(the standard library), which takes longer than everything policyd then does with it. This
subclass sends the same requests on the client's own session (its retry policy, timeout, TLS
and auth settings, method and headers untouched) and raises the same exception for a non-200
answer, but decodes the body with `policyd.fastjson`; a body orjson refuses is decoded by
requests' `.json()` as before, so a body that is not JSON still raises requests' own
`JSONDecodeError` with its message. A range query's answer in the compact form servers write
is read straight from its bytes into a `Matrix` (`matrix_body`: no Python object per sample),
which `read_matrix` takes as it is; any other answer is decoded as above.

Must not: build queries or parse results (`promql`, `parse`), or keep state between calls.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import requests
from prometheus_api_client.exceptions import PrometheusApiClientException
from prometheus_api_client.prometheus_connect import PrometheusConnect

from policyd import fastjson
from policyd.sources.matrix_body import read_matrix_body


def range_result(body: bytes, fallback: Callable[[], Any] | None = None) -> Any:
    """A range query's `data.result` from its answer `body`: a `Matrix` read from the bytes
    when it is in the compact form, else the decoded list (`fallback()` where orjson refuses
    the body, see `fastjson.loads`)."""
    matrix = read_matrix_body(body)
    if matrix is not None:
        return matrix
    return fastjson.loads(body, fallback=fallback)["data"]["result"]


class FastPrometheusConnect(PrometheusConnect):
    """`PrometheusConnect` whose `custom_query` and `custom_query_range` decode with orjson
    (the same requests, results and exceptions as the client's own, version 0.7.x)."""

    def close(self) -> None:
        """Close the session's pooled connections (the client may still be used: requests
        opens new ones)."""
        self._session.close()

    def _answer(self, endpoint: str, params: dict[str, Any],
                timeout: float | None) -> requests.Response:
        response = self._session.request(
            method=self._method,
            url=f"{self.url}/api/v1/{endpoint}",
            params=params,
            verify=self._session.verify,
            headers=self.headers,
            auth=self.auth,
            cert=self._session.cert,
            timeout=self._timeout if timeout is None else timeout,
        )
        if response.status_code != 200:
            raise PrometheusApiClientException(
                f"HTTP Status Code {response.status_code} ({response.content!r})")
        return response

    def custom_query(self, query: str, params: dict[str, Any] | None = None,
                     timeout: float | None = None) -> Any:
        """An instant query's `data.result` (as the client's own `custom_query`)."""
        response = self._answer("query", {"query": str(query), **(params or {})}, timeout)
        return fastjson.loads(response.content, fallback=response.json)["data"]["result"]

    def custom_query_range(  # noqa: PLR0917 (the client's own signature)
            self, query: str, start_time: datetime, end_time: datetime, step: str,
            params: dict[str, Any] | None = None, timeout: float | None = None) -> Any:
        """A range query's `data.result` (as the client's own `custom_query_range`: whole-second
        start and end, which `params` may override), as a `Matrix` when read from the bytes
        (`range_result`)."""
        rounded = {"query": str(query), "start": round(start_time.timestamp()),
                   "end": round(end_time.timestamp()), "step": step}
        response = self._answer("query_range", {**rounded, **(params or {})}, timeout)
        return range_result(response.content, fallback=response.json)
