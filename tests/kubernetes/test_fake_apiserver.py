"""The fake API server answers as the recorded v1.36 server did, through the real client.

These tests hold the fake to the recordings: where the fake computes an answer (a resize, a
refused resize, a stale write, an Event too long, an expired watch), it must give what the
real server gave for the same request; where a test scripts an answer (`route`), the client
must read the recorded body as policyd expects.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from kubernetes import client as k8s  # type: ignore[import-untyped]
from kubernetes import watch
from kubernetes.client.exceptions import ApiException  # type: ignore[import-untyped]

from policyd.actuators.kubernetes import ActuationError
from policyd.actuators.kubernetes.pods import PodRef
from policyd.model.events import ContainerEvent
from policyd.sources.kubernetes_pod_facts import list_nodes, list_pods, pod_facts
from policyd.sources.kubernetes_pod_watch import PodWatch
from tests.kubernetes import world
from tests.kubernetes.fake_cluster import RECORDED, recorded, response
from tests.kubernetes.world import NS, served

POD = f"/api/v1/namespaces/{NS}/pods"


def call(server: Any, method: str, path: str, body: Any = None,
         content_type: str = "application/strategic-merge-patch+json") -> tuple[int, Any]:
    """One raw request through the client's REST layer: (status, JSON body)."""
    with server.api_client() as api:
        try:
            got = api.call_api(path, method, header_params={"Content-Type": content_type,
                                                            "Accept": "application/json"},
                               body=body, _preload_content=False, auth_settings=[])
        except ApiException as exc:
            return exc.status, json.loads(exc.body)
        data = got[0].data if isinstance(got, tuple) else got.data
        return 200, json.loads(data)


def without_volatile(body: dict[str, Any]) -> dict[str, Any]:
    """A Status without what depends on names."""
    return {k: body[k] for k in ("kind", "apiVersion", "status", "reason", "code")}


