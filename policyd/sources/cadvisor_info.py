"""cAdvisor's v1 REST payloads read into plain values. Pure: no I/O, no clock.

What policyd reads of a `ContainerInfo` (cAdvisor's `info/v1` struct; `/api/v1.3/docker/`
answers a map of container name -> ContainerInfo for every Docker container of the host):

* `name`: the container's cgroup path (`/docker/<id>`, `/system.slice/docker-<id>.scope`,
  `/kubepods/.../<id>`): what cAdvisor's Prometheus exporter puts in the `id` label;
* `id` (newer cAdvisors) or the 64-hex alias: the Docker container id;
* `aliases[0]`: the Docker container name (cAdvisor sets `aliases = [name, id]`);
* `spec.creation_time` (the container's start, as `container_start_time_seconds` reports it),
  `spec.labels` (the Docker labels, keys as written), `spec.cpu.limit` (CPU shares),
  `spec.cpu.quota` and `spec.cpu.period` (omitted when zero: no cap);
* `stats[].timestamp` (RFC 3339, nanosecond fractions) and `stats[].cpu.usage.total`
  (cumulative CPU time in nanoseconds).

Of a `MachineInfo` (`/api/v1.3/machine`), `num_cores`. An answer that is not the documented
shape at all raises ValueError (the caller turns it into a SourceError); one malformed container
entry or stats sample is skipped and named in the returned warnings, since the rest of the host's
answer is still true.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from policyd.model.snapshot import FloatArray

_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")
_FULL_ID = re.compile(r"^[0-9a-f]{64}$")


def parse_timestamp(text: str) -> float:
    """Epoch seconds from cAdvisor's RFC 3339 timestamps (nanosecond fractions included)."""
    match = _TIME.match(text.strip())
    if match is None:
        raise ValueError(f"not an RFC 3339 timestamp: {text[:200]!r}")
    base, fraction, zone = match.groups()
    whole = datetime.fromisoformat(base + ("+00:00" if zone == "Z" else zone))
    return whole.timestamp() + (float("0." + fraction) if fraction else 0.0)


def rfc3339(seconds: float) -> str:
    """Epoch seconds as the RFC 3339 UTC text cAdvisor's JSON decoder reads (microseconds)."""
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, kw_only=True, eq=False)
class CadvisorContainer:
    """One Docker container as a cAdvisor describes it, with the CPU counter samples it sent."""

    name: str
    container_id: str
    cgroup: str
    started_at: float | None
    labels: Mapping[str, str]
    shares: float | None = None
    quota: float | None = None
    period: float | None = None
    times_seconds: FloatArray = field(default_factory=lambda: np.empty(0))
    cpu_seconds: FloatArray = field(default_factory=lambda: np.empty(0))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _text_labels(raw: Any) -> dict[str, str]:
    """Label values as text: numbers and booleans written out, anything else dropped."""
    if not isinstance(raw, dict):
        return {}
    out: dict[str, str] = {}
    for key, value in raw.items():
        if isinstance(value, str):
            out[str(key)] = value
        elif isinstance(value, bool | int | float):
            out[str(key)] = str(value)
    return out


def _container_id(info: Mapping[str, Any], cgroup: str) -> str:
    candidates = [info.get("id"), *(info.get("aliases") or ())]
    for candidate in candidates:
        if isinstance(candidate, str) and _FULL_ID.match(candidate):
            return candidate
    tail = cgroup.rstrip("/").rsplit("/", 1)[-1].removesuffix(".scope").removeprefix("docker-")
    return tail


def cpu_samples(stats: Any) -> tuple[FloatArray, FloatArray, int]:
    """(times s, cumulative CPU s, skipped) of a stats list, sorted by time; a sample without a
    readable timestamp and a finite `cpu.usage.total` is skipped."""
    times: list[float] = []
    totals: list[float] = []
    skipped = 0
    for entry in stats if isinstance(stats, list) else ():
        try:
            t = parse_timestamp(entry["timestamp"])
            total = float(entry["cpu"]["usage"]["total"]) / 1e9
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
            skipped += 1
            continue
        if not (math.isfinite(t) and math.isfinite(total) and total >= 0):
            skipped += 1
            continue
        times.append(t)
        totals.append(total)
    order = np.argsort(times, kind="stable")
    return (np.asarray(times, dtype=np.float64)[order],
            np.asarray(totals, dtype=np.float64)[order], skipped)


def read_container(key: str, info: Any, where: str, warnings: list[str]
                   ) -> CadvisorContainer | None:
    """One ContainerInfo, or None (with a warning) when it names no Docker container."""
    if not isinstance(info, dict):
        warnings.append(f"{where}: entry {key[:200]!r} is not a ContainerInfo object; skipped")
        return None
    raw_name = info.get("name")
    cgroup: str = raw_name if isinstance(raw_name, str) else key
    aliases = info.get("aliases")
    name = aliases[0] if isinstance(aliases, list) and aliases else None
    if not isinstance(name, str) or not name.strip():
        warnings.append(f"{where}: container {cgroup[:200]!r} has no Docker name (aliases); "
                        "skipped")
        return None
    spec = _object(info.get("spec"))
    cpu = _object(spec.get("cpu"))
    started: float | None = None
    creation = spec.get("creation_time")
    if isinstance(creation, str):
        try:
            started = parse_timestamp(creation)
        except ValueError:
            started = None
    if started is not None and started <= 0:  # Go's zero time: cAdvisor did not know it
        started = None
    times, totals, skipped = cpu_samples(info.get("stats"))
    if skipped:
        warnings.append(f"{where}: container {name[:200]!r}: {skipped} stats samples without a "
                        "readable timestamp and cpu.usage.total; skipped")
    labels = spec.get("labels") if "labels" in spec else info.get("labels")
    return CadvisorContainer(
        name=name, container_id=_container_id(info, cgroup), cgroup=cgroup, started_at=started,
        labels=_text_labels(labels), shares=_number(cpu.get("limit")),
        quota=_number(cpu.get("quota")), period=_number(cpu.get("period")),
        times_seconds=times, cpu_seconds=totals)


def read_docker_containers(payload: Any, where: str
                           ) -> tuple[list[CadvisorContainer], list[str]]:
    """A `/api/v1.3/docker/` answer -> its containers and the warnings met (ValueError when the
    answer is not an object of container name -> ContainerInfo)."""
    if not isinstance(payload, dict):
        raise ValueError(f"expected an object of container name -> ContainerInfo, got "
                         f"{type(payload).__name__}")
    warnings: list[str] = []
    found = [read_container(str(key), info, where, warnings) for key, info in payload.items()]
    return [c for c in found if c is not None], warnings


def machine_cores(payload: Any) -> float:
    """A MachineInfo's `num_cores` (ValueError when absent or not a positive number)."""
    cores = _number(payload.get("num_cores")) if isinstance(payload, dict) else None
    if cores is None or cores <= 0:
        raise ValueError("expected a MachineInfo object with a positive num_cores")
    return cores
