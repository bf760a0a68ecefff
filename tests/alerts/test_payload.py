"""Alert payloads: exact labels, annotations and times (pure, no HTTP)."""

from __future__ import annotations

import pytest

from policyd.alerts.payload import (
    ACTION_FAILED,
    MIGRATION,
    Alert,
    failure_alert,
    migration_alert,
    resolved,
    rfc3339,
    to_json,
)
from policyd.model import Action
from tests.alerts.builders import T0, migrate, set_cpu


@pytest.mark.parametrize(("seconds", "text"), [
    (T0, "2023-11-14T22:13:20.000Z"),
    (T0 + 0.25, "2023-11-14T22:13:20.250Z"),
    (0.0, "1970-01-01T00:00:00.000Z"),
], ids=["whole", "fraction", "epoch"])
def test_rfc3339(seconds: float, text: str) -> None:
    assert rfc3339(seconds) == text


def test_migration_alert() -> None:
    alert = migration_alert(migrate(), dry_run=False, now=T0, visible_seconds=180.0,
                            generator_url="http://policyd:8000/metrics")
    assert to_json([alert]) == [{
        "labels": {"alertname": MIGRATION, "policy": "specon-a", "job": "c3", "from": "w4",
                   "to": "w2", "severity": "info"},
        "annotations": {
            "summary": "job c3 moved from w4 to w2",
            "reason": "converged (g=0.010 < alpha=0.050); w2 has the lowest score 3.5",
        },
        "startsAt": "2023-11-14T22:13:20.000Z",
        "endsAt": "2023-11-14T22:16:20.000Z",
        "generatorURL": "http://policyd:8000/metrics",
    }]


def test_dry_run_migration_is_labelled_and_worded() -> None:
    alert = migration_alert(migrate(), dry_run=True, now=T0, visible_seconds=180.0)
    assert alert.labels["dry_run"] == "true"
    assert alert.annotations["summary"] == "job c3 would move from w4 to w2"
    assert "generatorURL" not in to_json([alert])[0]


@pytest.mark.parametrize(("action", "summary"), [
    (migrate(), "migrate of job c3 from w4 to w2 failed"),
    (set_cpu(), "set_cpu of job c1 on node w1 to 0.25 (shares) failed"),
], ids=["migrate", "set_cpu"])
def test_failure_alert(action: Action, summary: str) -> None:
    alert = failure_alert(action, "APIError: 500 Server Error", dry_run=False,
                          starts_at=T0, ends_at=T0 + 360.0)
    assert to_json([alert]) == [{
        "labels": {"alertname": ACTION_FAILED, "policy": "specon-a", "job": action.container,
                   "kind": action.kind, "severity": "warning"},
        "annotations": {"summary": summary, "reason": "APIError: 500 Server Error",
                        "action_reason": action.reason},
        "startsAt": "2023-11-14T22:13:20.000Z",
        "endsAt": "2023-11-14T22:19:20.000Z",
    }]


def test_resolved_keeps_identity_and_ends_now() -> None:
    alert = failure_alert(set_cpu(), "boom", dry_run=True, starts_at=T0, ends_at=T0 + 360)
    done = resolved(alert, T0 + 40)
    assert done.key == alert.key
    assert (done.starts_at, done.ends_at) == (T0, T0 + 40)
    assert done.labels["dry_run"] == "true"


def test_alert_rejects_impossible_values() -> None:
    with pytest.raises(ValueError, match="alertname"):
        Alert(labels={"job": "c1"}, starts_at=T0, ends_at=T0)
    with pytest.raises(ValueError, match="before"):
        Alert(labels={"alertname": "X"}, starts_at=T0, ends_at=T0 - 1)
