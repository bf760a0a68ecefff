"""A Docker SDK client for one engine, with the API version negotiated.

Used by the Docker actuator and by the Docker stats and events sources. `host` is anything
with the fields of `policyd.actuators.docker.DockerHost` (a structural Protocol, so this
module imports neither side).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import docker
import docker.tls

PROBE_VERSION = "1.24"
"""Any version the engine accepts, for the one unversioned `/version` call of "auto"."""


class EngineAddress(Protocol):
    """Where an engine answers: its URL and optional TLS files."""

    @property
    def url(self) -> str: ...
    @property
    def tls_ca(self) -> Path | None: ...
    @property
    def tls_cert(self) -> Path | None: ...
    @property
    def tls_key(self) -> Path | None: ...


def tls_config(host: EngineAddress) -> docker.tls.TLSConfig | bool:
    """Client certificate (and CA) when given; a CA alone verifies the engine; else no TLS."""
    if host.tls_cert is not None and host.tls_key is not None:
        return docker.tls.TLSConfig(
            client_cert=(str(host.tls_cert), str(host.tls_key)),
            ca_cert=str(host.tls_ca) if host.tls_ca else None, verify=bool(host.tls_ca))
    if host.tls_ca is not None:
        return docker.tls.TLSConfig(ca_cert=str(host.tls_ca), verify=True)
    return False


def connect(host: EngineAddress, *, api_version: str = "auto",
            timeout_seconds: float = 60.0) -> docker.DockerClient:
    """An SDK client for `host`; "auto" asks the engine for its API version (Debian's 20.10
    speaks 1.41; the SDK's default, 1.45, would be refused)."""
    tls = tls_config(host)
    version = api_version
    if api_version == "auto":  # asked here, so that a failed probe leaks no socket
        probe = docker.DockerClient(base_url=host.url, version=PROBE_VERSION, tls=tls,
                                    timeout=int(timeout_seconds))
        try:
            version = str(probe.version(api_version=False)["ApiVersion"])
        finally:
            probe.close()
    return docker.DockerClient(base_url=host.url, version=version, tls=tls,
                               timeout=int(timeout_seconds))
