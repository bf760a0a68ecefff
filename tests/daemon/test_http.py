"""`/metrics`, `/healthz`, `/readyz` on 127.0.0.1 (an ephemeral port), from a fresh registry."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from policyd.daemon import DaemonMetrics, Health, StatusServer
from policyd.model import Assessment, Decision, Migrate, SetCpu
from policyd.tick import Outcome

METRICS = ("policyd_actions_total", "policyd_migrations_total",
           "policyd_tick_duration_seconds", "policyd_source_errors_total", "policyd_ticks_total",
           "policyd_job_category", "policyd_interval_seconds",
           "policyd_policy_reload_errors_total")


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.fixture
def served() -> Iterator[tuple[str, CollectorRegistry, DaemonMetrics, Health]]:
    registry = CollectorRegistry()
    health = Health()
    server = StatusServer("127.0.0.1", 0, registry=registry, health=health)
    server.start()
    try:
        yield f"http://127.0.0.1:{server.port}", registry, DaemonMetrics(registry), health
    finally:
        server.close()


def outcome(*, categories: dict[str, str]) -> Outcome:
    move = Migrate(policy="sp", container="c3", from_node="w4", to_node="w2", reason="converged")
    limit = SetCpu(policy="sp", container="c1", node="w1", fraction=0.5, mode="shares",
                   reason="CL")
    decision = Decision(policy="sp", kind="SpeCon", time=0.0, actions=(move, limit),
                        assessments=tuple(Assessment(container=c, node="w1", category=k)
                                          for c, k in categories.items()),
                        next_interval=30.0)
    return Outcome(decision=decision, failed=((limit, "RuntimeError: no"),))


def test_metrics_names_and_labels(
        served: tuple[str, CollectorRegistry, DaemonMetrics, Health]) -> None:
    url, _, metrics, _ = served
    metrics.record_outcome("sp", outcome(categories={"c1": "PC", "c3": "CC"}), dry_run=False,
                           duration_seconds=0.02)
    metrics.record_failure("sp", "source_error", source_error_kind="timeout")
    metrics.set_interval("sp", 30.0)
    metrics.reload_errors.inc()
    status, text = get(url + "/metrics")
    assert status == 200
    for name in METRICS:
        assert f"\n{name}" in text, name
    assert ('policyd_actions_total{dry_run="false",kind="migrate",policy="sp",'
            'result="applied"} 1.0') in text
    assert ('policyd_actions_total{dry_run="false",kind="set_cpu",policy="sp",'
            'result="failed"} 1.0') in text
    assert 'policyd_migrations_total{dry_run="false",from="w4",policy="sp",to="w2"} 1.0' in text
    assert 'policyd_source_errors_total{kind="timeout",policy="sp"} 1.0' in text
    assert 'policyd_ticks_total{policy="sp",result="ok"} 1.0' in text
    assert 'policyd_ticks_total{policy="sp",result="source_error"} 1.0' in text
    assert ('policyd_job_category{category="CC",container="c3",node="w1",policy="sp"} 1.0'
            in text)
    assert 'policyd_interval_seconds{policy="sp"} 30.0' in text
    assert "policyd_policy_reload_errors_total 1.0" in text
    assert 'policyd_tick_duration_seconds_count{policy="sp"} 1.0' in text

    # c3 has gone and c1 changed category: their old series go with them.
    metrics.record_outcome("sp", outcome(categories={"c1": "WC"}), dry_run=False)
    text = get(url + "/metrics")[1]
    assert 'container="c3"' not in text
    assert 'category="PC"' not in text
    assert 'policyd_job_category{category="WC",container="c1",node="w1",policy="sp"} 1.0' in text


def test_health_and_readiness(
        served: tuple[str, CollectorRegistry, DaemonMetrics, Health]) -> None:
    url, _, _, health = served
    assert get(url + "/healthz") == (503, "the daemon loop is not running\n")
    assert get(url + "/readyz") == (503, "policies are not loaded yet\n")
    health.running(True)
    health.policies_loaded()
    assert get(url + "/healthz") == (200, "ok\n")
    assert get(url + "/readyz") == (503, "no snapshot has succeeded yet\n")
    health.snapshot_succeeded()
    health.note("policy reload", "rejected (2 problems); running the last good policies")
    assert get(url + "/readyz") == (
        200, "ok\npolicy reload: rejected (2 problems); running the last good policies\n")
    assert get(url + "/nope")[0] == 404


def test_simulated_backend_is_ready_without_a_snapshot() -> None:
    health = Health(simulated=True)
    health.policies_loaded()
    assert health.ready() == (True, "ok")
