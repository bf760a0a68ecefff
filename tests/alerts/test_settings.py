"""AlertSettings: defaults, and every problem reported at once."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from policyd.alerts import AlertmanagerSection, AlertSettings


def test_defaults_and_frozen() -> None:
    settings = AlertSettings(url="http://127.0.0.1:9093")
    assert (settings.resend_interval_seconds, settings.timeout_seconds, settings.retries,
            settings.generator_url) == (60.0, 5.0, 2, None)
    with pytest.raises(ValidationError, match="frozen"):
        settings.url = "http://elsewhere"  # type: ignore[misc]


def test_all_problems_at_once() -> None:
    with pytest.raises(ValidationError) as caught:
        AlertSettings(url="alertmanager:9093", resend_interval_seconds=0, timeout_seconds=-1,
                      retries=-1, generator_url="policyd")
    assert [e["loc"] for e in caught.value.errors()] == [
        ("url",), ("resend_interval_seconds",), ("timeout_seconds",), ("retries",),
        ("generator_url",)]


def test_built_from_the_settings_files_section() -> None:
    section = AlertmanagerSection(url="http://am:9093", resend_interval_seconds=30)
    settings = AlertSettings.from_section(section, retries=0)
    assert (settings.url, settings.resend_interval_seconds, settings.timeout_seconds,
            settings.retries) == ("http://am:9093", 30, 5, 0)
