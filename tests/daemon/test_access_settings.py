"""The access fields of the `prometheus` and `alertmanager` sections: paths resolved against
the settings file, every problem at its own line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from policyd.clients.http_access import HttpAccess
from policyd.daemon import SettingsError, load_settings_text

BASE = Path("/etc/policyd")


def test_paths_are_relative_to_the_settings_file_and_make_one_access() -> None:
    settings = load_settings_text(
        "prometheus:\n  url: https://thanos:9091\n  bearer_token_file: secrets/token\n"
        "  tls_config: {ca_file: certs/ca.pem, cert_file: certs/c.pem, key_file: certs/k.pem}\n"
        "  headers: {X-Scope-OrgID: team-a}\n"
        "alertmanager:\n  url: https://am:9093\n"
        "  basic_auth: {username: policyd, password_file: /run/am-password}\n",
        "s.yaml", base=BASE)
    assert settings.prometheus.access() == HttpAccess(
        bearer_token_file=BASE / "secrets/token", ca_file=BASE / "certs/ca.pem",
        cert_file=BASE / "certs/c.pem", key_file=BASE / "certs/k.pem",
        headers={"X-Scope-OrgID": "team-a"})
    assert settings.alertmanager is not None
    assert settings.alertmanager.access() == HttpAccess(
        basic_auth_username="policyd", basic_auth_password_file=Path("/run/am-password"))


def test_no_access_fields_means_no_access() -> None:
    settings = load_settings_text("prometheus:\n  url: http://p:9090\n", "s.yaml", base=BASE)
    assert settings.prometheus.access() is None


def test_every_problem_at_its_line_and_field() -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings_text(
            "prometheus:\n  url: http://p:9090\n  bearer_token_file: t\n"
            "  basic_auth: {username: u, password_file: p}\n"
            "  tls_config: {key_file: k.pem}\n"
            "  headers: {Authorization: Bearer abc}\n", "s.yaml", base=BASE)
    got = [str(p) for p in caught.value.problems]
    assert got == [
        "s.yaml:3: prometheus.bearer_token_file: use either a bearer token or basic auth, "
        "not both",
        "s.yaml:5: prometheus.tls_config.key_file: a key file needs its cert_file",
        "s.yaml:6: prometheus.headers.Authorization: credentials do not belong in the "
        "settings: use bearer_token_file or basic auth"]
    assert all("abc" not in line for line in got)