def test_a_resize_is_answered_before_the_kubelet_acts() -> None:
    """As recorded: the answer has the next generation and the old status."""
    real = recorded("pod_resize_patch_200.json")["response"]
    assert real["metadata"]["generation"] == real["status"]["observedGeneration"] + 1
    with served() as (server, clock):
        world.node_w2(server.cluster)
        pod = world.resize_pod(server.cluster, "rs-done")
        status, answer = call(server, "PATCH", f"{POD}/rs-done/resize", {"spec": {"containers": [
            {"name": "trainer", "resources": {"requests": {"cpu": "2"}}}]}})
        assert status == 200
        assert answer["metadata"]["generation"] == pod["metadata"]["generation"] + 1
        assert answer["status"]["observedGeneration"] == pod["metadata"]["generation"]
        assert answer["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] == \
            "1978m"
        server.cluster.advance(1, clock)  # the kubelet acts
        done = server.cluster.get("pods", NS, "rs-done")
        assert done is not None
        assert done["status"]["observedGeneration"] == answer["metadata"]["generation"]
        assert done["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] == "2"


@pytest.mark.parametrize(("recording", "patch"), [
    ("pod_resize_patch_422_qos_change.json", {"requests": {"cpu": "4746m"}}),
    ("pod_resize_patch_422_invalid.json", {"requests": {"cpu": "6"}}),
], ids=["qos-change", "request-above-limit"])
def test_refused_resizes_have_the_recorded_body(recording: str, patch: dict[str, Any]) -> None:
    real = recorded(recording)
    with served() as (server, _):
        world.node_w2(server.cluster)
        world.resize_pod(server.cluster, "rs-done")
        status, body = call(server, "PATCH", f"{POD}/rs-done/resize", {"spec": {"containers": [
            {"name": "trainer", "resources": patch}]}})
    assert status == real["status"] == 422
    assert without_volatile(body) == without_volatile(real["response"])
    name = real["response"]["details"]["name"]
    assert body["message"] == real["response"]["message"].replace(f'"{name}"', '"rs-done"')
    assert body["details"]["causes"] == real["response"]["details"]["causes"]


def test_a_stale_resource_version_is_a_409() -> None:
    real = recorded("pod_resize_patch_409_conflict.json")
    with served() as (server, _):
        world.node_w2(server.cluster)
        world.resize_pod(server.cluster, "rs-done")
        status, body = call(server, "PATCH", f"{POD}/rs-done/resize", {
            "metadata": {"resourceVersion": "1"}, "spec": {"containers": [
                {"name": "trainer", "resources": {"requests": {"cpu": "2"}}}]}})
    assert status == real["status"] == 409
    assert without_volatile(body) == without_volatile(real["response"])
    assert "the object has been modified" in body["message"]


def test_a_note_over_1024_bytes_is_refused_as_recorded() -> None:
    real = recorded("event_create_422_note_bytes.json")
    with served() as (server, _):
        status, body = call(server, "POST", f"/apis/events.k8s.io/v1/namespaces/{NS}/events",
                            real["request"]["body"], "application/json")
    assert status == 422
    assert body["message"] == real["response"]["message"]


def test_a_watch_from_an_expired_version_gets_the_recorded_410() -> None:
    real = json.loads((RECORDED / "watch_pods_rv1_410.jsonl").read_text())
    with served() as (server, _), server.api_client() as api:
        stream = watch.Watch().stream(k8s.CoreV1Api(api).list_pod_for_all_namespaces,
                                      resource_version="1", timeout_seconds=5)
        with pytest.raises(ApiException) as gone:
            next(stream)
    assert gone.value.status == real["object"]["code"] == 410
    assert real["object"]["reason"] in str(gone.value.reason)


def test_list_items_carry_no_kind_as_recorded() -> None:
    real = response("pod_list_namespaced.json")
    assert "kind" not in real["items"][0]
    with served() as (server, _):
        world.resize_pod(server.cluster, "rs-done")
        status, body = call(server, "GET", f"{POD}")
    assert status == 200 and body["kind"] == "PodList" and "kind" not in body["items"][0]


# --- the recordings read by policyd's own code --------------------------------------------------

class Scope:
    namespaces: tuple[str, ...] = ()
    label_selector = "policyd.io/managed=true"
    container_name: str | None = "trainer"
    node_name: str | None = None


class NodeScope(Scope):
    node_name = "w2"


def test_the_recorded_lists_read_as_one_request_each() -> None:
    with served() as (server, _):
        server.route("GET", "/api/v1/pods", (200, "pod_list_all_namespaces_node_w2.json"))
        server.route("GET", "/api/v1/nodes", (200, "node_list.json"))
        with server.api_client() as api:
            core = k8s.CoreV1Api(api)
            items, version = list_pods(core, NodeScope())
            allocatable, _ = list_nodes(core, "w2")
    facts = [f for f in (pod_facts(p, "trainer") for p in items) if f is not None]
    assert version == "928"
    assert [f.pod for f in facts] == ["bare-c", "job-a-bsg8b", "rs-done", "rs-stale"]
    assert {f.node for f in facts} == {"w2"}
    assert allocatable == {"w2": 7.91}
    (pods,) = [r for r in server.requests if r["path"] == "/api/v1/pods"]
    assert pods["query"]["fieldSelector"] == ["spec.nodeName=w2"]
    assert pods["query"]["labelSelector"] == ["policyd.io/managed=true"]
    (nodes,) = [r for r in server.requests if r["path"] == "/api/v1/nodes"]
    assert nodes["query"]["fieldSelector"] == ["metadata.name=w2"]


@pytest.mark.parametrize(("status", "recording", "outcome"), [
    (201, "eviction_201_hollow-1.json", None),
    (429, "eviction_429_hollow-1.json", "PDB forbids now, retried next cycle"),
], ids=["accepted", "pdb-refuses"])
def test_eviction_answers(status: int, recording: str, outcome: str | None) -> None:
    real = recorded(recording)
    with served() as (server, clock):
        server.route("POST", f"{POD}/bare-c/eviction", (status, recording))
        act = world.actuator_on(server, clock)
        sent = real["request"]["body"]["deleteOptions"]
        ref = PodRef(NS, "bare-c", "trainer")
        uid = sent["preconditions"]["uid"]
        if outcome is None:
            act.migration.work.remove(ref, uid, sent["gracePeriodSeconds"], evict=True)
        else:
            with pytest.raises(ActuationError, match=outcome):
                act.migration.work.remove(ref, uid, sent["gracePeriodSeconds"], evict=True)
    (request,) = [r for r in server.requests if r["path"].endswith("/eviction")]
    assert request["body"] == real["request"]["body"]


def test_the_pod_watch_relists_after_the_recorded_410() -> None:
    """List, watch (410 as recorded), relist; the difference is reported."""
    with served() as (server, _):
        world.node_w2(server.cluster)
        server.route("GET", "/api/v1/pods", (200, "pod_list_all_namespaces_node_w2.json"),
                     (200, "watch_pods_rv1_410.jsonl"), (200, "pod_list_namespaced.json"),
                     (200, "watch_pods_rv1_410.jsonl"))
        stop = threading.Event()
        seen: list[ContainerEvent] = []

        def on_event(event: ContainerEvent) -> None:
            seen.append(event)
            stop.set()
        with server.api_client() as api:
            PodWatch(k8s.CoreV1Api(api), Scope(), clock=lambda: 1.0).watch(on_event, stop)
    # the namespaced list also holds job-norepl's pod (on hollow-1): it started
    assert [(e.kind, e.container) for e in seen] == [
        ("started", "training/job-norepl-w46b9/trainer")]
    watches = [r for r in server.requests if r["query"].get("watch")]
    assert watches[0]["query"]["resourceVersion"] == ["928"]
