"""Alerter: what each tick sends, re-sends and resolves, against `responses`."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests
import responses

from policyd.alerts import ACTION_FAILED, MIGRATION, Alerter, AlertSettings
from tests.alerts.builders import T0, migrate, outcome, set_cpu

URL = "http://alertmanager.test:9093"
ENDPOINT = f"{URL}/api/v2/alerts"


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def mock() -> Any:
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        yield rsps


def make(clock: Clock | None = None, **settings: Any) -> Alerter:
    return Alerter(AlertSettings(url=URL, **settings), session=requests.Session(),
                   clock=clock or Clock(T0))


def posted(mock: Any) -> list[list[dict[str, Any]]]:
    """Every batch posted so far (successful or not)."""
    return [json.loads(call.request.body) for call in mock.calls]


def names(batch: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(a["labels"]["alertname"], a["labels"]["job"], a["endsAt"]) for a in batch]


def test_migration_is_one_event_with_its_end(mock: Any) -> None:
    mock.post(ENDPOINT, status=200)
    alerter = make()
    alerter.on_outcome(outcome(migrate(), set_cpu()), now=T0)
    alerter.on_outcome(outcome(), now=T0 + 40)  # nothing new: nothing posted
    batches = posted(mock)
    assert len(batches) == 1
    assert names(batches[0]) == [(MIGRATION, "c3", "2023-11-14T22:16:20.000Z")]  # T0 + 3 x 60
    assert batches[0][0]["startsAt"] == "2023-11-14T22:13:20.000Z"


def test_failed_migration_is_not_a_migration(mock: Any) -> None:
    mock.post(ENDPOINT, status=200)
    alerter = make()
    m = migrate()
    alerter.on_outcome(outcome(m, failed=((m, "CheckpointTimeout: no exit in 30 s"),)), now=T0)
    [batch] = posted(mock)
    assert [a["labels"]["alertname"] for a in batch] == [ACTION_FAILED]
    assert batch[0]["annotations"]["reason"] == "CheckpointTimeout: no exit in 30 s"


def test_failure_fires_is_resent_and_resolves(mock: Any) -> None:
    mock.post(ENDPOINT, status=200)
    alerter = make(resend_interval_seconds=60)
    a = set_cpu()
    fail = ((a, "APIError: 500"),)
    alerter.on_outcome(outcome(a, failed=fail), now=T0)            # fires
    alerter.on_outcome(outcome(a, failed=fail), now=T0 + 40)       # not due yet: quiet
    alerter.on_outcome(outcome(a, failed=fail), now=T0 + 80)       # due: re-sent
    alerter.on_outcome(outcome(a), now=T0 + 120)                   # succeeded: resolved
    alerter.on_outcome(outcome(a), now=T0 + 160)                   # nothing more
    batches = posted(mock)
    assert [names(b) for b in batches] == [
        [(ACTION_FAILED, "c1", "2023-11-14T22:16:20.000Z")],   # T0 + 3 x max(60, 40)
        [(ACTION_FAILED, "c1", "2023-11-14T22:17:40.000Z")],   # T0 + 80 + 180
        [(ACTION_FAILED, "c1", "2023-11-14T22:15:20.000Z")],   # endsAt = now: resolved
    ]
    assert {a["startsAt"] for b in batches for a in b} == {"2023-11-14T22:13:20.000Z"}
    assert alerter.firing == ()


def test_changed_failure_text_is_sent_at_once(mock: Any) -> None:
    mock.post(ENDPOINT, status=200)
    alerter = make()
    a = set_cpu()
    alerter.on_outcome(outcome(a, failed=((a, "APIError: 500"),)), now=T0)
    alerter.on_outcome(outcome(a, failed=((a, "NotFound: no such container"),)), now=T0 + 40)
    reasons = [b[0]["annotations"]["reason"] for b in posted(mock)]
    assert reasons == ["APIError: 500", "NotFound: no such container"]


def test_hold_follows_a_long_interval(mock: Any) -> None:
    mock.post(ENDPOINT, status=200)
    alerter = make()
    a = set_cpu()
    alerter.on_outcome(outcome(a, failed=((a, "x"),), next_interval=600), now=T0)
    assert posted(mock)[0][0]["endsAt"] == "2023-11-14T22:43:20.000Z"  # T0 + 3 x 600


def test_other_policies_do_not_resolve_a_failure(mock: Any) -> None:
    mock.post(ENDPOINT, status=200)
    alerter = make()
    a = set_cpu()
    alerter.on_outcome(outcome(a, failed=((a, "x"),)), now=T0)
    alerter.on_outcome(outcome(policy="flowcon-b"), now=T0 + 10)
    assert [x.labels["job"] for x in alerter.firing] == ["c1"]
    alerter.retire("specon-a", now=T0 + 20)
    assert alerter.firing == ()
    assert posted(mock)[-1][0]["endsAt"] == "2023-11-14T22:13:40.000Z"


def test_dry_run_label(mock: Any) -> None:
    mock.post(ENDPOINT, status=200)
    alerter = make()
    a = set_cpu()
    alerter.on_outcome(outcome(migrate(), a, failed=((a, "x"),), dry_run=True), now=T0)
    [batch] = posted(mock)
    assert [x["labels"].get("dry_run") for x in batch] == ["true", "true"]


def test_unreachable_batches_wait_for_the_next_call(mock: Any) -> None:
    mock.post(ENDPOINT, body=requests.exceptions.ConnectionError("refused"))
    alerter = make(retries=0)
    alerter.on_outcome(outcome(migrate()), now=T0)          # never raises
    assert alerter.errors_total == 1
    assert [a.name for a in alerter.pending] == [MIGRATION]
    mock.replace(responses.POST, ENDPOINT, status=200)
    alerter.flush()
    assert alerter.pending == ()
    assert alerter.errors_total == 1
    assert names(posted(mock)[-1]) == [(MIGRATION, "c3", "2023-11-14T22:16:20.000Z")]


def test_the_latest_version_of_a_queued_alert_wins(mock: Any) -> None:
    mock.post(ENDPOINT, body=requests.exceptions.ConnectionError("refused"))
    alerter = make(retries=0)
    a = set_cpu()
    alerter.on_outcome(outcome(a, failed=((a, "x"),)), now=T0)
    alerter.on_outcome(outcome(a), now=T0 + 40)
    [queued] = alerter.pending
    assert queued.ends_at == T0 + 40  # only the resolution is left to send


def test_queue_is_bounded(mock: Any) -> None:
    mock.post(ENDPOINT, body=requests.exceptions.ConnectionError("refused"))
    alerter = Alerter(AlertSettings(url=URL, retries=0), max_pending=2)
    alerter.on_outcome(outcome(*(migrate(container=f"c{i}") for i in range(3))), now=T0)
    assert [a.labels["job"] for a in alerter.pending] == ["c1", "c2"]
    assert alerter.dropped_total == 1


def test_flush_resends_due_firing_alerts_without_extending_them(mock: Any) -> None:
    mock.post(ENDPOINT, status=200)
    clock = Clock(T0 + 30)
    alerter = make(clock)
    a = set_cpu()
    alerter.on_outcome(outcome(a, failed=((a, "x"),)), now=T0)
    alerter.flush()                      # 30 s later: not due
    clock.now = T0 + 90
    alerter.flush()                      # due: re-sent as it was
    clock.now = T0 + 200
    alerter.flush()                      # its endsAt (T0 + 180) passed: forgotten
    batches = posted(mock)
    assert len(batches) == 2
    assert batches[0] == batches[1]
    assert alerter.firing == ()
