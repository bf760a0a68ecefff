"""AlertSettings: defaults, and every problem reported at once."""

from __future__ import annotations

import dataclasses

import pytest

from policyd.alerts import AlertSettings


def test_defaults_and_frozen() -> None:
    settings = AlertSettings("http://127.0.0.1:9093")
    assert (settings.resend_interval_seconds, settings.timeout_seconds, settings.retries,
            settings.generator_url) == (60.0, 5.0, 2, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.url = "http://elsewhere"  # type: ignore[misc]


def test_all_problems_at_once() -> None:
    with pytest.raises(ValueError) as caught:
        AlertSettings("alertmanager:9093", resend_interval_seconds=0, timeout_seconds=-1,
                      retries=-1, generator_url="policyd")
    message = str(caught.value)
    for field in ("url:", "resend_interval_seconds:", "timeout_seconds:", "retries:",
                  "generator_url:"):
        assert field in message
