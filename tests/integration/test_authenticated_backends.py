"""The Prometheus source and the Alertmanager client against a real Prometheus and a real
Alertmanager started with `--web.config.file`: TLS with certificates this test makes, client
certificates required, basic auth. A wrong credential is one clear error (kind `auth` or `tls`)
that never shows the password; a password file fixed while running is used at the next cycle.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from policyd.alerts import AlertmanagerClient
from policyd.clients.http_access import HttpAccess
from policyd.sources import SourceError, kubernetes
from policyd.sources.prometheus import PrometheusSource
from tests.integration.secured import (
    USER,
    Certificates,
    Server,
    certificates,
    secured_alertmanager,
    secured_prometheus,
)
from tests.sources.builders import flowcon

pytestmark = pytest.mark.slow

PASSWORD = "correct-horse-battery-staple"
WRONG = "wrong-password-do-not-log"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory, certs: Certificates
               ) -> Iterator[Server]:
    with secured_prometheus(tmp_path_factory.mktemp("prometheus"), certs, PASSWORD) as server:
        yield server


def access(certs: Certificates, password_file: Path) -> HttpAccess:
    return HttpAccess(basic_auth_username=USER, basic_auth_password_file=password_file,
                      ca_file=certs.ca, cert_file=certs.client_cert, key_file=certs.client_key,
                      headers={"X-Scope-OrgID": "team-a"})


def no_secret_in(caplog: pytest.LogCaptureFixture, *secrets: str) -> None:
    for record in caplog.records:
        for secret in secrets:
            assert secret not in record.getMessage()


def test_the_source_reads_through_tls_client_certificates_and_basic_auth(
        prometheus: Server, certs: Certificates, tmp_path: Path) -> None:
    password = tmp_path / "password"
    password.write_text(PASSWORD + "\n")
    source = PrometheusSource(prometheus.url, kubernetes(), timeout_seconds=5, retries=0,
                              access=access(certs, password))
    snapshot = source.snapshot([flowcon()])  # every query answered (no jobs are scraped)
    assert snapshot.containers == () and source.errors_total == {}


def test_a_wrong_password_is_one_auth_error_and_a_fixed_file_is_read_at_the_next_cycle(
        prometheus: Server, certs: Certificates, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    password = tmp_path / "password"
    password.write_text(WRONG)
    source = PrometheusSource(prometheus.url, kubernetes(), timeout_seconds=5, retries=0,
                              access=access(certs, password))
    with caplog.at_level(logging.DEBUG), pytest.raises(SourceError) as caught:
        source.snapshot([flowcon()])
    assert caught.value.kind == "auth" and "HTTP 401" in str(caught.value)
    assert "basic_auth" in str(caught.value) and WRONG not in str(caught.value)
    assert len([r for r in caplog.records if r.levelno >= logging.ERROR]) == 1
    no_secret_in(caplog, WRONG, PASSWORD)
    password.write_text(PASSWORD)  # rotated: no restart
    source.snapshot([flowcon()])
    assert source.errors_total == {"auth": 1}


@pytest.mark.parametrize("broken", ["no-ca", "no-client-certificate", "missing-password-file"])
def test_a_broken_access_is_one_clear_error(prometheus: Server, certs: Certificates,
                                            tmp_path: Path, broken: str,
                                            caplog: pytest.LogCaptureFixture) -> None:
    password = tmp_path / "password"
    password.write_text(PASSWORD)
    given = access(certs, password)
    given = {"no-ca": replace(given, ca_file=None),
             "no-client-certificate": replace(given, cert_file=None, key_file=None),
             "missing-password-file": replace(given,
                                              basic_auth_password_file=tmp_path / "gone")}[broken]
    source = PrometheusSource(prometheus.url, kubernetes(), timeout_seconds=5, retries=0,
                              access=given)
    with caplog.at_level(logging.DEBUG), pytest.raises(SourceError) as caught:
        source.snapshot([flowcon()])
    expected = {"no-ca": ("tls", "certificate verify failed"),
                "no-client-certificate": (None, prometheus.url),
                "missing-password-file": ("auth", str(tmp_path / "gone"))}[broken]
    kind, says = expected
    if kind is not None:
        assert caught.value.kind == kind
    assert says in str(caught.value) and "\n" not in str(caught.value)
    assert len([r for r in caplog.records if r.levelno >= logging.ERROR]) == 1
    no_secret_in(caplog, PASSWORD)


def test_alerts_reach_an_alertmanager_behind_tls_and_basic_auth(
        tmp_path: Path, certs: Certificates, caplog: pytest.LogCaptureFixture) -> None:
    password = tmp_path / "password"
    password.write_text(WRONG)
    alert = [{"labels": {"alertname": "PolicydAuthTest"}, "annotations": {}}]
    with secured_alertmanager(tmp_path, certs, PASSWORD) as am:
        client = AlertmanagerClient(am.url, timeout_seconds=5, retries=1,
                                    access=access(certs, password), sleep=lambda _s: None)
        with caplog.at_level(logging.DEBUG):
            assert client.post(alert) == "unreachable"  # kept for the next try
        assert any("HTTP 401" in r.getMessage() and "basic_auth" in r.getMessage()
                   for r in caplog.records)
        no_secret_in(caplog, WRONG, PASSWORD)
        password.write_text(PASSWORD)
        assert client.post(alert) == "sent"
        assert (client.sent_total, client.errors_total) == (1, 1)
