"""`classify_requests` on the TLS and credential failures: one kind, the ssl module's own words."""

from __future__ import annotations

import ssl
from pathlib import Path

import requests
import urllib3

from policyd.clients.http_access import CredentialError
from policyd.sources.http import classify_requests


def test_a_certificate_check_failure_says_why_under_the_wrappers() -> None:
    inner = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate "
                                            "verify failed: self-signed certificate")
    inner.verify_message = "self-signed certificate"
    inner.reason = "CERTIFICATE_VERIFY_FAILED"
    wrapped = requests.exceptions.SSLError(urllib3.exceptions.MaxRetryError(
        None, "/api/v1/query", urllib3.exceptions.SSLError(inner)))  # type: ignore[arg-type]
    assert classify_requests(wrapped) == (
        "tls", "TLS failed: certificate verify failed: self-signed certificate (check "
               "tls_config: ca_file, cert_file, key_file)")


def test_an_unreadable_credential_file_is_an_auth_error(tmp_path: Path) -> None:
    error = CredentialError(f"cannot read the bearer token file {tmp_path / 't'}: gone")
    assert classify_requests(error) == ("auth", str(error))
