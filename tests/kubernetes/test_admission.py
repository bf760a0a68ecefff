"""Kubernetes admission: held (suspended, managed) Jobs listed as pending jobs, and an Admit
that pins the Job's pod template to the chosen node and unsuspends it, with the real client
against the local fake API server; refusals say why, a repeat is harmless."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s  # type: ignore[import-untyped]

from policyd.actuators.kubernetes import ActuationError, KubernetesActuator, KubernetesSettings
from policyd.actuators.kubernetes.admission import pinned_to, template_patch
from policyd.model import Admit
from policyd.sources.kubernetes_jobs import held_jobs, list_jobs
from tests.kubernetes.builders import FakeClock, decision
from tests.kubernetes.fake_apiserver import FakeApiServer

JOB = "/apis/batch/v1/namespaces/ml/jobs/train"
EVENTS = "/apis/events.k8s.io/v1/namespaces/ml/events"


def job(*, suspend: bool = True, labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None, template_annotations: dict[str, str] | None
        = None, active: int = 0, name: str = "train") -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "ml", "uid": "u-1",
                     "creationTimestamp": "2026-11-24T00:00:00Z",
                     "labels": {"policyd.io/managed": "true", **(labels or {})},
                     "annotations": dict(annotations or {})},
        "spec": {"suspend": suspend, "template": {
            "metadata": {"annotations": dict(template_annotations or {})},
            "spec": {"containers": [{"name": "trainer", "image": "trainer:1"}],
                     "affinity": {"podAntiAffinity": {"x": 1}}}}},
        "status": {"active": active} if active else {},
    }


class Scope:
    namespaces: tuple[str, ...] = ()
    label_selector = "policyd.io/managed=true"


def test_held_jobs_are_the_suspended_managed_ones_not_moves_or_running() -> None:
    warnings: list[str] = []
    found = held_jobs([
        job(annotations={"policyd.io/deadline": "2h"},
            template_annotations={"policyd.io/deadline": "1h", "policyd.io/min-cpu": "1"}),
        job(name="running", suspend=False),
        job(name="moving", labels={"policyd.io/migrating": "true"}),
        job(name="stopping", active=1),
        {**job(name="undated"), "metadata": {**job()["metadata"], "name": "undated",
                                             "creationTimestamp": "soon"}},
    ], warnings)
    assert [(p.id, p.name, p.namespace, p.node, p.submitted_at) for p in found] == [
        ("ml/train", "train", "ml", None, 1_795_478_400.0)]
    assert dict(found[0].annotations) == {"policyd.io/deadline": "2h",
                                          "policyd.io/min-cpu": "1"}
    assert warnings == ["job ml/undated: no readable creationTimestamp; not offered for "
                        "admission"]


def test_the_pin_patch_keeps_other_affinity_and_carries_the_declarations() -> None:
    held = job(annotations={"policyd.io/deadline": "2h"},
               template_annotations={"policyd.io/max-cpu": "3"})
    patch = template_patch(held, "w2", now=1_795_478_500.0)
    template = patch["spec"]["template"]
    assert template["metadata"]["annotations"] == {
        "policyd.io/last_action_at": "1795478500", "policyd.io/submitted-at": "1795478400",
        "policyd.io/deadline": "2h"}
    assert template["spec"]["affinity"]["podAntiAffinity"] == {"x": 1}
    pinned = copy.deepcopy(held)
    pinned["spec"]["template"]["spec"]["affinity"] = template["spec"]["affinity"]
    assert pinned_to(pinned) == "w2" and pinned_to(held) is None


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    with FakeApiServer() as fake:
        yield fake


def actuator(server: FakeApiServer) -> KubernetesActuator:
    shared = server.api_client()
    clock = FakeClock()
    act = KubernetesActuator(KubernetesSettings(host=server.url, retries=0),
                             core=k8s.CoreV1Api(shared), batch=k8s.BatchV1Api(shared),
                             events_api=k8s.EventsV1Api(shared), clock=clock,
                             sleep=clock.sleep)
    act._recovered = True
    return act


def admit(node: str = "w2", container: str = "ml/train") -> Admit:
    return Admit(policy="dl", container=container, node=node, fraction=0.25, mode="quota",
                 reason="earliest deadline first")


def test_list_jobs_is_one_request_with_the_selector(server: FakeApiServer) -> None:
    server.route("GET", "/apis/batch/v1/jobs", (200, {"kind": "JobList", "apiVersion":
                                                     "batch/v1", "items": [job()]}))
    with server.api_client() as api:
        items = list_jobs(k8s.BatchV1Api(api), Scope())
    assert [i["metadata"]["name"] for i in items] == ["train"]
    (asked,) = server.requests
    assert asked["query"]["labelSelector"] == ["policyd.io/managed=true"]


def test_admit_pins_then_unsuspends_and_leaves_an_event(server: FakeApiServer) -> None:
    server.route("GET", JOB, (200, job(annotations={"policyd.io/deadline": "2h"})))
    server.route("PATCH", JOB, (200, job()))
    server.route("POST", EVENTS, (201, "event_created.json"))
    actuator(server).apply(admit(), decision())
    pin, unsuspend = [r for r in server.requests if r["method"] == "PATCH"]
    affinity = pin["body"]["spec"]["template"]["spec"]["affinity"]
    assert affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                "values": ["w2"]}]}]}
    assert pin["body"]["spec"]["template"]["metadata"]["annotations"][
        "policyd.io/deadline"] == "2h"
    assert unsuspend["body"] == {"spec": {"suspend": False}}
    (event,) = [r for r in server.requests if r["method"] == "POST"]
    assert event["body"]["regarding"]["kind"] == "Job"
    assert event["body"]["regarding"]["name"] == "train"
    assert event["body"]["action"] == "Admit" and event["body"]["type"] == "Normal"


@pytest.mark.parametrize(("answer", "words"), [
    (job(labels={"policyd.io/managed": "false"}), "does not match 'policyd.io/managed=true'"),
    (job(labels={"policyd.io/opt-out": "true"}), "is opted out"),
    (job(labels={"policyd.io/migrating": "true"}), "suspended by a move in progress"),
    (job(suspend=False), "is not suspended: it runs already, not held"),
])
def test_refusals_say_why_and_patch_nothing(server: FakeApiServer, answer: dict[str, Any],
                                            words: str) -> None:
    server.route("GET", JOB, (200, answer))
    server.route("POST", EVENTS, (201, "event_created.json"))
    with pytest.raises(ActuationError, match=words):
        actuator(server).apply(admit(), decision())
    assert not [r for r in server.requests if r["method"] == "PATCH"]
    (event,) = [r for r in server.requests if r["method"] == "POST"]
    assert event["body"]["type"] == "Warning"


def test_a_repeat_after_success_is_harmless(server: FakeApiServer) -> None:
    done = job(suspend=False)
    done["spec"]["template"]["spec"]["affinity"] = template_patch(
        job(), "w2", now=0.0)["spec"]["template"]["spec"]["affinity"]
    server.route("GET", JOB, (200, done))
    server.route("POST", EVENTS, (201, "event_created.json"))
    actuator(server).apply(admit(), decision())
    assert not [r for r in server.requests if r["method"] == "PATCH"]


def test_a_gone_job_and_a_refused_patch(server: FakeApiServer) -> None:
    server.route("POST", EVENTS, (201, "event_created.json"))
    with pytest.raises(ActuationError, match=r"read job ml/train: HTTP 404 \(gone\)"):
        actuator(server).apply(admit(), decision())
    server.route("GET", JOB, (200, job()))
    server.route("PATCH", JOB, (422, {"kind": "Status", "apiVersion": "v1", "code": 422,
                                      "status": "Failure", "reason": "Invalid",
                                      "message": "field is immutable"}))
    with pytest.raises(ActuationError, match=r"pin job ml/train to node w2: HTTP 422 .*"
                                             r"suspended and never ran"):
        actuator(server).apply(admit(), decision())
    with pytest.raises(ActuationError, match="a held Kubernetes job is named namespace/name"):
        actuator(server).apply(admit(container="train"), decision())
