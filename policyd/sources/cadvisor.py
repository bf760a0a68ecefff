"""cAdvisor's REST API for Docker hosts whose cAdvisor Prometheus does not scrape.

`CadvisorClient` owns the HTTP (plain requests, one session, a timeout and retries); the
functions below it are pure and turn cAdvisor's documented payloads into CPU series:

* `/api/v2.0/stats/<id>?type=docker&count=N` -> `{"<name>": [ContainerStats v2, ...]}`
* `/api/v1.3/docker/<id>` -> `{"<name>": ContainerInfo}`
* `/api/v1.3/containers/<name>` -> one ContainerInfo

`cpu.usage.total` is cumulative nanoseconds of CPU time: between two samples,
cores = delta(total ns) / delta(timestamp ns). A counter that goes down (the container was
restarted) gives no sample for that pair. `cores_over_intervals` turns the counter into the
engine's reading: mean cores over each (t_{m-1}, t_m], from the counter interpolated at the
boundaries.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import numpy as np
import requests
from requests.adapters import HTTPAdapter

from policyd.model import Series
from policyd.model.snapshot import FloatArray
from policyd.sources.errors import SourceError
from policyd.sources.http import classify_requests, retry_policy

_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")


def parse_timestamp(text: str) -> float:
    """Epoch seconds from cAdvisor's RFC 3339 timestamps (nanosecond fractions included)."""
    match = _TIME.match(text.strip())
    if match is None:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}")
    base, fraction, zone = match.groups()
    whole = datetime.fromisoformat(base + ("+00:00" if zone == "Z" else zone))
    if whole.tzinfo is None:  # pragma: no cover - the pattern always carries a zone
        whole = whole.replace(tzinfo=UTC)
    return whole.timestamp() + (float("0." + fraction) if fraction else 0.0)


def _usage_samples(stats: Sequence[Mapping[str, Any]]) -> tuple[FloatArray, FloatArray]:
    """(times, cumulative CPU seconds) from stats entries, sorted, bad entries skipped."""
    times, totals = [], []
    for entry in stats:
        try:
            t = parse_timestamp(entry["timestamp"])
            total = float(entry["cpu"]["usage"]["total"]) / 1e9
        except (KeyError, TypeError, ValueError):
            continue
        times.append(t)
        totals.append(total)
    order = np.argsort(times, kind="stable")
    return np.asarray(times, dtype=np.float64)[order], np.asarray(totals, dtype=np.float64)[order]


def cores_per_sample(stats: Sequence[Mapping[str, Any]]) -> Series:
    """Cores used between consecutive samples, timed at the later one (v1.3 and v2.0 stats)."""
    times, totals = _usage_samples(stats)
    if times.size < 2:
        return Series.empty()
    dt, du = np.diff(times), np.diff(totals)
    keep = (dt > 0) & (du >= 0)
    return Series.of(times[1:][keep], du[keep] / dt[keep])


def cores_over_intervals(stats: Sequence[Mapping[str, Any]], boundaries: Sequence[float]
                         ) -> Series:
    """Mean cores in each (b_{k-1}, b_k], from the counter interpolated at the boundaries.

    Intervals not covered by samples, or spanning a counter reset, are left out.
    """
    times, totals = _usage_samples(stats)
    bounds = np.asarray(boundaries, dtype=np.float64)
    if times.size < 2 or bounds.size < 2:
        return Series.empty()
    resets = np.flatnonzero(np.diff(totals) < 0)
    at = np.interp(bounds, times, totals)
    covered = (bounds[:-1] >= times[0]) & (bounds[1:] <= times[-1])
    for r in resets:  # a reset between samples r and r + 1 spoils the intervals that span it
        covered &= ~((bounds[:-1] < times[r + 1]) & (bounds[1:] > times[r]))
    cores = np.diff(at) / np.diff(bounds)
    return Series.of(bounds[1:][covered], cores[covered])


def stats_by_name_v2(payload: Any) -> dict[str, list[Mapping[str, Any]]]:
    """`/api/v2.0/stats` answer -> name -> stats list (raises ValueError on another shape)."""
    if not isinstance(payload, dict) or not all(isinstance(v, list) for v in payload.values()):
        raise ValueError("expected an object of container name -> list of stats")
    return {str(k): v for k, v in payload.items()}


