"""Deadline alerts: at risk fires, stays quiet while nothing changes, is re-sent on news or
after the resend interval, and resolves when the job is on track, missed or gone; a missed
deadline is posted once; the Alerter posts them to Alertmanager."""

from __future__ import annotations

import json
from typing import Any

import requests
import responses

from policyd.alerts import Alerter, AlertSettings
from policyd.alerts.deadlines import AT_RISK, MISSED, DeadlineAlerts
from policyd.model import Assessment, Decision, JobDeadline
from policyd.model.deadline import DeadlineState
from policyd.tick import Outcome
from tests.alerts.builders import T0

DEADLINE = T0 + 3600


def seen(state: DeadlineState, *, slack: float | None = -300.0, job: str = "ml/train",
         eta: float | None = DEADLINE + 300) -> Assessment:
    return Assessment(container=job, node="w1", category=state.upper(), note="needs 3 cores",
                      deadline=JobDeadline(state=state, deadline_at=DEADLINE, eta_at=eta,
                                           slack_seconds=slack, needed_cores=3.0))


def decision(*assessments: Assessment, dry_run: bool = False) -> Decision:
    return Decision(policy="dl", kind="Deadline", time=T0, actions=(), assessments=assessments,
                    next_interval=20.0, dry_run=dry_run)


def run(alerts: DeadlineAlerts, d: Decision, now: float) -> list[Any]:
    return alerts.update(d, now, hold_seconds=180, visible_seconds=180, resend_seconds=60)


def test_at_risk_fires_keeps_quiet_resends_and_resolves() -> None:
    alerts = DeadlineAlerts()
    (first,) = run(alerts, decision(seen("at_risk")), T0)
    assert first.name == AT_RISK and dict(first.labels) == {
        "alertname": AT_RISK, "policy": "dl", "job": "ml/train", "severity": "warning"}
    assert first.annotations["summary"] == ("job ml/train on w1 is at risk: predicted -5 min "
                                            "before its deadline")
    assert first.annotations["deadline"] == "2023-11-14T23:13:00.000Z"
    assert first.annotations["needed_cores"] == "3.00"
    assert (first.starts_at, first.ends_at) == (T0, T0 + 180)
    assert run(alerts, decision(seen("at_risk", slack=-310)), T0 + 20) == []  # no news
    (again,) = run(alerts, decision(seen("at_risk")), T0 + 60)  # the resend interval
    assert again.starts_at == T0 and again.ends_at == T0 + 240
    (worse,) = run(alerts, decision(seen("hopeless", slack=-900)), T0 + 80)
    assert worse.annotations["state"] == "hopeless"
    (done,) = run(alerts, decision(seen("on_track", slack=120)), T0 + 100)
    assert done.ends_at == T0 + 100  # resolved
    assert run(alerts, decision(seen("on_track", slack=120)), T0 + 120) == []


def test_a_missed_deadline_is_an_event_posted_once() -> None:
    alerts = DeadlineAlerts()
    run(alerts, decision(seen("at_risk")), T0)
    out = run(alerts, decision(seen("missed", slack=None, eta=None)), DEADLINE + 1)
    assert sorted((a.name, a.ends_at) for a in out) == [
        (AT_RISK, DEADLINE + 1), (MISSED, DEADLINE + 181)]
    assert run(alerts, decision(seen("missed", slack=None)), DEADLINE + 21) == []


def test_a_job_that_is_gone_resolves_and_other_policies_are_left_alone() -> None:
    alerts = DeadlineAlerts()
    run(alerts, decision(seen("at_risk")), T0)
    other = Decision(policy="other", kind="Deadline", time=T0, actions=(), assessments=(),
                     next_interval=20.0)
    assert run(alerts, other, T0 + 20) == []
    (gone,) = run(alerts, decision(), T0 + 40)
    assert gone.ends_at == T0 + 40
    run(alerts, decision(seen("at_risk")), T0 + 60)
    (retired,) = alerts.retire("dl", T0 + 80)
    assert retired.ends_at == T0 + 80


def test_the_alerter_posts_deadline_alerts() -> None:
    with responses.RequestsMock() as mock:
        mock.add(responses.POST, "http://am.test:9093/api/v2/alerts", status=200)
        alerter = Alerter(AlertSettings(url="http://am.test:9093"), session=requests.Session(),
                          clock=lambda: T0)
        alerter.on_outcome(Outcome(decision=decision(seen("at_risk"), dry_run=True)), now=T0)
        (batch,) = [json.loads(c.request.body) for c in mock.calls]
    assert [(a["labels"]["alertname"], a["labels"]["dry_run"]) for a in batch] == [
        (AT_RISK, "true")]
