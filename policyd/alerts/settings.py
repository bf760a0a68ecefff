"""How policyd talks to Alertmanager: one frozen value, passed in by the daemon.

Owns validation only (every problem at once); it reads no files and no environment.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AlertSettings:
    """Where to post alerts and how hard to try.

    * `url`: Alertmanager's base URL (`http://alertmanager:9093`); alerts go to `/api/v2/alerts`.
    * `resend_interval_seconds`: a firing failure alert is re-sent at most this often, and the
      times alerts stay visible on their own are multiples of it (see `alerter`).
    * `timeout_seconds`: per HTTP attempt; `retries`: extra attempts within one post, after a
      connection error, a timeout, 429 or 5xx.
    * `generator_url`: the link Alertmanager shows as the alert's source (e.g. policyd's
      `/metrics` or a dashboard); omitted when None.
    """

    url: str
    resend_interval_seconds: float = 60.0
    timeout_seconds: float = 5.0
    retries: int = 2
    generator_url: str | None = None

    def __post_init__(self) -> None:
        problems = []
        if not self.url.startswith(("http://", "https://")):
            problems.append(f"url: must start with http:// or https://, got {self.url!r}")
        if not self.resend_interval_seconds > 0:
            problems.append(
                f"resend_interval_seconds: must be > 0, got {self.resend_interval_seconds}")
        if not self.timeout_seconds > 0:
            problems.append(f"timeout_seconds: must be > 0, got {self.timeout_seconds}")
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) \
                or self.retries < 0:
            problems.append(f"retries: must be an integer >= 0, got {self.retries!r}")
        if self.generator_url is not None and not self.generator_url.startswith(
                ("http://", "https://")):
            problems.append(
                f"generator_url: must start with http:// or https://, got {self.generator_url!r}")
        if problems:
            raise ValueError("alert settings: " + "; ".join(problems))
