"""Migrations on the fake cluster: bare pods (evict, recreate, roll back) and Jobs (suspend,
re-pin, resume), each written down on the cluster first, under PodDisruptionBudgets."""

from __future__ import annotations

from typing import Any

import pytest

from policyd.actuators.kubernetes import ActuationError
from policyd.model import labels
from tests.kubernetes import world
from tests.kubernetes.fake_apiserver import FakeApiServer
from tests.kubernetes.world import NS, decision, events, migrate, served

SPECON = decision(policy="specon")


def records(server: FakeApiServer) -> list[dict[str, Any]]:
    return server.cluster.items("configmaps", "policyd")


def bare_world(server: FakeApiServer, *, w2_cpu: str = "7910m") -> dict[str, Any]:
    world.hollow_1(server.cluster)
    world.node_w2(server.cluster, w2_cpu)
    return world.bare_pod(server.cluster)


def writes(server: FakeApiServer) -> list[tuple[str, str]]:
    return [(r["method"], r["path"].rsplit("/", 2)[-2] + "/" + r["path"].rsplit("/", 1)[-1])
            for r in server.requests if r["method"] != "GET"]


def test_a_bare_pod_is_recorded_evicted_and_recreated_on_the_target() -> None:
    with served() as (server, clock):
        old = bare_world(server)
        server.cluster.advance(60, clock)  # a minute of training before it moves
        world.actuator_on(server, clock).apply(migrate("bare-c", grace_seconds=30), SPECON)
        new = server.cluster.get("pods", NS, "bare-c")
        assert new is not None and new["spec"]["nodeName"] == "w2"
    sent = [r for r in server.requests if r["method"] != "GET"]
    assert [(r["method"], r["path"].split("/")[-1]) for r in sent] == [
        ("POST", "configmaps"), ("POST", "eviction"), ("POST", "pods"),
        ("DELETE", sent[3]["path"].split("/")[-1]), ("POST", "events")]
    assert sent[0]["body"]["metadata"]["labels"] == {labels.MOVE: "true"}
    assert sent[1]["body"]["deleteOptions"] == {
        "gracePeriodSeconds": 30, "preconditions": {"uid": old["metadata"]["uid"]}}
    created = sent[2]["body"]
    assert "nodeName" not in created["spec"]
    assert created["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["w2"]}]}]
    assert [v["name"] for v in created["spec"]["volumes"]] == ["ckpt"]
    marks = created["metadata"]["annotations"]
    assert (marks[labels.MIGRATED], marks[labels.MIGRATED_FROM], marks[labels.MOVE]) == (
        "true", "hollow-1", sent[0]["body"]["metadata"]["name"])
    assert records(server) == []
    runs = server.cluster.pods.trainers.runs["bare-c"]
    assert [r.node for r in runs] == ["hollow-1", "w2"]
    assert runs[1].resumed_from == server.cluster.pods.trainers.checkpoints["bare-c"][-1] > 0


@pytest.mark.parametrize(("grace", "sent"), [(45.0, 45), (0.0, 0), (None, 60)],
                         ids=["policy-45", "policy-0-is-kept", "none-is-the-default"])
def test_the_grace_period_is_the_actions_else_the_configured_default(grace: float | None,
                                                                     sent: int) -> None:
    """The one grace rule (`policyd.actuators.grace`; Docker: tests/docker/test_migration.py):
    a policy's 0 asks for an immediate stop and is sent as 0, not replaced by the default."""
    with served() as (server, clock):
        bare_world(server)
        act = world.actuator_on(server, clock, grace_seconds=60.0)
        try:
            act.apply(migrate("bare-c", grace_seconds=grace), SPECON)
        except ActuationError:
            assert grace == 0.0  # killed at once: no checkpoint, rolled back
    (eviction,) = [r for r in server.requests if r["path"].endswith("/eviction")]
    assert eviction["body"]["deleteOptions"]["gracePeriodSeconds"] == sent


def test_no_checkpoint_rolls_back_home() -> None:
    """Killed before its checkpoint (grace 1 s, the trainer needs 2 s): the pod is created
    again on its node, where it resumes from the checkpoint it had."""
    with served() as (server, clock):
        bare_world(server)
        with pytest.raises(ActuationError, match=r"exited with code 137.*rolled back"):
            world.actuator_on(server, clock).apply(migrate("bare-c", grace_seconds=1), SPECON)
        server.cluster.advance(5, clock)
        back = server.cluster.get("pods", NS, "bare-c")
        assert back is not None and back["spec"]["nodeName"] == "hollow-1"
        assert back["status"]["phase"] == "Running"
        assert records(server) == []


def test_a_replacement_that_cannot_run_on_the_target_is_rolled_back() -> None:
    with served() as (server, clock):
        bare_world(server, w2_cpu="100m")
        with pytest.raises(ActuationError, match=r"Insufficient cpu.*rolled back: running "
                                                 r"again on node hollow-1"):
            world.actuator_on(server, clock).apply(migrate("bare-c", grace_seconds=30),
                                                   SPECON)
        server.cluster.advance(5, clock)
        back = server.cluster.get("pods", NS, "bare-c")
        assert back is not None and back["spec"]["nodeName"] == "hollow-1"
        trainers = server.cluster.pods.trainers
        assert len(trainers.running("bare-c")) == 1 and trainers.overlaps("bare-c") == []
        assert [e["type"] for e in events(server)] == ["Warning"]


def test_a_budget_refusing_the_eviction_leaves_everything_as_it_was() -> None:
    with served() as (server, clock):
        old = bare_world(server)
        server.cluster.add("poddisruptionbudgets", budget("bare-c", {"app": "bare-c"}, 0))
        with pytest.raises(ActuationError, match="PDB forbids now, retried next cycle"):
            world.actuator_on(server, clock).apply(migrate("bare-c", grace_seconds=30),
                                                   SPECON)
        still = server.cluster.get("pods", NS, "bare-c")
        assert still is not None and still["metadata"]["uid"] == old["metadata"]["uid"]
        assert records(server) == []


def budget(name: str, match: dict[str, str], allowed: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NS},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": match}},
            "status": {"disruptionsAllowed": allowed}}


