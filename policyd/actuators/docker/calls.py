"""Talking to engines: calling them with retries (clients: `policyd.clients.docker_engine`).

`Caller.call(what, fn)` runs `fn` and retries what is transient: a daemon error (HTTP 5xx),
a refused or reset connection, a timeout; `retries` times with exponential back-off
(`backoff_seconds` * 2**attempt). A 404 (`docker.errors.NotFound`) is never retried: the
container or image is gone, and the caller decides what that means. Anything else, and the
last transient failure, becomes `ActuationError` naming the host and the step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import docker
import docker.errors
import requests

from policyd.actuators.errors import ActuationError

T = TypeVar("T")


def transient(exc: BaseException) -> bool:
    """A failure worth retrying: daemon errors (5xx) and connection problems, never a 404."""
    if isinstance(exc, docker.errors.NotFound):
        return False
    if isinstance(exc, docker.errors.APIError):
        status = exc.status_code
        return status is not None and status >= 500
    return isinstance(exc, requests.exceptions.ConnectionError | requests.exceptions.Timeout)


def describe(exc: BaseException) -> str:
    """A short one-line text for a Docker SDK or requests error."""
    if isinstance(exc, docker.errors.APIError):
        detail = exc.explanation or str(exc)
        code = exc.status_code
        return f"HTTP {code}: {detail}" if code else str(detail)
    return f"{type(exc).__name__}: {exc}"


@dataclass
class Caller:
    """Runs engine calls with the retry policy of the module docstring."""

    retries: int
    backoff_seconds: float
    sleep: Callable[[float], None] = time.sleep

    def call(self, where: str, what: str, fn: Callable[[], T]) -> T:
        """`fn()`, retried; NotFound passes through unchanged; other failures raise
        ActuationError("<where>: <what> failed after N attempts: <reason>")."""
        attempt = 0
        while True:
            try:
                return fn()
            except docker.errors.NotFound:
                raise
            except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
                if not transient(exc) or attempt >= self.retries:
                    tries = f" after {attempt + 1} attempts" if attempt else ""
                    raise ActuationError(f"{where}: {what} failed{tries}: {describe(exc)}"
                                         ) from exc
                self.sleep(self.backoff_seconds * 2 ** attempt)
                attempt += 1
