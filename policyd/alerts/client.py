"""The HTTP to Alertmanager: one `POST /api/v2/alerts` per batch, with a few quick retries.

Owns the requests session (TLS and authentication as `policyd.clients.http_access` says) and
nothing else: what to send is `payload`'s business, when to send
it the `alerter`'s. It never raises into its caller: every post ends as `sent`, `rejected` (a
4xx other than 429: the batch would never be accepted, so it is dropped) or `unreachable`
(connection error, timeout, 429 or 5xx after `retries` extra attempts; at once for 401 or 403,
or a credential file that cannot be read, since a rotated credential may fix it: the caller
keeps the batch and tries again later). Failures are logged and counted in `errors_total`; no
log line holds a credential.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

import requests

from policyd.clients import http_access
from policyd.clients.http_access import CredentialError, HttpAccess

log = logging.getLogger(__name__)

PostResult = Literal["sent", "rejected", "unreachable"]
_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_REFUSED = frozenset({401, 403})


class AlertmanagerClient:
    """Posts batches of alerts (already in JSON form) to one Alertmanager."""

    def __init__(self, url: str, *, timeout_seconds: float = 5.0, retries: int = 2,
                 session: requests.Session | None = None, backoff_seconds: float = 0.2,
                 sleep: Callable[[float], None] = time.sleep,
                 access: HttpAccess | None = None) -> None:
        self.endpoint = url.rstrip("/") + "/api/v2/alerts"
        self.timeout_seconds = timeout_seconds
        self.retries = retries
        self.backoff_seconds = backoff_seconds
        self._sleep = sleep
        self._own_session = session is None
        self._session = session if session is not None else http_access.session(access)
        self.errors_total = 0
        """Posts that did not deliver their batch (rejected or unreachable)."""
        self.sent_total = 0
        """Alerts delivered (accepted with 2xx)."""

    def post(self, body: Sequence[dict[str, Any]]) -> PostResult:
        """POST `body` (a JSON array of alerts); never raises."""
        problem, tried = "", 0
        for attempt in range(self.retries + 1):
            tried = attempt + 1
            if attempt:
                self._sleep(self.backoff_seconds * 2 ** (attempt - 1))
            try:
                response = self._session.post(self.endpoint, json=list(body),
                                              timeout=self.timeout_seconds)
            except CredentialError as exc:  # a credential file gone: retrying will not help now
                problem = str(exc)
                break
            except requests.exceptions.RequestException as exc:
                problem = f"{type(exc).__name__}: {exc}"
                continue
            if 200 <= response.status_code < 300:
                self.sent_total += len(body)
                return "sent"
            problem = f"HTTP {response.status_code}: {response.text[:200].strip()}"
            if response.status_code in _REFUSED:  # credentials may be rotated: keep the batch
                problem += " (the server refused policyd's credentials: check bearer_token_file, "
                problem += "basic_auth, tls_config.cert_file)"
                break
            if response.status_code not in _RETRY_STATUSES:
                self.errors_total += 1
                log.error("alertmanager %s rejected %d alert(s), dropping them: %s",
                          self.endpoint, len(body), problem)
                return "rejected"
        self.errors_total += 1
        log.warning("alertmanager %s unreachable after %d attempt(s), keeping %d alert(s) for "
                    "the next try: %s", self.endpoint, tried, len(body), problem)
        return "unreachable"

    def close(self) -> None:
        """Close the session if this client made it."""
        if self._own_session:
            self._session.close()