def stats_of_info(info: Any) -> list[Mapping[str, Any]]:
    """A v1.3 ContainerInfo's `stats` list (raises ValueError when absent)."""
    if not isinstance(info, dict) or not isinstance(info.get("stats"), list):
        raise ValueError("expected a ContainerInfo object with a 'stats' list")
    return list(info["stats"])


def names_of_info(info: Mapping[str, Any]) -> tuple[str, ...]:
    """A ContainerInfo's name and aliases (Docker: the container name and its full id)."""
    return (str(info.get("name", "")), *(str(a) for a in info.get("aliases") or ()))


class CadvisorClient:
    """HTTP to one cAdvisor; every failure is one `SourceError` naming the URL and path."""

    def __init__(self, base_url: str, timeout_seconds: float = 10, session:
                 requests.Session | None = None, *, retries: int = 2,
                 retry_backoff_seconds: float = 0.5) -> None:
        if not timeout_seconds > 0:
            raise ValueError("timeout_seconds must be positive")
        self.base_url = base_url.rstrip("/")
        self.timeout_seconds = timeout_seconds
        self._session = session or requests.Session()
        retry = retry_policy(retries, retry_backoff_seconds)
        self._session.mount(self.base_url, HTTPAdapter(max_retries=retry))

    def get(self, path: str, params: Mapping[str, str | int] | None = None) -> Any:
        """GET `path` as JSON (raises SourceError)."""
        url = f"{self.base_url}{path}"
        try:
            response = self._session.get(url, params=params, timeout=self.timeout_seconds)
            if response.status_code != 200:
                detail = f"HTTP {response.status_code}: {response.text[:200]}"
                raise SourceError(kind="http", url=self.base_url, what="GET", query=path,
                                  detail=detail)
            return response.json()
        except SourceError:
            raise
        except (requests.RequestException, ValueError) as exc:
            found = classify_requests(exc) or ("bad_response", f"unreadable answer ({exc!r})")
            raise SourceError(kind=found[0], url=self.base_url, what="GET", query=path,
                              detail=found[1]) from exc

    def stats_v2(self, container_id: str, count: int) -> dict[str, list[Mapping[str, Any]]]:
        """The last `count` stats of a Docker container, by container name."""
        path = f"/api/v2.0/stats/{quote(container_id, safe='')}"
        payload = self.get(path, {"type": "docker", "count": count})
        try:
            return stats_by_name_v2(payload)
        except ValueError as exc:
            raise self._bad(path, exc) from exc

    def docker_v13(self, container_id: str) -> dict[str, Any]:
        """`/api/v1.3/docker/<id>`: container name -> ContainerInfo."""
        path = f"/api/v1.3/docker/{quote(container_id, safe='')}"
        payload = self.get(path)
        if not isinstance(payload, dict):
            raise SourceError(kind="bad_response", url=self.base_url, what="GET", query=path,
                              detail="expected an object of container name -> ContainerInfo")
        return payload

    def container_v13(self, name: str) -> dict[str, Any]:
        """`/api/v1.3/containers/<name>`: one ContainerInfo (name like `/docker/<id>`)."""
        path = "/api/v1.3/containers/" + quote(name.lstrip("/"), safe="/")
        payload = self.get(path)
        try:
            stats_of_info(payload)
        except ValueError as exc:
            raise self._bad(path, exc) from exc
        return dict(payload)

    def _bad(self, path: str, exc: ValueError) -> SourceError:
        return SourceError(kind="bad_response", url=self.base_url, what="GET", query=path,
                           detail=str(exc))


def cpu_series_v2(client: CadvisorClient, container_ids: Sequence[str], count: int
                  ) -> dict[str, Series]:
    """Cores per sample of each container (by the name cAdvisor gives it), one GET each."""
    out: dict[str, Series] = {}
    for cid in container_ids:
        for name, stats in client.stats_v2(cid, count).items():
            out[name] = cores_per_sample(stats)
    return out


def cpu_series_v13(client: CadvisorClient, container_ids: Sequence[str]) -> dict[str, Series]:
    """The same from the v1.3 Docker endpoint (older cAdvisors), keyed by ContainerInfo name."""
    out: dict[str, Series] = {}
    for cid in container_ids:
        for name, info in client.docker_v13(cid).items():
            try:
                out[name] = cores_per_sample(stats_of_info(info))
            except ValueError:
                out[name] = Series.empty()
    return out