# --- Jobs ---------------------------------------------------------------------------------------

def job_world(server: FakeApiServer, clock: Any, name: str = "job-a") -> dict[str, Any]:
    world.hollow_1(server.cluster)
    world.node_w2(server.cluster)
    world.job(server.cluster, name)
    server.cluster.advance(2, clock)
    (pod,) = server.cluster.items("pods", NS)
    return pod


def test_a_job_is_recorded_suspended_repinned_and_resumed() -> None:
    with served() as (server, clock):
        pod = job_world(server, clock)
        world.actuator_on(server, clock).apply(
            migrate(pod["metadata"]["name"], grace_seconds=30), SPECON)
        job = server.cluster.get("jobs", NS, "job-a")
        assert job is not None and not job["spec"]["suspend"]
        assert labels.MIGRATING not in job["metadata"].get("labels", {})
        template = job["spec"]["template"]
        assert template["metadata"]["annotations"][labels.MIGRATED] == "true"
        assert template["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
            "matchFields"][0]["values"] == ["w2"]
        (running,) = [p for p in server.cluster.items("pods", NS)
                      if p["status"]["phase"] == "Running"]
        assert running["spec"]["nodeName"] == "w2"
        assert records(server) == []
        (event,) = events(server)
        assert (event["regarding"]["kind"], event["regarding"]["name"]) == ("Job", "job-a")
    patches = [r["body"] for r in server.requests if r["method"] == "PATCH"]
    assert [p["spec"].get("suspend") for p in patches] == [True, None, False]
    assert patches[0]["metadata"]["annotations"] == {labels.MIGRATING_TO: "w2"}
    deletes = [r for r in server.requests if r["method"] == "DELETE" and "/pods/" in r["path"]]
    assert [d["body"]["gracePeriodSeconds"] for d in deletes] == [30]


