"""The pod source: one list per cycle, merged with Prometheus results; the pod watch."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any, ClassVar

import pytest
from kubernetes.client.exceptions import ApiException  # type: ignore[import-untyped]

from policyd.model import PendingJob
from policyd.model.events import ContainerEvent
from policyd.sources.errors import SourceError
from policyd.sources.kubernetes_pod_facts import pod_facts
from policyd.sources.kubernetes_pod_watch import PodWatch
from policyd.sources.kubernetes_pods import KubernetesPodSource
from policyd.sources.kubernetes_snapshot import api_settings, merge
from policyd.sources.promql import CycleQueries
from tests.kubernetes.builders import answer, api_error, apis, node, pod, raw
from tests.sources.builders import deadline, flowcon


class Scope:
    namespaces: tuple[str, ...] = ()
    label_selector = "policyd.io/managed=true"
    container_name: str | None = None
    node_name: str | None = None


def queries(now: float = 1000.0) -> CycleQueries:
    return CycleQueries(now_seconds=now, start_seconds=now - 90, step_seconds=30,
                        evaluation="loss", cpu="rate", facts=(), allocation_mode="shares")


def series(name: str, values: list[float], metric: str = "loss") -> dict[str, Any]:
    return {"metric": {"__name__": metric, "namespace": "ml", "pod": name,
                       "container": "trainer", "node": "w1"},
            "values": [[940 + 30 * i, str(v)] for i, v in enumerate(values)]}


def test_pod_facts_reads_the_api_pod() -> None:
    p = pod()
    p["metadata"]["annotations"] = {"policyd.io/migrated": "true"}
    f = pod_facts(p, None)
    assert f is not None
    assert (f.id, f.node, f.cpu_request, f.cpu_limit, f.running) == (
        "ml/train-1/trainer", "w1", 1.0, 4.0, True)
    assert f.started_at == 1_761_991_205.0 + 365 * 86400  # 2026-11-01T10:00:05Z
    assert pod_facts(pod(), "other") is None


def test_merge_takes_markers_and_allocation_from_the_api() -> None:
    p = pod()
    p["metadata"]["annotations"] = {"policyd.io/migrated": "true",
                                    "policyd.io/converged_at": "900", "unrelated": "x"}
    found = [f for f in (pod_facts(p, None), pod_facts(pod("train-2", request="2"), None))
             if f is not None]
    parsed = merge(evaluation=[series("train-1", [2.0, 1.5, 1.2]),
                               series("not-listed", [1.0, 1.0, 1.0])],
                   cpu=[series("train-1", [0.9, 1.0, 1.1], "rate")], found=found,
                   allocatable={"w1": 8.0}, queries=queries(), settings=api_settings())
    (c,) = parsed.snapshot.containers
    assert (c.id, c.node, c.name) == ("ml/train-1/trainer", "w1", "train-1")
    assert c.markers.migrated and c.markers.converged_at == 900.0
    assert c.cpu_allocation == 1.0 / 8.0  # request 1 core of 8 allocatable
    assert c.labels["app"] == "train" and c.annotations["unrelated"] == "x"
    assert [n.name for n in parsed.snapshot.nodes] == ["w1"]
    assert len(c.cpu_usage) == 3


class FakePrometheus:
    def __init__(self) -> None:
        self.queries: list[str] = []

    def custom_query(self, query: str, params: Any = None) -> Any:
        assert query.startswith("policyd_training_progress_ratio"), "facts come from the API"
        self.queries.append(query)
        return []

    def custom_query_range(self, query: str, start_time: Any, end_time: Any, step: str,
                           params: Any = None) -> Any:
        self.queries.append(query)
        if "rate(" in query:
            return [series("train-1", [1.0, 1.0, 1.0], "rate")]
        if query.startswith("policyd_training_steps_total"):
            return [series("train-1", [10.0, 20.0, 30.0])]
        return [series("train-1", [2.0, 1.5, 1.2])]


def test_snapshot_makes_one_pod_list_and_one_node_list() -> None:
    core, _, _ = apis()
    answer(core.list_pod_for_all_namespaces, lambda **k: raw(
        {"kind": "PodList", "metadata": {"resourceVersion": "5"},
         "items": [pod(), pod("train-2")]}))
    answer(core.list_node, lambda **k: raw({"kind": "NodeList", "items": [node()]}))
    prom = FakePrometheus()
    source = KubernetesPodSource("http://prom", Scope(), core=core, prometheus=prom,
                                 clock=lambda: 1030.0)
    snap = source.snapshot([flowcon(interval_seconds=30)])
    assert [c.id for c in snap.containers] == ["ml/train-1/trainer"]
    assert core.list_pod_for_all_namespaces.call_count == 1
    assert core.list_node.call_count == 1
    assert core.list_pod_for_all_namespaces.call_args.kwargs["label_selector"] == (
        "policyd.io/managed=true")
    # loss, CPU, steps and the progress ratio: four queries whatever the number of pods
    assert len(prom.queries) == 4
    assert snap.containers[0].steps.values.tolist() == [10.0, 20.0, 30.0]


def test_with_a_jobs_api_the_held_jobs_come_from_one_job_list() -> None:
    core, batch, _ = apis()
    answer(core.list_pod_for_all_namespaces, lambda **k: raw(
        {"kind": "PodList", "metadata": {"resourceVersion": "5"}, "items": [pod()]}))
    answer(core.list_node, lambda **k: raw({"kind": "NodeList", "items": [node()]}))
    held = {"metadata": {"name": "wait", "namespace": "ml", "labels": {},
                         "creationTimestamp": "1970-01-01T00:16:40Z"},
            "spec": {"suspend": True, "template": {"metadata": {"annotations": {
                "policyd.io/deadline": "1h"}}}}}
    running = {"metadata": {"name": "train", "namespace": "ml",
                            "creationTimestamp": "1970-01-01T00:00:00Z"},
               "spec": {"suspend": False}}
    answer(batch.list_job_for_all_namespaces, lambda **k: raw(
        {"kind": "JobList", "items": [held, running]}))
    source = KubernetesPodSource("http://prom", Scope(), core=core, prometheus=FakePrometheus(),
                                 clock=lambda: 1030.0, batch=batch)
    snap = source.snapshot([deadline(interval_seconds=30)])
    assert [(p.id, p.submitted_at, dict(p.annotations)) for p in snap.pending] == [
        ("ml/wait", 1000.0, {"policyd.io/deadline": "1h"})]
    assert batch.list_job_for_all_namespaces.call_count == 1
    assert batch.list_job_for_all_namespaces.call_args.kwargs["label_selector"] == (
        "policyd.io/managed=true")
    # a policy that starts no held job: no Job list (on a big cluster, the cycle's largest read)
    assert source.snapshot([flowcon(interval_seconds=30)]).pending == ()
    assert batch.list_job_for_all_namespaces.call_count == 1


def test_a_job_list_the_api_refuses_is_the_cycles_source_error() -> None:
    """A Job list the API refuses (RBAC without `jobs`, say) fails the cycle as a pod list
    does: one SourceError naming what was listed, never the client's own exception, and no
    decision made without the held jobs."""
    core, batch, _ = apis()
    answer(core.list_pod_for_all_namespaces, lambda **k: raw(
        {"kind": "PodList", "metadata": {"resourceVersion": "5"}, "items": [pod()]}))
    answer(core.list_node, lambda **k: raw({"kind": "NodeList", "items": [node()]}))
    batch.list_job_for_all_namespaces.side_effect = api_error(403, reason="Forbidden")
    source = KubernetesPodSource("http://prom", Scope(), core=core, prometheus=FakePrometheus(),
                                 clock=lambda: 1030.0, batch=batch)
    with pytest.raises(SourceError) as caught:
        source.snapshot([deadline(interval_seconds=30)])
    assert (caught.value.kind, caught.value.what, caught.value.query) == ("http", "list", "jobs")
    assert "HTTP 403 Forbidden" in str(caught.value)


def test_the_held_jobs_alone_are_one_job_list() -> None:
    """What the manager deciding from node reports asks for (`ReportedSource`): one list of
    Jobs, no pod or node list, no Prometheus query; a refusal is the cycle's SourceError; a
    node agent's source lists no Jobs."""
    core, batch, _ = apis()
    held = {"metadata": {"name": "wait", "namespace": "ml", "labels": {},
                         "creationTimestamp": "1970-01-01T00:16:40Z"},
            "spec": {"suspend": True}}
    answer(batch.list_job_for_all_namespaces, lambda **k: raw(
        {"kind": "JobList", "items": [held]}))
    prom = FakePrometheus()
    source = KubernetesPodSource("http://prom", Scope(), core=core, prometheus=prom,
                                 clock=lambda: 1030.0, batch=batch)
    assert [(p.id, p.submitted_at) for p in source.held([flowcon()])] == [("ml/wait", 1000.0)]
    assert batch.list_job_for_all_namespaces.call_count == 1
    assert core.list_pod_for_all_namespaces.call_count == core.list_node.call_count == 0
    assert prom.queries == []
    batch.list_job_for_all_namespaces.side_effect = api_error(403, reason="Forbidden")
    with pytest.raises(SourceError, match="HTTP 403"):
        source.held([flowcon()])

    # the manager's Job watch running: its held Jobs, no list; before its first list: a list
    core, batch, _ = apis()
    answer(batch.list_job_for_all_namespaces, lambda **k: raw(
        {"kind": "JobList", "items": [held]}))
    answer(core.list_pod_for_all_namespaces, lambda **k: raw(
        {"kind": "PodList", "metadata": {"resourceVersion": "5"}, "items": [pod()]}))
    answer(core.list_node, lambda **k: raw({"kind": "NodeList", "items": [node()]}))
    view: list[tuple[PendingJob, ...] | None] = [None]
    source = KubernetesPodSource("http://prom", Scope(), core=core, prometheus=FakePrometheus(),
                                 clock=lambda: 1030.0, batch=batch,
                                 held_from=lambda: view[0])
    (listed,) = source.held([flowcon()])
    assert listed.id == "ml/wait" and batch.list_job_for_all_namespaces.call_count == 1
    view[0] = (replace(listed, id="ml/other"),)
    assert [p.id for p in source.held([flowcon()])] == ["ml/other"]
    assert [p.id for p in source.snapshot([deadline(interval_seconds=30)]).pending] == [
        "ml/other"]
    assert batch.list_job_for_all_namespaces.call_count == 1

    class OnNode(Scope):
        node_name = "w1"

    agent = KubernetesPodSource("http://prom", OnNode(), core=core, prometheus=prom,
                                clock=lambda: 1030.0, batch=batch)
    assert agent.held([flowcon()]) == ()


