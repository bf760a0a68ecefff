"""What the two HTTP clients share: the retry policy and the kinds of requests' exceptions.

Pure helpers; the clients (`prometheus.PrometheusSource`, `cadvisor.CadvisorClient`) own the
sessions.
"""

from __future__ import annotations

import requests
import urllib3.exceptions
from urllib3.util.retry import Retry

RETRY_STATUSES = (429, 500, 502, 503, 504)


def retry_policy(retries: int, backoff_seconds: float) -> Retry:
    """Retry connection errors, read errors and 429/5xx answers `retries` times, then raise."""
    return Retry(total=retries, connect=retries, read=retries, status=retries,
                 status_forcelist=RETRY_STATUSES, backoff_factor=backoff_seconds,
                 allowed_methods=None, raise_on_status=True)


def classify_requests(exc: BaseException) -> tuple[str, str] | None:
    """(kind, detail) for an exception of requests (see `errors.KINDS`), else None."""
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
