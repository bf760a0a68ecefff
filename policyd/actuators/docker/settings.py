"""What the Docker actuator needs to know: the hosts, the timings, and which containers are its.

Frozen values checked on construction; nothing here touches the network. The label names the
actuator writes are `policyd.model.labels`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from policyd.model import labels


@dataclass(frozen=True, kw_only=True)
class DockerHost:
    """One Docker engine: `url` as the SDK takes it (`unix:///run/docker.sock`,
    `tcp://10.0.0.5:2376`); TLS files for tcp engines that require client certificates."""

    url: str
    tls_ca: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None

    def __post_init__(self) -> None:
        if not self.url:
            raise ValueError("a Docker host needs a url")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError(f"{self.url}: tls_cert and tls_key go together")


@dataclass(frozen=True, kw_only=True)
class DockerSettings:
    """The Docker actuator's settings (the events and stats sources read `hosts` and
    `managed_label` too, through a structural Protocol: sources never import actuators).

    `managed_label` is `key=value` (or just `key`): only containers carrying it are touched.
    `state_path` holds what Docker cannot store on a running container (see `state`); None
    keeps it in memory only. `api_version` "auto" negotiates (Debian's 20.10 speaks 1.41;
    the SDK's default, 1.45, would be refused).
    """

    hosts: Mapping[str, DockerHost]
    grace_seconds: float = 60.0
    start_timeout_seconds: float = 30.0
    confirm_seconds: float = 1.0
    retries: int = 3
    backoff_seconds: float = 0.5
    managed_label: str = labels.MANAGED_SELECTOR
    state_path: Path | None = None
    api_version: str = "auto"
    timeout_seconds: float = 60.0
    stats_workers_per_host: int = 8

    def __post_init__(self) -> None:
        problems: list[str] = []
        if not self.hosts:
            problems.append("hosts: name at least one node")
        for what, value in (("grace_seconds", self.grace_seconds),
                            ("start_timeout_seconds", self.start_timeout_seconds),
                            ("timeout_seconds", self.timeout_seconds)):
            if not value > 0:
                problems.append(f"{what} must be positive, got {value}")
        if self.confirm_seconds < 0 or self.backoff_seconds < 0 or self.retries < 0:
            problems.append("confirm_seconds, backoff_seconds and retries must be >= 0")
        if self.stats_workers_per_host < 1:
            problems.append("stats_workers_per_host must be at least 1")
        if not self.managed_label or self.managed_label.startswith("="):
            problems.append(f"managed_label {self.managed_label!r} must be key or key=value")
        if problems:
            raise ValueError("; ".join(problems))
        object.__setattr__(self, "hosts", MappingProxyType(dict(self.hosts)))

    @property
    def managed(self) -> tuple[str, str | None]:
        """The managed label as (key, value or None for "any value")."""
        key, sep, value = self.managed_label.partition("=")
        return key, (value if sep else None)


def is_managed(labels: Mapping[str, str] | None, managed_label: str) -> bool:
    """True when `labels` carry `managed_label` (`key=value`, or `key` with any value)."""
    key, sep, value = managed_label.partition("=")
    have = (labels or {}).get(key)
    return have is not None and (not sep or have == value)