def test_a_node_agent_asks_prometheus_for_its_node_only() -> None:
    core, _, _ = apis()
    answer(core.list_pod_for_all_namespaces, lambda **k: raw(
        {"kind": "PodList", "metadata": {"resourceVersion": "5"}, "items": [pod()]}))
    answer(core.list_node, lambda **k: raw({"kind": "NodeList", "items": [node()]}))
    prom = FakePrometheus()
    scope = Scope()
    scope.node_name = "w1"
    # One query at a time (not the default two): the order asked is then the order sent.
    source = KubernetesPodSource("http://prom", scope, core=core,
                                 prometheus=prom, evaluation_node_label="node",
                                 clock=lambda: 1030.0, max_concurrent_queries=1)
    snap = source.snapshot([flowcon(interval_seconds=30)])
    assert [c.id for c in snap.containers] == ["ml/train-1/trainer"]
    assert prom.queries[0] == 'policyd_training_loss{node="w1"}'
    assert all('node="w1"' in q for q in prom.queries), prom.queries


class FakeWatch:
    """`watch.Watch()` stand-in: each stream() plays the next script (a list of events, or
    an exception to raise after them)."""

    scripts: ClassVar[list[list[Any]]] = []
    calls: ClassVar[list[dict[str, Any]]] = []

    def stream(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        FakeWatch.calls.append(kwargs)
        script = FakeWatch.scripts.pop(0) if FakeWatch.scripts else []
        for item in script:
            if isinstance(item, Exception):
                raise item
            yield item

    def stop(self) -> None:
        pass


def test_watch_reports_started_stopped_and_relists_after_410() -> None:
    core, _, _ = apis()
    lists = [[pod("a")], [pod("b")]]  # the relist after 410: a and c gone, b new
    answer(core.list_pod_for_all_namespaces, lambda **k: raw(
        {"metadata": {"resourceVersion": str(10 + len(lists))}, "items": lists.pop(0)}))
    stop = threading.Event()
    seen: list[ContainerEvent] = []
    new = pod("c")
    new["metadata"]["resourceVersion"] = "12"
    FakeWatch.calls = []
    FakeWatch.scripts = [
        [{"type": "ADDED", "raw_object": new}, ApiException(status=410, reason="Gone")]]

    def on_event(event: ContainerEvent) -> None:
        seen.append(event)
        if len(seen) == 4:
            stop.set()
    watcher = PodWatch(core, Scope(), make_watch=FakeWatch, clock=lambda: 5.0)
    watcher.watch(on_event, stop)
    assert [(e.kind, e.container) for e in seen] == [
        ("started", "ml/c/trainer"), ("stopped", "ml/a/trainer"),
        ("stopped", "ml/c/trainer"), ("started", "ml/b/trainer")]
    assert watcher.relists == 2
    assert FakeWatch.calls[0]["resource_version"] == "12"
    assert FakeWatch.calls[0]["timeout_seconds"] == 30


def test_watch_backs_off_on_other_errors() -> None:
    core, _, _ = apis()
    core.list_pod_for_all_namespaces.side_effect = api_error(503)
    stop = threading.Event()
    waits: list[float] = []
    real_wait = stop.wait

    def wait(seconds: float | None = None) -> bool:
        if seconds is None:  # the helper thread that closes the watch on stop
            return real_wait()
        waits.append(seconds)
        if len(waits) == 3:
            stop.set()
        return real_wait(0)
    stop.wait = wait  # type: ignore[method-assign,assignment]
    PodWatch(core, Scope(), make_watch=FakeWatch).watch(lambda e: None, stop)
    assert waits == [0.5, 1.0, 2.0]


def test_a_thousand_pod_cluster_costs_one_list_per_cycle() -> None:
    core, _, _ = apis()
    answer(core.list_pod_for_all_namespaces, lambda **k: raw(
        {"kind": "PodList", "metadata": {"resourceVersion": "5"},
         "items": [pod(f"train-{i}") for i in range(1000)]}))
    answer(core.list_node, lambda **k: raw({"kind": "NodeList", "items": [node()]}))
    prom = FakePrometheus()
    source = KubernetesPodSource("http://prom", Scope(), core=core, prometheus=prom,
                                 clock=lambda: 1030.0)
    for _ in range(3):  # three cycles
        source.snapshot([flowcon(interval_seconds=30)])
    assert core.list_pod_for_all_namespaces.call_count == 3
    assert core.list_node.call_count == 3
    assert len(prom.queries) == 12  # four a cycle
    assert not core.read_namespaced_pod.called


def test_a_nodes_speed_label_is_its_speed_and_a_bad_one_a_warning() -> None:
    core, _, _ = apis()
    answer(core.list_pod_for_all_namespaces, lambda **k: raw(
        {"kind": "PodList", "metadata": {"resourceVersion": "5"}, "items": [pod()]}))
    fast, odd, plain = node("w1"), node("w2"), node("w3")
    fast["metadata"]["labels"] = {"policyd.io/speed": "1.5", "kubernetes.io/os": "linux"}
    odd["metadata"]["labels"] = {"policyd.io/speed": "fast"}
    answer(core.list_node, lambda **k: raw({"kind": "NodeList", "items": [fast, odd, plain]}))
    source = KubernetesPodSource("http://prom", Scope(), core=core, prometheus=FakePrometheus(),
                                 clock=lambda: 1030.0)
    snap = source.snapshot([flowcon(interval_seconds=30)])
    assert {n.name: n.speed for n in snap.nodes} == {"w1": 1.5, "w2": None, "w3": None}
    assert "node w2 label policyd.io/speed='fast' is not a positive number; its speed counts " \
           "as not stated" in source.last_warnings


def test_a_qoe_metric_is_read_onto_its_pod() -> None:
    from policyd.engine.qoe import QoEPolicy  # noqa: PLC0415
    from policyd.engine.spec import API_VERSION  # noqa: PLC0415

    core, _, _ = apis()
    answer(core.list_pod_for_all_namespaces, lambda **k: raw(
        {"kind": "PodList", "metadata": {"resourceVersion": "5"}, "items": [pod()]}))
    answer(core.list_node, lambda **k: raw({"kind": "NodeList", "items": [node()]}))
    policy = QoEPolicy.model_validate({
        "apiVersion": API_VERSION, "kind": "QoE", "metadata": {"name": "q"},
        "spec": {"interval_seconds": 30, "metrics": {"rps": "sum by (namespace, pod, "
                                                            "container) (serving_rps)"}}})
    prom = FakePrometheus()
    source = KubernetesPodSource("http://prom", Scope(), core=core, prometheus=prom,
                                 clock=lambda: 1030.0)
    snap = source.snapshot([policy])
    (c,) = snap.containers
    assert c.metrics["rps"].values.tolist() == [2.0, 1.5, 1.2]  # the fake's answer to it
    assert "sum by (namespace, pod, container) (serving_rps)" in prom.queries
