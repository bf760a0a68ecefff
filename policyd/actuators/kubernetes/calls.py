"""Talking to the API server: the client, the write rate limit, and the retry policy.

`Caller.call(what, method, *args, write=..., **kwargs)` calls one client method with
`_preload_content=False` and returns the response body as plain JSON (dicts and lists), so
policyd reads what the server sent rather than a client version's models (the client's
generated models differ between its releases 32-36 and 37). Writes first take a token from
`TokenBucket` (QPS and burst): a cycle with 100 resizes is spread over time, never dropped.
Failures:

* 5xx and connection errors: retried `retries` times, back-off `backoff_seconds * 2**attempt`;
* statuses in `passthrough` (default 404 and 409): raised unchanged as `ApiException`, never
  retried: the caller decides (404: gone; 409: `read_modify_write` re-reads and retries once);
* anything else, and the last transient failure: `ActuationError` naming the step.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import urllib3
from kubernetes import client as k8s  # type: ignore[import-untyped]
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException  # type: ignore[import-untyped]

from policyd.actuators.errors import ActuationError
from policyd.actuators.kubernetes.settings import KubernetesSettings
from policyd.clients.kubernetes_json import body

T = TypeVar("T")
NOT_FOUND, CONFLICT, TOO_MANY = 404, 409, 429
DEFAULT_PASSTHROUGH = frozenset({NOT_FOUND, CONFLICT})


def api_client(settings: KubernetesSettings) -> Any:
    """An ApiClient: `settings.host` (plain URL), else in-cluster, else a kubeconfig file."""
    if settings.host is not None:
        conf = k8s.Configuration()
        conf.host = settings.host
        return k8s.ApiClient(conf)
    try:
        k8s_config.load_incluster_config()
    except k8s_config.ConfigException:
        k8s_config.load_kube_config(
            config_file=str(settings.kubeconfig) if settings.kubeconfig else None)
    return k8s.ApiClient()


def status_of(exc: BaseException) -> int | None:
    return int(exc.status) if isinstance(exc, ApiException) and exc.status else None


def describe(exc: BaseException) -> str:
    """A one-line reason: `HTTP 422 Unprocessable Entity: <the Status message>`."""
    if isinstance(exc, ApiException):
        message = ""
        try:
            message = str(json.loads(exc.body or "{}").get("message") or "")
        except (ValueError, AttributeError):
            message = str(exc.body or "")[:200]
        return f"HTTP {exc.status} {exc.reason or ''}".rstrip() + (f": {message}" if message
                                                                    else "")
    return f"{type(exc).__name__}: {exc}"


def transient(exc: BaseException) -> bool:
    status = status_of(exc)
    if status is not None:
        return status >= 500
    return isinstance(exc, urllib3.exceptions.HTTPError | OSError)


@dataclass
class TokenBucket:
    """`qps` tokens a second, at most `burst` saved; `acquire()` waits for one (FIFO: the
    lock is held while waiting, so writers go in turn)."""

    qps: float
    burst: int
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    _tokens: float = field(init=False)
    _at: float | None = field(init=False, default=None)
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._tokens = float(self.burst)

    def acquire(self) -> float:
        """Take one token; the seconds waited. After a wait the token is credited as of
        the moment it was due (no re-check: float rounding could otherwise spin)."""
        with self._lock:
            now = self.clock()
            if self._at is not None:
                self._tokens = min(float(self.burst),
                                   self._tokens + max(0.0, now - self._at) * self.qps)
            self._at = now
            pause = 0.0
            if self._tokens < 1.0:
                pause = (1.0 - self._tokens) / self.qps
                self.sleep(pause)
                self._tokens, self._at = 1.0, now + pause
            self._tokens -= 1.0
            return pause


@dataclass
class Caller:
    """Runs API calls with the policy of the module docstring."""

    retries: int
    backoff_seconds: float
    bucket: TokenBucket
    timeout_seconds: float = 30.0
    sleep: Callable[[float], None] = time.sleep
    writes: int = 0

    def call(self, what: str, method: Callable[..., Any], *args: Any, write: bool = False,
             passthrough: frozenset[int] = DEFAULT_PASSTHROUGH, **kwargs: Any) -> Any:
        """`method(*args, **kwargs)` -> the JSON body ({} when empty)."""
        attempt = 0
        while True:
            if write:
                self.bucket.acquire()
                self.writes += 1
            try:
                response = method(*args, _preload_content=False,
                                  _request_timeout=self.timeout_seconds, **kwargs)
                return body(response)
            except (ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
                if status_of(exc) in passthrough:
                    raise
                if not transient(exc) or attempt >= self.retries:
                    tries = f" after {attempt + 1} attempts" if attempt else ""
                    raise ActuationError(f"{what} failed{tries}: {describe(exc)}") from exc
                self.sleep(self.backoff_seconds * 2 ** attempt)
                attempt += 1

    def read_modify_write(self, what: str, read: Callable[[], T],
                          write: Callable[[T], Any]) -> Any:
        """`write(read())`; on 409 Conflict, read again and write once more."""
        try:
            return write(read())
        except ApiException as exc:
            if status_of(exc) != CONFLICT:
                raise
        try:
            return write(read())
        except ApiException as exc:
            if status_of(exc) == CONFLICT:
                raise ActuationError(f"{what}: conflict twice (the object keeps changing); "
                                     "retried next cycle") from exc
            raise


