"""The real `kubernetes` client against a local fake API server serving recorded responses."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s  # type: ignore[import-untyped]
from kubernetes import watch
from kubernetes.client.exceptions import ApiException  # type: ignore[import-untyped]

from policyd.actuators.kubernetes import ActuationError, KubernetesActuator, KubernetesSettings
from policyd.actuators.kubernetes.pods import PodRef
from policyd.model.events import ContainerEvent
from policyd.sources.kubernetes_pods import PodWatch, list_allocatable, list_pods, pod_facts
from tests.kubernetes.builders import FakeClock, decision, set_cpu
from tests.kubernetes.fake_apiserver import FakeApiServer

POD = "/api/v1/namespaces/ml/pods/train-1"


class Scope:
    namespaces: tuple[str, ...] = ()
    label_selector = "policyd.io/managed=true"
    container_name: str | None = "trainer"
    node_name: str | None = None


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as fake:
        yield fake


def make_actuator(server: FakeApiServer, clock: FakeClock) -> tuple[KubernetesActuator, Any]:
    shared = server.api_client()
    act = KubernetesActuator(KubernetesSettings(host=server.url, retries=0),
                             core=k8s.CoreV1Api(shared), batch=k8s.BatchV1Api(shared),
                             events_api=k8s.EventsV1Api(shared), clock=clock,
                             sleep=clock.sleep)
    act._recovered = True
    return act, shared


def test_pod_list_is_one_request(server: FakeApiServer) -> None:
    server.route("GET", "/api/v1/pods", (200, "pod_list.json"))
    server.route("GET", "/api/v1/nodes", (200, "node_list.json"))
    with server.api_client() as api:
        core = k8s.CoreV1Api(api)
        items, version = list_pods(core, Scope())
        allocatable = list_allocatable(core)
    facts = [pod_facts(p, "trainer") for p in items]
    assert version == "81400"
    assert [(f.id, f.node, f.cpu_request) for f in facts if f] == [
        ("ml/train-1/trainer", "w1", 1.0), ("ml/train-2/trainer", "w2", 1.0)]
    assert allocatable == {"w1": 7.91, "w2": 7.91}
    (listed,) = [r for r in server.requests if r["path"] == "/api/v1/pods"]
    assert listed["query"]["labelSelector"] == ["policyd.io/managed=true"]


class NodeScope(Scope):
    node_name = "w1"


def test_a_node_agent_asks_only_for_its_node(server: FakeApiServer) -> None:
    """`--node w1`: the API server filters (field selectors), so a DaemonSet of N agents
    does not list and watch the whole cluster N times."""
    server.route("GET", "/api/v1/pods", (200, "pod_list.json"), (200, "pod_list.json"),
                 (200, "watch_410.jsonl"), (200, "pod_list_after.json"))
    server.route("GET", "/api/v1/nodes", (200, "node_list.json"))
    stop = threading.Event()
    with server.api_client() as api:
        core = k8s.CoreV1Api(api)
        list_pods(core, NodeScope())
        list_allocatable(core, "w1")
        PodWatch(core, NodeScope(), clock=lambda: 1.0).watch(lambda e: stop.set(), stop)
    pods = [r for r in server.requests if r["path"] == "/api/v1/pods"]
    assert len(pods) >= 3 and any(r["query"].get("watch") for r in pods)
    for r in pods:
        assert r["query"]["fieldSelector"] == ["spec.nodeName=w1"]
        assert r["query"]["labelSelector"] == ["policyd.io/managed=true"]
    (nodes,) = [r for r in server.requests if r["path"] == "/api/v1/nodes"]
    assert nodes["query"]["fieldSelector"] == ["metadata.name=w1"]


def test_resize_patch_goes_to_the_subresource(server: FakeApiServer) -> None:
    server.route("GET", POD, (200, "pod_before_resize.json"), (200, "pod_resized.json"))
    server.route("GET", "/api/v1/nodes/w1", (200, "node_w1.json"))
    server.route("PATCH", POD + "/resize", (200, "pod_resized.json"))
    server.route("PATCH", POD, (200, "pod_resized.json"))
    server.route("POST", "/apis/events.k8s.io/v1/namespaces/ml/events",
                 (201, "event_created.json"))
    act, shared = make_actuator(server, FakeClock())
    with shared:
        act.apply(set_cpu(0.25), decision())
    (resize,) = [r for r in server.requests if r["path"] == POD + "/resize"]
    assert resize["method"] == "PATCH"
    assert resize["content_type"] == "application/strategic-merge-patch+json"
    assert resize["body"]["spec"]["containers"] == [
        {"name": "trainer", "resources": {"requests": {"cpu": "1978m"}}}]  # 0.25 x 7910m
    assert resize["body"]["metadata"]["resourceVersion"] == "81342"
    (event,) = [r for r in server.requests if r["path"].endswith("/events")]
    assert event["body"]["reason"] == "PolicydSetCpu"


@pytest.mark.parametrize(("status", "recorded", "outcome"), [
    (201, "eviction_201.json", None),
    (429, "eviction_429.json", "PDB forbids now, retried next cycle"),
], ids=["accepted", "pdb-refuses"])
def test_eviction(server: FakeApiServer, status: int, recorded: str,
                  outcome: str | None) -> None:
    server.route("POST", POD + "/eviction", (status, recorded))
    act, shared = make_actuator(server, FakeClock())
    with shared:
        ref = PodRef("ml", "train-1", "trainer")
        if outcome is None:
            act.migration.remove(ref, "uid-1", 30, evict=True)
        else:
            with pytest.raises(ActuationError, match=outcome):
                act.migration.remove(ref, "uid-1", 30, evict=True)
    (sent,) = [r for r in server.requests if r["path"].endswith("/eviction")]
    assert sent["body"]["deleteOptions"] == {"gracePeriodSeconds": 30,
                                             "preconditions": {"uid": "uid-1"}}


def test_watch_stream_with_410_raises_for_the_caller(server: FakeApiServer) -> None:
    server.route("GET", "/api/v1/pods", (200, "watch_410.jsonl"))
    with server.api_client() as api:
        stream = watch.Watch().stream(k8s.CoreV1Api(api).list_pod_for_all_namespaces,
                                      resource_version="81400", timeout_seconds=5)
        first = next(stream)
        assert (first["type"], first["raw_object"]["metadata"]["name"]) == ("ADDED", "train-3")
        with pytest.raises(ApiException) as gone:
            next(stream)
    assert gone.value.status == 410


def test_pod_watch_relists_after_410(server: FakeApiServer) -> None:
    server.route("GET", "/api/v1/pods", (200, "pod_list.json"), (200, "watch_410.jsonl"),
                 (200, "pod_list_after.json"), (200, "watch_410.jsonl"))
    stop = threading.Event()
    seen: list[ContainerEvent] = []

    def on_event(event: ContainerEvent) -> None:
        seen.append(event)
        if len(seen) >= 3:
            stop.set()
    with server.api_client() as api:
        PodWatch(k8s.CoreV1Api(api), Scope(), clock=lambda: 1.0).watch(on_event, stop)
    assert [(e.kind, e.container) for e in seen] == [
        ("started", "ml/train-3/trainer"), ("stopped", "ml/train-1/trainer"),
        ("stopped", "ml/train-3/trainer")]
    watches = [r for r in server.requests if r["query"].get("watch")]
    assert watches[0]["query"]["resourceVersion"] == ["81400"]
