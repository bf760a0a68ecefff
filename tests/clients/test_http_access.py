"""`policyd.clients.http_access` against `responses`: what each setting puts on the request, a
rotated token or password used at the next request, and credential problems as one message
naming the file, never the secret."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import responses

from policyd.clients.http_access import CredentialError, HttpAccess, access_problems, session

URL = "http://prometheus.test:9090/api/v1/query"


def sent_headers(access: HttpAccess) -> dict[str, str]:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        rsps.get(URL, json={})
        session(access).get(URL, timeout=1)
        return dict(rsps.calls[0].request.headers)


def test_bearer_token_is_read_again_when_the_file_rotates(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first-token\n")
    access = HttpAccess(bearer_token_file=token)
    made = session(access)
    with responses.RequestsMock() as rsps:
        rsps.get(URL, json={})
        made.get(URL, timeout=1)
        token.write_text("second-token-longer\n")  # a kubelet rotation replaces the file
        made.get(URL, timeout=1)
        assert [c.request.headers["Authorization"] for c in rsps.calls] == [
            "Bearer first-token", "Bearer second-token-longer"]


def test_basic_auth_reads_its_password_file(tmp_path: Path) -> None:
    password = tmp_path / "password"
    password.write_text("s3cret\n")
    got = sent_headers(HttpAccess(basic_auth_username="policyd",
                                  basic_auth_password_file=password))
    assert got["Authorization"] == "Basic " + base64.b64encode(b"policyd:s3cret").decode()


def test_extra_headers_go_on_every_request() -> None:
    got = sent_headers(HttpAccess(headers={"X-Scope-OrgID": "team-a"}))
    assert got["X-Scope-OrgID"] == "team-a" and "Authorization" not in got


@pytest.mark.parametrize(("content", "says"), [
    pytest.param(None, "No such file or directory", id="missing"),
    pytest.param("\n", "is empty", id="empty"),
])
def test_an_unreadable_token_is_one_error_naming_the_file(tmp_path: Path, content: str | None,
                                                          says: str) -> None:
    token = tmp_path / "token"
    if content is not None:
        token.write_text(content)
    with pytest.raises(CredentialError) as caught:
        sent_headers(HttpAccess(bearer_token_file=token))
    assert str(token) in str(caught.value) and says in str(caught.value)


def test_describe_names_files_never_secrets(tmp_path: Path) -> None:
    password = tmp_path / "password"
    password.write_text("s3cret")
    access = HttpAccess(basic_auth_username="policyd", basic_auth_password_file=password,
                        headers={"X-Scope-OrgID": "team-a"})
    text = access.describe()
    assert "s3cret" not in text and "team-a" not in text and str(password) in text


def test_a_missing_ca_file_is_reported_when_the_session_is_made(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"ca_file .*ca\.pem: no such file"):
        session(HttpAccess(ca_file=tmp_path / "ca.pem"))


@pytest.mark.parametrize(("fields", "expected"), [
    pytest.param({"bearer_token_file": Path("t"), "basic_auth_username": "u",
                  "basic_auth_password_file": Path("p")},
                 [("bearer_token_file", "use either a bearer token or basic auth, not both")],
                 id="token-and-basic"),
    pytest.param({"basic_auth_username": "u"},
                 [("basic_auth_username",
                   "basic_auth_username and basic_auth_password_file go together")],
                 id="user-without-password"),
    pytest.param({"key_file": Path("k")}, [("key_file", "a key file needs its cert_file")],
                 id="key-without-cert"),
    pytest.param({"headers": {"Authorization": "Bearer x", "bad name": "v", "X-A": "a\nb"}},
                 [("headers.Authorization", "credentials do not belong in the settings: use "
                                            "bearer_token_file or basic auth"),
                  ("headers.bad name", "is not an HTTP header name"),
                  ("headers.X-A", "a header value cannot hold a line break")],
                 id="headers"),
])
def test_every_problem_is_listed(fields: dict[str, object],
                                 expected: list[tuple[str, str]]) -> None:
    assert access_problems(fields) == expected


def test_the_ca_file_wins_over_requests_ca_bundle_in_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("not read here")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
    made = session(HttpAccess(ca_file=ca))
    merged = made.merge_environment_settings("https://p:9090", {}, None, None, None)
    assert merged["verify"] == str(ca)
