"""A policy's own per-job metrics (QoE `spec.metrics`) read by the Prometheus source: one range
query each, every series on its container by the loss series' identity labels, and what cannot
be placed said, not guessed."""

from __future__ import annotations

import pytest

from policyd.engine.qoe import QoEPolicy
from policyd.engine.spec import API_VERSION
from policyd.model import Container, Markers, Series, Snapshot
from policyd.model import Node as SnapshotNode
from policyd.policy import load_policies
from policyd.sources import kubernetes
from policyd.sources.matrix import ResponseShapeError
from policyd.sources.promql import build_queries
from policyd.sources.qoe_metrics import attach_metrics
from tests.sources.builders import series
from tests.sources.test_recorded_cluster import CLUSTER, NOW, observed, recorded_bodies

STEPS = "policyd_training_steps_total"


def qoe(name: str = "q", **metrics: str) -> QoEPolicy:
    return QoEPolicy.model_validate({
        "apiVersion": API_VERSION, "kind": "QoE", "metadata": {"name": name},
        "spec": {"interval_seconds": 20, "window_intervals": 20, "metrics": metrics}})


def test_each_container_gets_its_own_series_from_a_real_prometheus_answer() -> None:
    """The recorded cluster's answers (payloads/kubernetes_cluster): the steps counter asked
    again as a QoE metric lands on each of the 20 containers as its own steps series."""
    recorded = build_queries(load_policies(CLUSTER / "policy.yaml"), kubernetes(),
                             now_seconds=NOW)
    policy = qoe(samples=STEPS)
    asked = build_queries([policy], kubernetes(), now_seconds=NOW)
    assert asked.metrics == (("samples", STEPS),)
    assert asked.count == recorded.count + 1  # one query more, whatever the number of jobs
    parsed, calls = observed([policy], recorded_bodies())
    assert calls == asked.count
    containers = parsed.snapshot.containers
    assert len(containers) == 20
    for c in containers:
        assert set(c.metrics) == {"samples"}
        assert c.metrics["samples"].times_seconds.tolist() == c.steps.times_seconds.tolist()
        assert c.metrics["samples"].values.tolist() == c.steps.values.tolist()
    assert not [w for w in parsed.warnings if w.startswith("metric")]


def snapshot_of(*ids: str) -> Snapshot:
    return Snapshot(time=100.0, nodes=(SnapshotNode(name="w1", cpu_capacity=4.0),),
                    containers=tuple(Container(
                        id=cid, name=cid, node="w1", started_at=0.0,
                        evaluation=Series.of([100.0], [1.0]), cpu_usage=Series.empty(),
                        labels=dict(zip(("namespace", "pod", "container"), cid.split("/"),
                                        strict=True)),
                        markers=Markers()) for cid in ids))


def test_series_that_cannot_be_placed_or_are_doubled_are_said_and_left_out() -> None:
    snap = snapshot_of("ml/a/train", "ml/b/train", "ml/c/train")
    one = {"namespace": "ml", "container": "train"}
    answer = [series({**one, "pod": "a"}, [5.0], [100.0]),
              series({**one, "pod": "b"}, [6.0], [100.0]),
              series({**one, "pod": "b", "replica": "2"}, [7.0], [100.0]),
              series({**one, "pod": "zzz"}, [8.0], [100.0]),
              series({"pod": "c"}, [9.0], [100.0])]
    got, warnings = attach_metrics(snap, {"rps": answer}, ("namespace", "pod", "container"))
    assert {c.id: dict(c.metrics) for c in got.containers}["ml/a/train"]["rps"].values[0] == 5.0
    assert [c.id for c in got.containers if c.metrics] == ["ml/a/train"]
    assert warnings == (
        "metric rps: container ml/b/train has several series; left unmeasured (keep one "
        "series per job in its query)",
        "metric rps: 2 series name no known job by namespace, pod, container; left out")
    with pytest.raises(ResponseShapeError):
        attach_metrics(snap, {"rps": {"not": "a list"}}, ("namespace", "pod", "container"))


def test_two_policies_giving_one_metric_two_queries_are_refused() -> None:
    with pytest.raises(ValueError, match="metric 'rps' one query"):
        build_queries([qoe("a", rps="rate(x[1m])"), qoe("b", rps="rate(y[1m])")], kubernetes(),
                      now_seconds=1000.0)
    same = build_queries([qoe("a", rps="rate(x[1m])"), qoe("b", rps="rate(x[1m])")],
                         kubernetes(), now_seconds=1000.0)
    assert same.metrics == (("rps", "rate(x[1m])"),)
