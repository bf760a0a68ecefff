"""How policyd talks to Alertmanager: the settings file's `alertmanager` section, and the
alerter's settings built on it. Frozen pydantic models, passed in by the daemon.

Owns validation only (every problem at once); it reads no files and no environment.
"""

from __future__ import annotations

from typing import Any

from pydantic import NonNegativeInt, PositiveFloat

from policyd.clients.access_settings import HttpAccessFields
from policyd.clients.settings import HttpUrl


class AlertmanagerSection(HttpAccessFields):
    """The settings file's `alertmanager` section (docs/settings.md).

    * `url`: Alertmanager's base URL (`http://alertmanager:9093`); alerts go to `/api/v2/alerts`.
    * `resend_interval_seconds`: a firing failure alert is re-sent at most this often, and the
      times alerts stay visible on their own are multiples of it (see `alerter`).
    * `timeout_seconds`: per HTTP attempt;
    * `bearer_token_file`, `basic_auth`, `tls_config`, `headers`: TLS and authentication
      (`policyd.clients.access_settings`).
    """

    url: HttpUrl
    resend_interval_seconds: PositiveFloat = 60.0
    timeout_seconds: PositiveFloat = 5.0


class AlertSettings(AlertmanagerSection):
    """Where to post alerts and how hard to try: the `alertmanager` section, plus

    * `retries`: extra attempts within one post, after a connection error, a timeout, 429 or
      5xx;
    * `generator_url`: the link Alertmanager shows as the alert's source (e.g. policyd's
      `/metrics` or a dashboard); omitted when None.
    """

    retries: NonNegativeInt = 2
    generator_url: HttpUrl | None = None

    @classmethod
    def from_section(cls, section: AlertmanagerSection, **knobs: Any) -> AlertSettings:
        """The alerter's settings for the file's `alertmanager` section (and `knobs`)."""
        return cls(**{name: getattr(section, name)
                      for name in AlertmanagerSection.model_fields}, **knobs)
