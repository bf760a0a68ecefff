"""What the Docker actuator needs to know: the hosts, the timings, and which containers are its.

`DockerSection` is the settings file's `docker` section (docs/settings.md), field for field;
`DockerSettings` is that section plus the knobs only code sets (retries, API version, the
stats source's pool), so every field the file can hold is declared, defaulted and checked
here once. Both are frozen pydantic models (`policyd.clients.settings.SettingsModel`); nothing
here touches the network or loads the Docker SDK. The label names the actuator writes are
`policyd.model.labels`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    model_validator,
)

from policyd.clients.settings import (
    NonEmptyStr,
    ReadOnly,
    SettingsModel,
    SettingsPath,
    field_problems,
    show,
)
from policyd.model import labels


class DockerTls(SettingsModel):
    """Client certificates for a TLS engine: `ca` alone verifies the engine; `cert` and `key`
    (together) authenticate policyd to it."""

    ca: SettingsPath | None = None
    cert: SettingsPath | None = None
    key: SettingsPath | None = None

    @model_validator(mode="after")
    def _pair(self) -> Self:
        if (self.cert is None) != (self.key is None):
            raise ValueError("cert and key go together")
        return self


class DockerHost(SettingsModel):
    """One Docker engine: `url` as the SDK takes it (`unix:///run/docker.sock`,
    `tcp://10.0.0.5:2376`), and TLS files for engines that require client certificates.
    In the settings file a host is its URL, or a mapping `{url, tls: {ca, cert, key}}`.
    `tls_ca`, `tls_cert`, `tls_key` make it a `policyd.clients.docker_engine.EngineAddress`."""

    url: NonEmptyStr
    tls: DockerTls | None = None

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        if isinstance(data, str) and data:
            return {"url": data}
        if not isinstance(data, Mapping | DockerHost):
            raise ValueError("must be a Docker engine URL or a mapping with url (and tls); "
                             f"got {show(data)}")
        return data

    @property
    def tls_ca(self) -> Path | None:
        return self.tls.ca if self.tls else None

    @property
    def tls_cert(self) -> Path | None:
        return self.tls.cert if self.tls else None

    @property
    def tls_key(self) -> Path | None:
        return self.tls.key if self.tls else None


def _managed_label(value: str) -> str:
    if not value or value.startswith("="):
        raise ValueError(f"{show(value)} must be key or key=value")
    return value


class DockerSection(SettingsModel):
    """The settings file's `docker` section: the engines policyd acts on, by node name (the
    snapshot's node names), and the actuator's knobs.

    `managed_label` is `key=value` (or just `key`): only containers carrying it are touched.
    `grace_seconds`: SIGTERM to SIGKILL of a migrating trainer, unless its policy gives one
    (`policyd.actuators.grace`). `state_path` holds what Docker cannot store on a running
    container (see `state`); None keeps it in memory only.
    """

    hosts: Annotated[Mapping[str, DockerHost], ReadOnly] = {}
    managed_label: Annotated[str, AfterValidator(_managed_label)] = labels.MANAGED_SELECTOR
    grace_seconds: PositiveFloat = 60.0
    start_timeout_seconds: PositiveFloat = 30.0
    state_path: SettingsPath | None = None
    test_crash_at: Literal["intent", "create", "sigterm", "exit", "start"] | None = None
    """Test only (the chaos test, tests/resilience): SIGKILL policyd right after this step of a
    migration (`policyd.actuators.docker.steps.CRASH_POINTS`). Never set in production."""

    @property
    def managed(self) -> tuple[str, str | None]:
        """The managed label as (key, value or None for "any value")."""
        key, sep, value = self.managed_label.partition("=")
        return key, (value if sep else None)


class DockerSettings(DockerSection):
    """The Docker actuator's settings: the `docker` section (`from_section`) plus what only
    code sets. The events and stats sources read `hosts`, `managed_label`, `api_version`,
    `timeout_seconds` and `stats_workers_per_host` too, through a structural Protocol
    (sources never import actuators).

    `confirm_seconds`: how long a replacement must keep running to count as started;
    `retries` and `backoff_seconds`: the engine calls' retry policy; `api_version` "auto"
    negotiates (Debian's 20.10 speaks 1.41; the SDK's default, 1.45, would be refused).
    """

    confirm_seconds: NonNegativeFloat = 1.0
    retries: NonNegativeInt = 3
    backoff_seconds: NonNegativeFloat = 0.5
    api_version: NonEmptyStr = "auto"
    timeout_seconds: PositiveFloat = 60.0
    stats_workers_per_host: Annotated[int, Field(ge=1)] = 8

    @model_validator(mode="after")
    def _some_host(self) -> Self:
        if not self.hosts:
            raise field_problems([(("hosts",), "name at least one node")])
        return self

    @classmethod
    def from_section(cls, section: DockerSection, **knobs: Any) -> DockerSettings:
        """The actuator's settings for the file's `docker` section (and `knobs`)."""
        return cls(**{name: getattr(section, name) for name in DockerSection.model_fields},
                   **knobs)


def is_managed(found: Mapping[str, str] | None, managed_label: str) -> bool:
    """True when the labels `found` carry `managed_label` (`key=value`, or `key` with any
    value)."""
    key, sep, value = managed_label.partition("=")
    have = (found or {}).get(key)
    return have is not None and (not sep or have == value)
