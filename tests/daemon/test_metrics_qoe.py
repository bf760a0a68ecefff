"""The daemon's QoE and delivery metrics: one series per job measured against its target,
removed when the job leaves the decision or the policy goes; deliveries counted."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from policyd.daemon.metrics import DaemonMetrics
from policyd.model import Assessment, Decision
from policyd.model.qoe import Delivery, QoeStatus
from policyd.tick import Outcome


def status(state: str, measured: float, *, alerting: bool = False) -> QoeStatus:
    return QoeStatus(target="steps_per_second>=40", metric="steps_per_second", comparison=">=",
                     target_value=40.0, measured=measured, state=state,  # type: ignore[arg-type]
                     shortfall=max(0.0, 1 - measured / 40), short_seconds=300.0 if alerting
                     else 0.0, alerting=alerting)


def outcome(*assessments: Assessment) -> Outcome:
    return Outcome(decision=Decision(policy="qoe", kind="QoE", time=0.0, actions=(),
                                     assessments=assessments, next_interval=15.0))


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_qoe_series_follow_the_decisions_and_the_policy() -> None:
    registry = CollectorRegistry()
    metrics = DaemonMetrics(registry)
    short = Assessment(container="c1", node="w1", category="SHORT",
                       qoe=status("short", 30.0, alerting=True))
    met = Assessment(container="c2", node="w1", category="SATISFIED", qoe=status("satisfied", 44))
    metrics.record_outcome("qoe", outcome(short, met), dry_run=False)
    where = {"policy": "qoe", "container": "c1", "node": "w1"}
    assert value(registry, "policyd_qoe_ratio", **where, state="short") == 0.75
    assert value(registry, "policyd_qoe_short_seconds", **where) == 300.0
    assert value(registry, "policyd_qoe_alerting", **where) == 1.0
    assert value(registry, "policyd_qoe_alerting", policy="qoe", container="c2",
                 node="w1") == 0.0
    # c1 now meets its target, c2 is gone.
    now_met = Assessment(container="c1", node="w1", category="SATISFIED",
                         qoe=status("satisfied", 41))
    metrics.record_outcome("qoe", outcome(now_met), dry_run=False)
    assert value(registry, "policyd_qoe_ratio", **where, state="short") is None
    assert value(registry, "policyd_qoe_ratio", **where, state="satisfied") == 41 / 40
    assert value(registry, "policyd_qoe_alerting", policy="qoe", container="c2",
                 node="w1") is None
    metrics.forget_policy("qoe")
    assert value(registry, "policyd_qoe_ratio", **where, state="satisfied") is None
    assert value(registry, "policyd_qoe_short_seconds", **where) is None


def test_deliveries_are_counted_by_event_and_response() -> None:
    registry = CollectorRegistry()
    metrics = DaemonMetrics(registry)
    done = Assessment(container="c1", node="w1", category="CC",
                      delivery=Delivery(event="target", response="stop",
                                        reason="loss 0.09 <= target 0.1"))
    metrics.record_outcome("flowcon", outcome(done), dry_run=False)
    metrics.record_outcome("flowcon", outcome(done), dry_run=False)
    assert value(registry, "policyd_jobs_delivered_total", policy="flowcon", event="target",
                 response="stop") == 2.0
