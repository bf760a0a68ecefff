"""PolicydJobDelivered: a job at its target loss or converged is posted when first seen and
re-sent only once the resend interval has passed, with an end that lets it resolve by itself."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
import responses

from policyd.alerts import Alerter, AlertSettings
from policyd.alerts.payload import DELIVERED
from policyd.model import Assessment, Decision
from policyd.model.qoe import Delivery
from policyd.tick import Outcome
from tests.alerts.builders import T0

URL = "http://alertmanager.test:9093"
ENDPOINT = f"{URL}/api/v2/alerts"


@pytest.fixture
def mock() -> Any:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        yield rsps


def delivered(*, response: str = "notify", dry_run: bool = False) -> Outcome:
    a = Assessment(container="c1", node="w1", category="CC",
                   delivery=Delivery(event="converged", response=response,  # type: ignore[arg-type]
                                     reason="the forecast gives 0.4 % left to gain (< 1 %)"))
    plain = Assessment(container="c2", node="w1", category="CL")
    return Outcome(decision=Decision(policy="flowcon-a", kind="FlowCon", time=T0, actions=(),
                                     assessments=(a, plain), next_interval=40.0,
                                     dry_run=dry_run))


def test_a_delivered_job_is_posted_once_per_resend_interval(mock: Any) -> None:
    mock.post(ENDPOINT, status=200)
    alerter = Alerter(AlertSettings(url=URL, resend_interval_seconds=60),
                      session=requests.Session(), clock=lambda: T0)
    for after in (0, 40, 80):
        alerter.on_outcome(delivered(), now=T0 + after)
    batches = [json.loads(call.request.body) for call in mock.calls]
    assert len(batches) == 2  # at T0 and at T0 + 80; T0 + 40 was not due
    first = batches[0][0]
    assert first["labels"] == {"alertname": DELIVERED, "policy": "flowcon-a", "job": "c1",
                               "node": "w1", "event": "converged", "response": "notify",
                               "severity": "info"}
    assert "converged (notify)" in first["annotations"]["summary"]
    assert first["annotations"]["reason"].startswith("the forecast gives")
    assert first["endsAt"] == "2023-11-14T22:16:20.000Z"  # T0 + 3 x max(60, 40)


def test_a_dry_run_delivery_says_so(mock: Any) -> None:
    mock.post(ENDPOINT, status=200)
    alerter = Alerter(AlertSettings(url=URL), session=requests.Session(), clock=lambda: T0)
    alerter.on_outcome(delivered(response="stop", dry_run=True), now=T0)
    [batch] = [json.loads(call.request.body) for call in mock.calls]
    assert batch[0]["labels"]["dry_run"] == "true"
    assert batch[0]["labels"]["response"] == "stop"
