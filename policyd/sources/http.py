"""What the two HTTP clients share: the retry policy and the kinds of requests' exceptions.

Pure helpers; the clients (`prometheus.PrometheusSource`, `cadvisor.CadvisorClient`) own the
sessions.
"""

from __future__ import annotations

import ssl

import requests
import urllib3.exceptions
from urllib3.util.retry import Retry

from policyd.clients.http_access import CredentialError

RETRY_STATUSES = (429, 500, 502, 503, 504)


def retry_policy(retries: int, backoff_seconds: float) -> Retry:
    """Retry connection errors, read errors and 429/5xx answers `retries` times, then raise."""
    return Retry(total=retries, connect=retries, read=retries, status=retries,
                 status_forcelist=RETRY_STATUSES, backoff_factor=backoff_seconds,
                 allowed_methods=None, raise_on_status=True)


def classify_requests(exc: BaseException) -> tuple[str, str] | None:
    """(kind, detail) for an exception of requests or of `policyd.clients.http_access` (see
    `errors.KINDS`), else None."""
    if isinstance(exc, CredentialError):
        return "auth", str(exc)
    if isinstance(exc, requests.exceptions.SSLError):
        return "tls", (f"TLS failed: {_tls_reason(exc)} (check tls_config: ca_file, cert_file, "
                       f"key_file)")
    if isinstance(exc, requests.exceptions.JSONDecodeError):
        return "bad_response", f"the answer is not JSON ({exc})"
    if isinstance(exc, requests.exceptions.Timeout):
        return "timeout", f"no answer in time ({type(exc).__name__})"
    if isinstance(exc, requests.exceptions.RetryError):
        return "http", f"gave up after retries: {exc}"
    if isinstance(exc, requests.exceptions.ConnectionError) and _timed_out(exc):
        return "timeout", f"no answer in time after the retries ({exc})"
    if isinstance(exc, requests.exceptions.ConnectionError):
        return "connection", f"cannot connect ({type(exc).__name__}: {exc})"
    if isinstance(exc, requests.exceptions.RequestException):
        return "connection", f"{type(exc).__name__}: {exc}"
    return None


def _tls_reason(exc: BaseException) -> str:
    """The ssl module's own words under requests' and urllib3's wrappers (the certificate
    check's message when that is what failed)."""
    seen: BaseException | None = exc
    for _ in range(6):
        if isinstance(seen, ssl.SSLCertVerificationError):
            return f"certificate verify failed: {seen.verify_message}"
        if isinstance(seen, ssl.SSLError):
            return str(seen.reason or seen)
        inner = seen.args[0] if seen is not None and seen.args else None
        if not isinstance(inner, ssl.SSLError):  # urllib3's MaxRetryError: its `reason`
            inner = getattr(inner, "reason", inner)
        if not isinstance(inner, BaseException):
            break
        seen = inner
    return str(exc)


def _timed_out(exc: requests.exceptions.ConnectionError) -> bool:
    """requests reports retries that all timed out as a ConnectionError whose cause (a urllib3
    MaxRetryError) has a timeout as its reason. (urllib3 2 makes a refused connection,
    NewConnectionError, a kind of ConnectTimeoutError: it is not a timeout.)"""
    cause = exc.args[0] if exc.args else None
    reason = getattr(cause, "reason", None)
    errors = urllib3.exceptions
    return isinstance(reason, errors.ReadTimeoutError) or (
        isinstance(reason, errors.ConnectTimeoutError)
        and not isinstance(reason, errors.NewConnectionError))
