"""How policyd gets through to an HTTP API behind TLS and authentication (Prometheus, Thanos,
Mimir, VictoriaMetrics, Alertmanager): one `HttpAccess` value and the requests session it
makes.

What real platforms ask for, as KEDA's Prometheus scaler and krr support it:

* a bearer token read from a file (a Kubernetes ServiceAccount token for OpenShift's Thanos
  querier), read again whenever the file changes, so a rotated token is used at the next
  request without a restart;
* basic auth with the password read from a file (again, re-read when it changes);
* a CA bundle to verify the server, a client certificate (and its key) for mutual TLS;
* extra headers, such as Mimir's and Cortex's tenant header `X-Scope-OrgID`.

Secrets never reach a message: a credential file that cannot be read is a `CredentialError`
naming the file and the reason, and the header values, token and password are never logged.
The token and password files are read at the request (that is what makes rotation work); the
certificate, key and CA files are checked once, when the session is made (`check_files`).

Must not: know which API it talks to, retry, or decode answers (its callers do).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import requests
import requests.auth

HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
"""An HTTP header name (an RFC 9110 token)."""


class CredentialError(Exception):
    """A credential file could not be read (the message names the file, never its content)."""


@dataclass(frozen=True, kw_only=True)
class HttpAccess:
    """TLS and authentication for one HTTP API (see the module docstring); all optional."""

    bearer_token_file: Path | None = None
    basic_auth_username: str | None = None
    basic_auth_password_file: Path | None = None
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        problems = access_problems(vars(self))
        if problems:
            raise ValueError("; ".join(f"{where}: {why}" for where, why in problems))
        object.__setattr__(self, "headers", MappingProxyType(dict(self.headers)))

    @property
    def authenticated(self) -> bool:
        return self.bearer_token_file is not None or self.basic_auth_username is not None

    def describe(self) -> str:
        """How requests are authenticated, for logs (file names, never secrets)."""
        parts = []
        if self.bearer_token_file is not None:
            parts.append(f"bearer token from {self.bearer_token_file}")
        if self.basic_auth_username is not None:
            parts.append(f"basic auth as {self.basic_auth_username!r} (password from "
                         f"{self.basic_auth_password_file})")
        if self.cert_file is not None:
            parts.append(f"client certificate {self.cert_file}")
        if self.ca_file is not None:
            parts.append(f"CA bundle {self.ca_file}")
        if self.headers:
            parts.append("headers " + ", ".join(sorted(self.headers)))
        return "; ".join(parts) or "no authentication"


def access_problems(fields: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Every inconsistency of `HttpAccess` fields (a mapping of its field names): (field, why),
    a header's problem at `headers.<name>`."""
    problems = []
    username, password_file = fields.get("basic_auth_username"), fields.get(
        "basic_auth_password_file")
    if (username is None) != (password_file is None):
        given = "basic_auth_username" if username is not None else "basic_auth_password_file"
        problems.append((given, "basic_auth_username and basic_auth_password_file go together"))
    if fields.get("bearer_token_file") is not None and username is not None:
        problems.append(("bearer_token_file", "use either a bearer token or basic auth, not "
                                              "both"))
    if fields.get("key_file") is not None and fields.get("cert_file") is None:
        problems.append(("key_file", "a key file needs its cert_file"))
    headers: Mapping[str, str] = fields.get("headers") or {}
    for name, value in headers.items():
        if not HEADER_NAME.match(name):
            problems.append((f"headers.{name}", "is not an HTTP header name"))
        elif name.lower() == "authorization":
            problems.append((f"headers.{name}", "credentials do not belong in the settings: "
                                                "use bearer_token_file or basic auth"))
        if "\n" in value or "\r" in value:
            problems.append((f"headers.{name}", "a header value cannot hold a line break"))
    return problems


class _FileSecret:
    """A secret kept in a file, read again when the file changes (a rotated token)."""

    def __init__(self, path: Path, what: str) -> None:
        self.path, self.what = path, what
        self._stamp: tuple[int, int, int] | None = None
        self._value = ""

    def read(self) -> str:
        try:
            info = os.stat(self.path)
            stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
            if stamp != self._stamp:
                self._value = self.path.read_text(encoding="utf-8").strip()
                self._stamp = stamp
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise CredentialError(f"cannot read the {self.what} file {self.path}: "
                                  f"{reason}") from None
        if not self._value:
            raise CredentialError(f"the {self.what} file {self.path} is empty")
        return self._value


class BearerTokenFile(requests.auth.AuthBase):
    """`Authorization: Bearer <token>`, the token read from a file (again when it changes)."""

    def __init__(self, path: Path) -> None:
        self.secret = _FileSecret(path, "bearer token")

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {self.secret.read()}"
        return request


class BasicAuthFile(requests.auth.AuthBase):
    """Basic auth, the password read from a file (again when it changes)."""

    def __init__(self, username: str, password_file: Path) -> None:
        self.username = username
        self.secret = _FileSecret(password_file, "basic auth password")

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        signed: requests.PreparedRequest = requests.auth.HTTPBasicAuth(
            self.username, self.secret.read())(request)
        return signed


def check_files(access: HttpAccess) -> None:
    """ValueError naming the first certificate, key or CA file that cannot be read (they are
    read once per connection by the TLS library, which would fail later and less clearly)."""
    for what, path in (("ca_file", access.ca_file), ("cert_file", access.cert_file),
                       ("key_file", access.key_file)):
        if path is not None and not os.access(path, os.R_OK):
            reason = "no such file" if not path.exists() else "not readable"
            raise ValueError(f"{what} {path}: {reason}")


class _Session(requests.Session):
    """A session whose own CA bundle wins over `REQUESTS_CA_BUNDLE` / `CURL_CA_BUNDLE`
    (requests lets those variables replace `Session.verify` when a request does not pass
    `verify` itself)."""

    def merge_environment_settings(self, url: Any, proxies: Any, stream: Any, verify: Any,
                                   cert: Any) -> Any:
        if verify is None and isinstance(self.verify, str):
            verify = self.verify
        return super().merge_environment_settings(url, proxies, stream, verify, cert)


def session(access: HttpAccess | None) -> requests.Session:
    """A requests session that authenticates, verifies and identifies itself as `access`
    says (a plain session when None)."""
    made = _Session()
    if access is None:
        return made
    check_files(access)
    if access.ca_file is not None:
        made.verify = str(access.ca_file)
    if access.cert_file is not None:
        made.cert = ((str(access.cert_file), str(access.key_file)) if access.key_file
                     else str(access.cert_file))
    if access.bearer_token_file is not None:
        made.auth = BearerTokenFile(access.bearer_token_file)
    elif access.basic_auth_username is not None and access.basic_auth_password_file:
        made.auth = BasicAuthFile(access.basic_auth_username, access.basic_auth_password_file)
    made.headers.update(access.headers)
    return made
