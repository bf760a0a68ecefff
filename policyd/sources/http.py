"""What the two HTTP clients share: the retry policy and the kinds of requests' exceptions.

Pure helpers; the clients (`prometheus.PrometheusSource`, `cadvisor.CadvisorClient`) own the
sessions.
"""

from __future__ import annotations

import requests
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
    if isinstance(exc, requests.exceptions.ConnectionError):
        return "connection", f"cannot connect ({type(exc).__name__}: {exc})"
    if isinstance(exc, requests.exceptions.RequestException):
        return "connection", f"{type(exc).__name__}: {exc}"
    return None
