"""Responses -> Snapshot: the bad-data table, identities, allocations, markers, nodes."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from policyd.engine.flowcon import FlowConPolicy
from policyd.engine.spec import Selector
from policyd.sources.matrix import ResponseShapeError
from policyd.sources.parse import Parsed, parse_cycle
from policyd.sources.promql import build_queries
from policyd.sources.settings import SourceSettings, cadvisor_docker, kubernetes, process
from tests.sources.builders import INTERVAL, NOW, fact, flowcon, queries, series, steps
from tests.sources.builders import facts as facts_of

K8S = kubernetes()
POD = {"namespace": "ns", "pod": "p1", "container": "train"}
LOSS = [2.0, 1.8, 1.6, 1.5, 1.4, 1.3]


def k8s(evaluation: list[Any], cpu: list[Any] | None = None, facts: list[Any] | None = None,
        settings: SourceSettings = K8S, **spec: Any) -> Parsed:
    if facts is None:
        facts = [fact("capacity", {"node": "w1"}, 16),
                 fact("started_at", {**POD, "node": "w1"}, NOW - 1000)]
    return parse_cycle(evaluation=evaluation, cpu=cpu or [], facts_results=facts_of(*facts),
                       queries=queries(settings, **spec), settings=settings)


def loss(metric: dict[str, str] | None = None, values: list[Any] | None = None,
         **kw: Any) -> dict[str, Any]:
    return series({"__name__": "policyd_training_loss", "job_name": "vae", **(metric or POD)},
                  LOSS if values is None else values, **kw)


def cpu(metric: dict[str, str] | None = None, value: float = 1.0) -> dict[str, Any]:
    return series({**(metric or POD), "node": "w1", "cpu": "total"}, [value] * 6)


def test_a_healthy_container() -> None:
    parsed = k8s([loss()], [cpu(value=0.5)])
    assert parsed.warnings == ()
    (c,) = parsed.snapshot.containers
    assert (c.id, c.name, c.namespace, c.node, c.started_at) == (
        "ns/p1/train", "vae", "ns", "w1", NOW - 1000)
    assert c.evaluation.times_seconds.tolist() == steps()
    assert c.evaluation.values.tolist() == LOSS
    assert c.cpu_usage.values.tolist() == [0.5] * 6
    assert c.cpu_allocation == 1.0
    (node,) = parsed.snapshot.nodes
    assert (node.name, node.cpu_capacity, node.cpu_usage) == ("w1", 16.0, 0.5)
    assert parsed.snapshot.time == NOW


BAD = [
    # id, evaluation results, kept?, warning fragment
    pytest.param([loss(values=[2.0, "NaN", 1.6, 1.5, 1.4, 1.3])], True, "1 NaN/Inf", id="nan"),
    pytest.param([loss(values=[2.0, 1.9, "+Inf", 1.5, 1.4, 1.3])], True, "1 NaN/Inf", id="inf"),
    pytest.param([loss(values=LOSS[:3], times=steps(3, end=NOW - 3 * INTERVAL))], True,
                 "stale (last sample 60 s before now)", id="stale"),
    pytest.param([loss(), loss({**POD, "instance": "other:9100"})], False,
                 "2 evaluation series map to it (duplicated)", id="duplicate"),
    pytest.param([loss({"namespace": "ns", "pod": "p1"})], False, "lacks the identity labels",
                 id="unmappable"),
    pytest.param([loss(values=[], times=[])], False, "has no samples", id="empty"),
    pytest.param([{"metric": {**POD}, "values": [[NOW, "abc"]]}], False, "not a [time",
                 id="garbage-value"),
]


@pytest.mark.parametrize(("evaluation", "kept", "warning"), BAD)
def test_bad_evaluation_data(evaluation: list[Any], kept: bool, warning: str) -> None:
    parsed = k8s(evaluation, [cpu()])
    assert len(parsed.snapshot.containers) == int(kept)
    assert any(warning in w for w in parsed.warnings), parsed.warnings


def test_bad_series_do_not_spoil_good_ones() -> None:
    other = {"namespace": "ns", "pod": "p2", "container": "train"}
    facts = [fact("capacity", {"node": "w1"}, 16),
             fact("started_at", {**POD, "node": "w1"}, 1.0),
             fact("started_at", {**other, "node": "w1"}, 2.0)]
    parsed = k8s([loss(values=["NaN", "x", 1, 1, 1, 1]), loss(other)], [cpu()], facts)
    (c,) = parsed.snapshot.containers
    assert c.id == "ns/p2/train" and c.evaluation.values.tolist() == LOSS


def test_missing_cpu_keeps_the_container_with_empty_cpu() -> None:
    parsed = k8s([loss()], [])
    (c,) = parsed.snapshot.containers
    assert len(c.cpu_usage) == 0
    assert "ns/p1/train: no CPU series" in parsed.warnings[0]


def test_duplicate_cpu_series_leave_cpu_empty() -> None:
    parsed = k8s([loss()], [cpu(), cpu({**POD, "id": "/old"})])
    assert len(parsed.snapshot.containers[0].cpu_usage) == 0
    assert any("2 CPU series (duplicated)" in w for w in parsed.warnings)
    assert parsed.snapshot.nodes[0].cpu_usage == 2.0  # both cgroups did use the node


def test_no_node_or_no_capacity_leaves_the_container_out() -> None:
    parsed = k8s([loss()], [], facts=[fact("started_at", POD, 1.0)])
    assert parsed.snapshot.containers == ()
    assert "no 'node' label" in parsed.warnings[0]
    parsed = k8s([loss()], [cpu()], facts=[])
    assert parsed.snapshot.containers == ()
    assert "node w1 has no known CPU capacity" in parsed.warnings[0]


def test_missing_start_time_uses_the_first_sample() -> None:
    parsed = k8s([loss()], [cpu()], facts=[fact("capacity", {"node": "w1"}, 16)])
    assert parsed.snapshot.containers[0].started_at == steps()[0]
    assert any("no start time" in w for w in parsed.warnings)


def test_restarted_container_keeps_the_later_start() -> None:
    facts = [fact("capacity", {"node": "w1"}, 16),
             fact("started_at", {**POD, "node": "w1", "id": "/a"}, 100.0),
             fact("started_at", {**POD, "node": "w1", "id": "/b"}, 200.0)]
    assert k8s([loss()], [cpu()], facts).snapshot.containers[0].started_at == 200.0


def _with(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [fact("capacity", {"node": "w1"}, 16), fact("started_at", {**POD, "node": "w1"}, 1),
            *extra]


ALLOCATIONS = [
    pytest.param(K8S, {}, [fact("shares", POD, 4096)], 0.25, id="k8s-shares-are-cores"),
    pytest.param(K8S, {}, [fact("shares", POD, 2)], 2 / 1024 / 16, id="k8s-best-effort"),
    pytest.param(K8S, {"mode": "quota"},
                 [fact("limit_cores", POD, 2.0)], 2 / 16,
                 id="k8s-quota"),
    pytest.param(K8S, {"mode": "quota"}, [fact("limit_cores", POD, -1e-05)],
                 1.0, id="quota-unset"),
    pytest.param(K8S, {"mode": "quota"}, [fact("shares", POD, 512)], 1.0, id="quota-missing"),
    pytest.param(K8S, {"mode": "quota"},
                 [fact("limit_cores", POD, 40.0)], 1.0,
                 id="quota-above-capacity"),
    pytest.param(K8S, {}, [fact("shares", POD, 4096), fact("shares", {**POD, "id": "x"}, 1024)],
                 1.0, id="conflicting-shares"),
]


@pytest.mark.parametrize(("settings", "spec", "extra", "expected"), ALLOCATIONS)
def test_allocation(settings: SourceSettings, spec: dict[str, Any], extra: list[Any],
                    expected: float) -> None:
    parsed = k8s([loss()], [cpu()], _with(*extra), settings, **spec)
    assert parsed.snapshot.containers[0].cpu_allocation == pytest.approx(expected)


def test_kubernetes_markers_come_from_pod_annotations() -> None:
    annotations = fact("annotations", {"namespace": "ns", "pod": "p1",
                                       "annotation_policyd_io_migrated": "true",
                                       "annotation_policyd_io_converged_at": "1700000100.5"}, 1)
    (c,) = k8s([loss()], [cpu()], _with(annotations)).snapshot.containers
    assert c.markers.migrated and not c.markers.rebalanced
    assert c.markers.converged_at == 1700000100.5 and c.markers.last_action_at is None


DOCKER_ID = "/docker/3f2a1b4c5d6e" + "0" * 52
CAD = {"name": "vae-1", "id": DOCKER_ID, "instance": "10.0.0.5:8080", "cpu": "total"}


def docker(evaluation_container: str, labels: dict[str, str], *,
           policy: FlowConPolicy | None = None, **settings: Any) -> Parsed:
    """One Docker container through cAdvisor, parsed for `policy` (a default FlowCon)."""
    s = cadvisor_docker(**settings)
    base = {k: v for k, v in CAD.items() if k != "cpu"}
    facts = [fact("capacity", {"instance": "10.0.0.5:8080"}, 8),
             fact("started_at", {**base, **labels}, 5.0),
             fact("shares", {**base, **labels}, 256)]
    evaluation = [series({"__name__": "policyd_training_loss", "job_name": "vae",
                          "container": evaluation_container, "instance": "10.0.0.5:9100"},
                         LOSS)]
    return parse_cycle(evaluation=evaluation, cpu=[series({**CAD, **labels}, [0.7] * 6)],
                       facts_results=facts_of(*facts), settings=s,
                       queries=queries(s) if policy is None else build_queries(
                           [policy], s, now_seconds=NOW))


def test_docker_container_by_name_with_labels_and_markers() -> None:
    labels = {"container_label_policyd_io_migrated": "True",
              "container_label_policyd_io_last_action_at": "1700000200",
              "container_label_app": "train"}
    parsed = docker("vae-1", labels, node_names={"10.0.0.5:8080": "w1"})
    (c,) = parsed.snapshot.containers
    assert (c.id, c.node, c.cpu_allocation) == ("vae-1", "w1", 0.25)
    assert c.markers.migrated and c.markers.last_action_at == 1700000200.0
    assert c.labels["app"] == "train" and c.labels["job_name"] == "vae"
    assert [n.name for n in parsed.snapshot.nodes] == ["w1"]


def test_what_a_docker_job_declares_is_read_under_its_own_key_through_cadvisor() -> None:
    # cAdvisor exposes `policyd.io/opt-out` as container_label_policyd_io_opt_out: read as
    # written, a job's opt-out (and deadline, target, workload) would go unseen.
    labels = {"container_label_policyd_io_opt_out": "true",
              "container_label_policyd_io_deadline": "45m",
              "container_label_policyd_io_workload": "resnet"}
    (c,) = docker("vae-1", labels).snapshot.containers
    assert (c.labels["policyd.io/opt-out"], c.labels["policyd.io/deadline"],
            c.labels["policyd.io/workload"]) == ("true", "45m", "resnet")
    assert c.labels["policyd_io_opt_out"] == "true"  # the label as exposed stays
    assert Selector().opted_out(c)


def test_a_policys_own_opt_out_key_and_selector_labels_are_read_under_their_own_keys() -> None:
    # A custom `selector.opt_out_key` (and a selector label with a dot or slash) reaches the
    # engine sanitised through cAdvisor as well: read as written, the opted-out job would be
    # acted on, and the selected one never chosen.
    policy = flowcon(selector={"labels": {"example.com/team": "vision"},
                               "opt_out_key": "example.com/no-policyd"})
    labels = {"container_label_example_com_no_policyd": "TRUE",
              "container_label_example_com_team": "vision"}
    (c,) = docker("vae-1", labels, policy=policy).snapshot.containers
    assert c.labels["example.com/no-policyd"] == "TRUE"
    assert policy.spec.selector.selects(c) and policy.spec.selector.opted_out(c)
    # and without the policy's keys (what the parse did before): neither
    (b,) = docker("vae-1", labels).snapshot.containers
    assert not policy.spec.selector.selects(b) and not policy.spec.selector.opted_out(b)


def test_docker_short_id_and_port_stripped_node() -> None:
    parsed = docker("3f2a1b4c5d6e", {"container_label_policyd_io_converged_at": "soon"})
    (c,) = parsed.snapshot.containers
    assert (c.id, c.node) == ("vae-1", "10.0.0.5")
    assert c.markers.converged_at is None and not c.markers.migrated
    assert any("'soon' is not an epoch time" in w for w in parsed.warnings)


def test_process_profile_uses_static_capacity() -> None:
    s = process(capacity_cores=4)
    job = {"job": "training", "instance": "127.0.0.1:9101"}
    parsed = parse_cycle(
        evaluation=[series({"__name__": "policyd_training_loss", "job_name": "a", **job}, LOSS)],
        cpu=[series(job, [0.9] * 6),
             series({"job": "prometheus", "instance": "127.0.0.1:9090"}, [0.1] * 6)],
        facts_results=facts_of(fact("started_at", job, 10.0)), queries=queries(s), settings=s)
    (c,) = parsed.snapshot.containers
    assert (c.id, c.name, c.node, c.started_at) == ("training/127.0.0.1:9101", "a",
                                                     "127.0.0.1", 10.0)
    (node,) = parsed.snapshot.nodes
    assert node.cpu_capacity == 4 and node.cpu_usage == pytest.approx(1.0)
    assert "1 containers have CPU series but no evaluation series" in parsed.warnings[0]


def test_idle_nodes_with_capacity_are_listed() -> None:
    facts = _with(fact("capacity", {"node": "w2"}, 8))
    assert [n.name for n in k8s([loss()], [cpu()], facts).snapshot.nodes] == ["w1", "w2"]


def test_empty_results_give_an_empty_snapshot() -> None:
    parsed = k8s([], [], [])
    assert parsed.snapshot.containers == () and parsed.snapshot.nodes == ()


def test_cpu_nan_passes_through_to_the_engine() -> None:
    parsed = k8s([loss()], [cpu(value=math.nan)])
    assert np.isnan(parsed.snapshot.containers[0].cpu_usage.values).all()
    assert parsed.snapshot.nodes[0].cpu_usage == 0.0


def test_a_cpu_figure_beyond_a_million_cores_is_left_out_of_the_node_usage() -> None:
    # Two figures of 1e308 cores summed to a node usage of inf, which a Node refuses, and the
    # whole cycle failed on it (found by fuzzing the parser); the node's other figures count.
    other = {"namespace": "ns", "pod": "p2", "container": "train"}
    third = {"namespace": "ns", "pod": "p3", "container": "train"}
    parsed = k8s([loss()], [cpu(value=1e308), cpu(other, value=1e308), cpu(third, value=0.5)])
    assert parsed.snapshot.nodes[0].cpu_usage == 0.5
    assert [c.id for c in parsed.snapshot.containers] == ["ns/p1/train"]
    assert sum("a CPU figure of 1e+308 cores is not a reading" in w
               for w in parsed.warnings) == 2


@pytest.mark.parametrize("result", [{"x": 1}, "garbage", [1, 2], [{"values": []}]])
def test_a_result_of_the_wrong_shape_is_a_shape_error(result: Any) -> None:
    with pytest.raises(ResponseShapeError):
        k8s(result)
