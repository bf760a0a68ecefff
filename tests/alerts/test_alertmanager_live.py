"""The edge against the real thing: the Alerter posts to a real Alertmanager on 127.0.0.1 and
reads the alerts back from `GET /api/v2/alerts`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from policyd.alerts import ACTION_FAILED, MIGRATION, Alerter, AlertSettings
from tests.alerts.builders import migrate, outcome, set_cpu
from tests.integration.alertmanager import alertmanager

pytestmark = pytest.mark.slow


def by_name(alerts: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {a["labels"]["alertname"]: a for a in alerts}


def wait_for(read: Any, check: Any, timeout_seconds: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout_seconds
    while True:
        value = read()
        if check(value) or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def test_migration_and_failure_alerts_round_trip(tmp_path: Path) -> None:
    with alertmanager(tmp_path) as am:
        alerter = Alerter(AlertSettings(url=am.url, generator_url="http://127.0.0.1:8000/metrics"))
        now = time.time()
        m, failing = migrate(), set_cpu()
        alerter.on_outcome(outcome(m, failing, failed=((failing, "APIError: 500 daemon"),)),
                           now=now)
        assert alerter.errors_total == 0
        assert alerter.pending == ()

        active = by_name(wait_for(lambda: am.alerts(active="true"),
                                  lambda alerts: len(alerts) == 2))
        assert set(active) == {MIGRATION, ACTION_FAILED}
        assert active[MIGRATION]["labels"] == {
            "alertname": MIGRATION, "policy": "specon-a", "job": "c3", "from": "w4",
            "to": "w2", "severity": "info"}
        assert active[MIGRATION]["annotations"] == {
            "summary": "job c3 moved from w4 to w2", "reason": m.reason}
        assert active[MIGRATION]["generatorURL"] == "http://127.0.0.1:8000/metrics"
        assert active[ACTION_FAILED]["labels"] == {
            "alertname": ACTION_FAILED, "policy": "specon-a", "job": "c1", "kind": "set_cpu",
            "severity": "warning"}
        assert active[ACTION_FAILED]["annotations"] == {
            "summary": "set_cpu of job c1 on node w1 to 0.25 (shares) failed",
            "reason": "APIError: 500 daemon", "action_reason": failing.reason}
        assert all(a["status"]["state"] == "active" for a in active.values())

        # The next tick applies the CPU limit: the failure resolves, the migration stays.
        alerter.on_outcome(outcome(failing), now=time.time())
        assert alerter.errors_total == 0
        left = wait_for(lambda: am.alerts(active="true"),
                        lambda alerts: len(alerts) == 1)
        assert [a["labels"]["alertname"] for a in left] == [MIGRATION]
        alerter.close()


def test_unreachable_alertmanager_is_counted_not_raised(tmp_path: Path) -> None:
    with alertmanager(tmp_path) as am:
        url = am.url
    alerter = Alerter(AlertSettings(url=url, retries=1, timeout_seconds=1))  # stopped: refused
    alerter.on_outcome(outcome(migrate()), now=time.time())
    assert alerter.errors_total == 1
    assert len(alerter.pending) == 1
