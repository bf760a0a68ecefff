"""Deadline and admission metrics: states counted, slack per job, the waiting queue by why
and position; series of jobs that left are removed; kinds without deadlines add none."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from policyd.daemon.metrics import DaemonMetrics
from policyd.engine import decide
from policyd.tick import Outcome
from tests.engine.deadline_builders import cluster, held, job, policy
from tests.engine.test_predictive import policy as predictive


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def names(registry: CollectorRegistry, prefix: str) -> set[tuple[str, ...]]:
    return {tuple(sorted(s.labels.items())) for m in registry.collect() for s in m.samples
            if s.name.startswith(prefix)}


def test_states_slack_and_queue_follow_each_decision() -> None:
    registry = CollectorRegistry()
    metrics = DaemonMetrics(registry)
    first = decide(policy(), cluster(
        job("urgent", left=2000, rate=10, deadline="900s", cores=2, allocation=0.5),
        job("free", left=2000, rate=10),
        pending=(held("big", deadline="1h", labels={"policyd.io/min-cpu": "8"}),)))
    metrics.record_outcome("dl", Outcome(decision=first), dry_run=False)
    assert value(registry, "policyd_deadline_jobs", policy="dl", state="on_track") == 1
    assert value(registry, "policyd_deadline_jobs", policy="dl", state="none") == 1
    assert value(registry, "policyd_deadline_jobs", policy="dl", state="missed") == 0
    slack = value(registry, "policyd_deadline_slack_seconds", policy="dl", container="urgent")
    assert slack is not None and slack > 0
    assert value(registry, "policyd_admission_waiting_jobs", policy="dl", why="no_fit") == 1
    assert value(registry, "policyd_admission_queue_position", policy="dl", container="big",
                 why="no_fit") == 1
    second = decide(policy(), cluster(job("free", left=2000, rate=10)))
    metrics.record_outcome("dl", Outcome(decision=second), dry_run=False)
    assert value(registry, "policyd_deadline_jobs", policy="dl", state="on_track") == 0
    assert names(registry, "policyd_deadline_slack_seconds") == set()
    assert names(registry, "policyd_admission_queue_position") == set()
    metrics.forget_policy("dl")
    assert names(registry, "policyd_deadline_jobs") == set()
    assert names(registry, "policyd_admission_waiting_jobs") == set()


def test_a_kind_without_deadlines_adds_no_series() -> None:
    registry = CollectorRegistry()
    metrics = DaemonMetrics(registry)
    d = decide(predictive(), cluster(job("a", left=2000, rate=10)))
    metrics.record_outcome("pred", Outcome(decision=d), dry_run=False)
    assert names(registry, "policyd_deadline") == set()
    assert names(registry, "policyd_admission") == set()
