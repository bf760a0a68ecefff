"""The settings fields that say how to get through to an HTTP API behind TLS and authentication,
shared by the `prometheus` and `alertmanager` sections (docs/settings.md), in the words of
Prometheus's own `http_config` so that users can copy what their scrape configs say:

    bearer_token_file: /var/run/secrets/kubernetes.io/serviceaccount/token
    basic_auth: {username: policyd, password_file: /etc/policyd/password}
    tls_config: {ca_file: ca.pem, cert_file: client.pem, key_file: client-key.pem}
    headers: {X-Scope-OrgID: team-a}

`HttpAccessFields.access()` turns them into the `HttpAccess` value the HTTP clients use
(`policyd.clients.http_access`). Every problem is reported at its field, all at once; no file
is opened here (paths are only resolved against the settings file's directory).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Self

from pydantic import model_validator

from policyd.clients.http_access import HttpAccess, access_problems
from policyd.clients.settings import (
    NonEmptyStr,
    ReadOnly,
    SettingsModel,
    SettingsPath,
    field_problems,
)


class BasicAuth(SettingsModel):
    """`basic_auth`: the user name, and the file holding the password (read at each request,
    so a rotated password is used without a restart)."""

    username: NonEmptyStr
    password_file: SettingsPath


class TlsConfig(SettingsModel):
    """`tls_config`: the CA bundle that verifies the server (else the system's), and a client
    certificate with its key for mutual TLS (`key_file` may be left out when `cert_file` holds
    both)."""

    ca_file: SettingsPath | None = None
    cert_file: SettingsPath | None = None
    key_file: SettingsPath | None = None


_WHERE = {"bearer_token_file": ("bearer_token_file",),
          "basic_auth_username": ("basic_auth", "username"),
          "basic_auth_password_file": ("basic_auth", "password_file"),
          "key_file": ("tls_config", "key_file")}


def _where(field: str) -> tuple[str, ...]:
    """Where an `HttpAccess` field is written in the settings file."""
    if field.startswith("headers."):
        return ("headers", field.removeprefix("headers."))
    return _WHERE.get(field, (field,))


class HttpAccessFields(SettingsModel):
    """The fields of the module docstring, for a section to inherit."""

    bearer_token_file: SettingsPath | None = None
    basic_auth: BasicAuth | None = None
    tls_config: TlsConfig | None = None
    headers: Annotated[Mapping[str, str], ReadOnly] = {}

    def _fields(self) -> dict[str, object]:
        basic, tls = self.basic_auth, self.tls_config or TlsConfig()
        return {"bearer_token_file": self.bearer_token_file,
                "basic_auth_username": basic.username if basic else None,
                "basic_auth_password_file": basic.password_file if basic else None,
                "ca_file": tls.ca_file, "cert_file": tls.cert_file, "key_file": tls.key_file,
                "headers": dict(self.headers)}

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        problems = access_problems(self._fields())
        if problems:
            raise field_problems([(_where(field), why) for field, why in problems])
        return self

    def access(self) -> HttpAccess | None:
        """The `HttpAccess` these fields describe; None when they say nothing (plain HTTP, or
        HTTPS verified against the system's CAs)."""
        fields = self._fields()
        if not any(fields.values()):
            return None
        return HttpAccess(**fields)  # type: ignore[arg-type]