def test_a_job_under_a_budget_allowing_no_disruption_is_not_touched() -> None:
    """Suspending bypasses the Eviction API: the budget is checked first."""
    with served() as (server, clock):
        pod = job_world(server, clock)
        server.cluster.add("poddisruptionbudgets", budget("job-a", {"app": "job-a"}, 0))
        with pytest.raises(ActuationError, match=r"PodDisruptionBudget job-a allows no "
                                                 r"disruption now; PDB forbids now"):
            world.actuator_on(server, clock).apply(
                migrate(pod["metadata"]["name"], grace_seconds=30), SPECON)
        job = server.cluster.get("jobs", NS, "job-a")
        assert job is not None and not job["spec"].get("suspend")
        assert records(server) == []


def test_a_job_without_replacement_policy_failed_is_refused() -> None:
    with served() as (server, clock):
        pod = job_world(server, clock, "job-norepl")
        with pytest.raises(ActuationError, match="podReplacementPolicy: Failed"):
            world.actuator_on(server, clock).apply(
                migrate(pod["metadata"]["name"], grace_seconds=30), SPECON)
        assert not [r for r in server.requests if r["method"] == "PATCH"]


def test_a_pin_refused_before_1_36_resumes_the_job_unchanged() -> None:
    with served() as (server, clock):
        pod = job_world(server, clock)
        server.cluster.before_1_36 = True
        with pytest.raises(ActuationError, match=r"needs Kubernetes 1\.36"):
            world.actuator_on(server, clock).apply(
                migrate(pod["metadata"]["name"], grace_seconds=30), SPECON)
        patches = [r["body"] for r in server.requests if r["method"] == "PATCH"]
        assert patches[-1]["spec"] == {"suspend": False}
        assert records(server) == []
        server.cluster.advance(5, clock)
        assert [p["spec"]["nodeName"] for p in server.cluster.items("pods", NS)
                if p["status"]["phase"] == "Running"] == ["hollow-1"]


def test_a_pending_move_is_settled_before_the_next_action() -> None:
    """A move left half-done (its record on the cluster, the pod evicted) is found and
    finished before anything else is done, by the next policyd to act."""
    with served() as (server, clock):
        bare_world(server)
        first = world.actuator_on(server, clock)
        first.migration.caller.call = crash_after(first.migration.caller.call, "eviction")
        with pytest.raises(Crash):
            first.apply(migrate("bare-c", grace_seconds=30), SPECON)
        assert len(records(server)) == 1
        world.resize_pod(server.cluster, "rs-done")
        world.actuator_on(server, clock).apply(world.set_cpu("rs-done", 0.3), SPECON)
        moved = server.cluster.get("pods", NS, "bare-c")
        assert moved is not None and moved["spec"]["nodeName"] == "w2"
        assert records(server) == []


class Crash(BaseException):
    """policyd dies (nothing in it catches a BaseException)."""


def crash_after(call: Any, path_part: str) -> Any:
    """`call`, dying right after the first call whose method name mentions `path_part`."""
    def dying(what: str, method: Any, *args: Any, **kwargs: Any) -> Any:
        out = call(what, method, *args, **kwargs)
        if path_part in getattr(method, "__name__", ""):
            raise Crash(what)
        return out
    return dying


def test_records_that_cannot_be_listed_do_not_stop_the_actions() -> None:
    """No permission on the records (403): logged, retried later; the action still runs."""
    with served() as (server, clock):
        world.node_w2(server.cluster)
        world.resize_pod(server.cluster, "rs-done")
        server.route("GET", "/api/v1/namespaces/policyd/configmaps",
                     (403, "lease_get_403_other_name.json"))
        act = world.actuator_on(server, clock)
        act.apply(world.set_cpu("rs-done", 0.3), decision())
        assert act._settle_at > clock.now  # looked for again later
        pod = server.cluster.get("pods", NS, "rs-done")
        assert pod is not None
        assert pod["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] == "2373m"
