"""AlertmanagerClient against `responses`: 2xx, retries, rejections and network errors, which
are counted and never raised."""

from __future__ import annotations

import json

import pytest
import requests
import responses

from policyd.alerts import AlertmanagerClient

URL = "http://alertmanager.test:9093"
ENDPOINT = f"{URL}/api/v2/alerts"
BODY = [{"labels": {"alertname": "PolicydMigration"}, "annotations": {},
         "startsAt": "2023-11-14T22:13:20.000Z", "endsAt": "2023-11-14T22:16:20.000Z"}]


def client(retries: int = 2) -> AlertmanagerClient:
    return AlertmanagerClient(URL + "/", timeout_seconds=1.0, retries=retries,
                              sleep=lambda _seconds: None)


@responses.activate
def test_2xx_sends_one_json_array() -> None:
    responses.post(ENDPOINT, status=200)
    c = client()
    assert c.post(BODY) == "sent"
    assert len(responses.calls) == 1
    request = responses.calls[0].request
    assert request.headers["Content-Type"] == "application/json"
    assert json.loads(request.body or b"") == BODY
    assert (c.sent_total, c.errors_total) == (1, 0)


@responses.activate
def test_500_then_retry_succeeds() -> None:
    responses.post(ENDPOINT, status=500, body="busy")
    responses.post(ENDPOINT, status=200)
    c = client()
    assert c.post(BODY) == "sent"
    assert len(responses.calls) == 2
    assert c.errors_total == 0


@responses.activate
def test_500_every_time_gives_up_after_retries(caplog: pytest.LogCaptureFixture) -> None:
    responses.post(ENDPOINT, status=503)
    c = client(retries=2)
    assert c.post(BODY) == "unreachable"
    assert len(responses.calls) == 3
    assert c.errors_total == 1
    assert "HTTP 503" in caplog.text


@responses.activate
def test_connection_error_is_counted_never_raised(caplog: pytest.LogCaptureFixture) -> None:
    responses.post(ENDPOINT, body=requests.exceptions.ConnectionError("refused"))
    c = client(retries=1)
    assert c.post(BODY) == "unreachable"
    assert c.post(BODY) == "unreachable"
    assert len(responses.calls) == 4
    assert c.errors_total == 2
    assert "ConnectionError: refused" in caplog.text


@responses.activate
def test_timeout_is_counted() -> None:
    responses.post(ENDPOINT, body=requests.exceptions.ReadTimeout("slow"))
    c = client(retries=0)
    assert c.post(BODY) == "unreachable"
    assert c.errors_total == 1


@responses.activate
def test_400_is_rejected_without_retry() -> None:
    responses.post(ENDPOINT, status=400, body='{"message": "bad alert"}')
    c = client()
    assert c.post(BODY) == "rejected"
    assert len(responses.calls) == 1
    assert c.errors_total == 1


def test_backoff_doubles_between_attempts() -> None:
    slept: list[float] = []
    c = AlertmanagerClient(URL, retries=3, backoff_seconds=0.5, sleep=slept.append)
    with responses.RequestsMock() as mock:
        mock.post(ENDPOINT, status=502)
        assert c.post(BODY) == "unreachable"
    assert slept == [0.5, 1.0, 2.0]
