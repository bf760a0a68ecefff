"""The defects a real v1.36 API server showed (issue 12), each against the fake cluster that
replays its recorded responses and behaviour (`recorded/README.md`), through the real client.

Each test failed on the code before the fix and passes after it (checked by running this file
against that code); the comment says what the old code did.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest
from kubernetes import client as k8s  # type: ignore[import-untyped]

from policyd.actuators.kubernetes import ActuationError
from policyd.sources.kubernetes_pod_facts import list_pods, pod_facts
from policyd.sources.kubernetes_pod_watch import PodWatch
from tests.kubernetes import world
from tests.kubernetes.fake_cluster import recorded, response
from tests.kubernetes.world import NS, decision, events, migrate, served, set_cpu

RESIZE = f"/api/v1/namespaces/{NS}/pods/{{}}/resize"


def resizes(server: Any, name: str) -> list[dict[str, Any]]:
    return [r for r in server.requests if r["path"] == RESIZE.format(name)]


def test_1_shares_never_make_a_burstable_pod_guaranteed() -> None:
    """rs-done (recorded): CPU request 1978m, limit 4746m; memory request = limit (1Gi). A CPU
    request equal to the limit would make it Guaranteed: the server refuses (422, as
    recorded). The old code asked exactly the limit and failed; now the request stops 1m
    below it and the resize is applied."""
    with served() as (server, clock):
        world.node_w2(server.cluster)
        world.resize_pod(server.cluster, "rs-done")
        act = world.actuator_on(server, clock)
        act.apply(set_cpu("rs-done", 0.7), decision())  # 0.7 x 7910m > the limit
        (sent,) = resizes(server, "rs-done")
        assert sent["body"]["spec"]["containers"][0]["resources"] == {
            "requests": {"cpu": "4745m"}}
        pod = server.cluster.get("pods", NS, "rs-done")
        assert pod is not None and pod["status"]["qosClass"] == "Burstable"
        assert pod["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] == "4745m"


def test_1_quota_never_makes_a_burstable_pod_guaranteed() -> None:
    """Quota mode, a cap below the request: the request comes down with the limit; equal to
    it, the pod would be Guaranteed (refused); so it stops 1m below."""
    with served() as (server, clock):
        world.node_w2(server.cluster)
        world.resize_pod(server.cluster, "rs-done")
        world.actuator_on(server, clock).apply(set_cpu("rs-done", 0.125, "quota"), decision())
        (sent,) = resizes(server, "rs-done")
        assert sent["body"]["spec"]["containers"][0]["resources"] == {
            "limits": {"cpu": "989m"}, "requests": {"cpu": "988m"}}


def test_2_a_condition_of_an_earlier_resize_does_not_fail_the_next() -> None:
    """rs-stale (recorded): generation 4, done, with an Infeasible PodResizePending of
    generation 3 left over. The new resize is answered with generation 5 and the old status;
    the old code read the stale condition and failed at once; the kubelet applies it 1 s
    later."""
    with served() as (server, clock):
        world.node_w2(server.cluster)
        world.resize_pod(server.cluster, "rs-stale")
        act = world.actuator_on(server, clock)
        act.apply(set_cpu("rs-stale", 0.3), decision())
        pod = server.cluster.get("pods", NS, "rs-stale")
        assert pod is not None
        assert (pod["metadata"]["generation"], pod["status"]["observedGeneration"]) == (5, 5)
        assert pod["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] == "2373m"
        assert [e["type"] for e in events(server)] == ["Normal"]


def test_3_a_job_is_not_moved_to_a_node_its_node_selector_excludes() -> None:
    """job-ns (recorded): its template's nodeSelector says hollow-1. The old code suspended it,
    pinned it to w2 and resumed it: its pod stayed Pending for good. Now it is refused before
    anything is touched, and its pod keeps running on hollow-1."""
    with served() as (server, clock):
        world.hollow_1(server.cluster)
        world.node_w2(server.cluster)
        world.job(server.cluster, "job-ns")
        server.cluster.advance(2, clock)
        (pod,) = server.cluster.items("pods", NS)
        act = world.actuator_on(server, clock)
        with pytest.raises(ActuationError, match=r"nodeSelector \(kubernetes.io/hostname="
                                                 r"hollow-1\) excludes node w2"):
            act.apply(migrate(pod["metadata"]["name"]), decision(policy="specon"))
        job = server.cluster.get("jobs", NS, "job-ns")
        assert job is not None and not job["spec"].get("suspend")
        assert "affinity" not in job["spec"]["template"]["spec"]
        (still,) = server.cluster.items("pods", NS)
        assert (still["metadata"]["uid"], still["status"]["phase"]) == (
            pod["metadata"]["uid"], "Running")


def test_3_a_job_that_cannot_run_on_the_target_is_rolled_back_home() -> None:
    """w2 has no room for job-a's pod: the old code left the Job pinned to w2, Pending; now
    it is suspended again, pinned back to hollow-1 and resumed, and runs there."""
    with served() as (server, clock):
        world.hollow_1(server.cluster)
        world.node_w2(server.cluster, cpu="50m")
        world.job(server.cluster, "job-a")
        server.cluster.advance(2, clock)
        (pod,) = server.cluster.items("pods", NS)
        act = world.actuator_on(server, clock)
        with pytest.raises(ActuationError, match=r"Insufficient cpu.*rolled back"):
            act.apply(migrate(pod["metadata"]["name"]), decision(policy="specon"))
        (running,) = [p for p in server.cluster.items("pods", NS)
                      if p["status"]["phase"] == "Running"]
        assert running["spec"]["nodeName"] == "hollow-1"
        assert server.cluster.pods.trainers.overlaps("job/job-a") == []


def test_4_the_source_reports_the_applied_cpu_not_the_asked() -> None:
    """A resize pending as Infeasible (recorded): spec asks 1978m, the kubelet applies 1 core.
    The old source read the spec (1.978 cores)."""
    infeasible = response("pod_get_resize_pending_infeasible.json")
    facts = pod_facts(infeasible, "trainer")
    assert facts is not None and facts.cpu_request == 1.0 and facts.cpu_limit == 4.0
    with served() as (server, _):
        world.node_w2(server.cluster)
        world.resize_pod(server.cluster, "rs-done")
        with server.api_client() as api:
            items, _ = list_pods(k8s.CoreV1Api(api), Scope())
        assert [pod_facts(p, None).cpu_request for p in items] == [1.978]  # type: ignore[union-attr]


class Scope:
    namespaces: tuple[str, ...] = (NS,)
    label_selector = "policyd.io/managed=true"
    container_name: str | None = None
    node_name: str | None = None


def test_5_the_pod_watch_stops_at_once_not_at_the_end_of_its_window() -> None:
    """The old watch saw `stop` only between events: with no pod changing, shutdown waited
    for the end of the 30 s window (and the Lease was released after it)."""
    with served() as (server, _):
        world.node_w2(server.cluster)
        world.resize_pod(server.cluster, "rs-done")
        stop = threading.Event()
        with server.api_client() as api:
            watch = PodWatch(k8s.CoreV1Api(api), Scope(), window_seconds=30)
            thread = threading.Thread(target=watch.watch, args=(lambda e: None, stop))
            thread.start()
            for _ in range(200):  # until the watch request is open
                if any(r["query"].get("watch") for r in server.requests):
                    break
                threading.Event().wait(0.02)
            stop.set()
            thread.join(timeout=5)
            assert not thread.is_alive()


def test_6_an_event_note_is_cut_to_1024_bytes_not_characters() -> None:
    """The recorded refusal: a note of 1024 characters, 1534 bytes ("ΣG ≥ α" is 2-3 bytes a
    character). The old code cut by characters: the server refused it and the Event was
    lost."""
    note = recorded("event_create_422_note_bytes.json")["request"]["body"]["note"]
    assert (len(note), len(note.encode())) == (1024, 1534)
    with served() as (server, clock):
        world.node_w2(server.cluster)
        world.resize_pod(server.cluster, "rs-done")
        action = dataclasses.replace(set_cpu("rs-done", 0.3), reason=note)
        world.actuator_on(server, clock).apply(action, decision())
        (event,) = events(server)
        assert len(event["note"].encode()) <= 1024 and event["note"].endswith("...")


def test_7_the_migration_event_names_the_replacement_not_the_deleted_pod() -> None:
    with served() as (server, clock):
        world.hollow_1(server.cluster)
        world.node_w2(server.cluster)
        old = world.bare_pod(server.cluster)
        world.actuator_on(server, clock).apply(migrate("bare-c", grace_seconds=30),
                                               decision(policy="specon"))
        new = server.cluster.get("pods", NS, "bare-c")
        assert new is not None and new["spec"]["nodeName"] == "w2"
        (event,) = events(server)
        assert event["regarding"]["uid"] == new["metadata"]["uid"] != old["metadata"]["uid"]


def test_8_the_same_resize_is_not_sent_again() -> None:
    """A Burstable pod whose memory request is below its limit gets its CPU request raised to
    the limit (FlowCon asked for more). The engine then sees less than it asked and asks the
    same again every cycle: the old code sent the same PATCH (and an Event) each time."""
    with served() as (server, clock):
        world.node_w2(server.cluster)
        pod = world.listed_pod("rs-done")
        pod["spec"]["containers"][0]["resources"]["requests"]["memory"] = "512Mi"
        pod["status"]["containerStatuses"][0]["resources"]["requests"]["memory"] = "512Mi"
        server.cluster.add("pods", pod)
        act = world.actuator_on(server, clock)
        for _ in range(3):
            act.apply(set_cpu("rs-done", 0.7), decision())
            clock.now += 20
        assert len(resizes(server, "rs-done")) == 1
        assert len(events(server)) == 1


def test_8_a_job_move_waits_with_the_actions_grace() -> None:
    """The trainer needs 50 s to checkpoint; the policy gives it 100 s, the settings' default
    is 10 s. The old code waited 10 + 5 s for the Job's pod, gave up and resumed it where it
    was; now its pods are stopped with the policy's 100 s and the move goes through."""
    with served() as (server, clock):
        world.hollow_1(server.cluster)
        world.node_w2(server.cluster)
        world.job(server.cluster, "job-a", grace_seconds=120)
        server.cluster.pods.checkpoint_seconds = 50
        server.cluster.advance(2, clock)
        (pod,) = server.cluster.items("pods", NS)
        act = world.actuator_on(server, clock, grace_seconds=10, delete_timeout_seconds=5,
                                poll_seconds=5)
        act.apply(migrate(pod["metadata"]["name"], grace_seconds=100),
                  decision(policy="specon"))
        (running,) = [p for p in server.cluster.items("pods", NS)
                      if p["status"]["phase"] == "Running"]
        assert running["spec"]["nodeName"] == "w2"
        runs = server.cluster.pods.trainers.runs["job/job-a"]
        assert runs[-1].resumed_from == server.cluster.pods.trainers.checkpoints["job/job-a"][-1]
