"""The RBAC declaration matches the code: every request policyd makes needs a declared rule,
and every declared rule is needed by some request.

Each scenario runs a part of policyd (actuator, moves and their recovery, pod source and watch,
held Jobs' list and watch, leader election, policy resources) against the fake API server;
every request it made is turned into the rule the API server's authorizer checks (group,
resource, subresource, verb: the path and the method, `watch` for a watch), as Kubernetes'
RequestInfo does."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s  # type: ignore[import-untyped]

from policyd.actuators.kubernetes import ActuationError
from policyd.actuators.kubernetes.rbac import CALLS, REQUIRED_RULES, Rule, role_rules
from policyd.daemon.leader import LeaderElector, LeaseSettings
from policyd.daemon.policy_resources import PolicyResources
from policyd.engine.registry import KINDS
from policyd.model import Admit
from policyd.sources.kubernetes_jobs import JobWatch, list_jobs
from policyd.sources.kubernetes_node_watch import NodeWatch
from policyd.sources.kubernetes_pod_facts import list_nodes, list_pods
from policyd.sources.kubernetes_pod_watch import PodWatch
from tests.kubernetes import world
from tests.kubernetes.fake_apiserver import FakeApiServer
from tests.kubernetes.world import NS, decision, migrate, served

VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def rule_of(request: dict[str, Any]) -> Rule:
    """The RBAC rule a request needs (Kubernetes' RequestInfo, for the paths policyd uses)."""
    parts = request["path"].strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    if rest[0] == "namespaces" and len(rest) > 2:
        rest = rest[2:]
    name = rest[1] if len(rest) > 1 else ""
    verb = VERBS.get(request["method"]) or (
        "watch" if str((request["query"].get("watch") or [""])[0]).lower() == "true"
        else "get" if name else "list")
    return Rule(group, rest[0], rest[2] if len(rest) > 2 else "", verb)


class Scope:
    namespaces: tuple[str, ...] = ()
    label_selector = "policyd.io/managed=true"
    container_name: str | None = None
    node_name: str | None = None


class Namespaced(Scope):
    namespaces = (NS,)


def resize(server: FakeApiServer, clock: Any) -> None:
    world.node_w2(server.cluster)
    world.resize_pod(server.cluster, "rs-done")
    world.actuator_on(server, clock).apply(world.set_cpu("rs-done", 0.3), decision())


def bare_rolled_back(server: FakeApiServer, clock: Any) -> None:
    world.hollow_1(server.cluster)
    world.node_w2(server.cluster, "50m")
    world.bare_pod(server.cluster)
    with pytest.raises(ActuationError, match="rolled back"):
        world.actuator_on(server, clock).apply(migrate("bare-c", grace_seconds=30),
                                               decision(policy="specon"))


def pending_then_again(server: FakeApiServer, clock: Any) -> None:
    """A move of bare-c is recorded but its eviction never happened; the next Migrate of the
    same pod reads it and settles it first."""
    world.hollow_1(server.cluster)
    world.node_w2(server.cluster)
    pod = world.bare_pod(server.cluster)
    from policyd.actuators.kubernetes.migration import bare_move  # noqa: PLC0415

    move = bare_move(migrate("bare-c"), pod, 30.0, now=clock.now)
    act = world.actuator_on(server, clock)
    act._settle_at = float("inf")  # as if the start-up recovery had run before the record
    server.cluster.add("configmaps", move.to_config_map("policyd"))
    with pytest.raises(ActuationError, match="already pending"):
        act.apply(migrate("bare-c", grace_seconds=30), decision(policy="specon"))


def job_move(server: FakeApiServer, clock: Any) -> None:
    world.hollow_1(server.cluster)
    world.node_w2(server.cluster)
    world.job(server.cluster, "job-a")
    server.cluster.advance(2, clock)
    (pod,) = server.cluster.items("pods", NS)
    world.actuator_on(server, clock).apply(migrate(pod["metadata"]["name"], grace_seconds=30),
                                           decision(policy="specon"))


def admission(server: FakeApiServer, clock: Any) -> None:
    """The manager lists and watches the held Jobs (all namespaces, or its own) and admits
    one."""
    world.node_w2(server.cluster)
    held = world.job(server.cluster, suspend=True)
    with server.api_client() as api:
        for scope in (Scope(), Namespaced()):
            assert list_jobs(k8s.BatchV1Api(api), scope)
            JobWatch(k8s.BatchV1Api(api), scope, window_seconds=1).watch(
                lambda e: None, _soon(threading.Event()))
    world.actuator_on(server, clock).apply(
        Admit(policy="deadline", container=f"{NS}/{held['metadata']['name']}", node="w2",
              reason="earliest deadline first"), decision(policy="deadline"))


def source_and_watch(server: FakeApiServer, clock: Any) -> None:
    world.node_w2(server.cluster)
    world.resize_pod(server.cluster, "rs-done")
    with server.api_client() as api:
        core = k8s.CoreV1Api(api)
        for scope in (Scope(), Namespaced()):
            list_pods(core, scope)
            PodWatch(core, scope, window_seconds=1).watch(lambda e: None,
                                                          _soon(threading.Event()))
        list_nodes(core)
        NodeWatch(core, window_seconds=1).watch(lambda e: None, _soon(threading.Event()))


def _soon(stop: threading.Event) -> threading.Event:
    threading.Timer(0.3, stop.set).start()
    return stop


def election(server: FakeApiServer, clock: Any) -> None:
    with server.api_client() as api:
        elector = LeaderElector(LeaseSettings(identity="a"), k8s.CoordinationV1Api(api))
        assert elector.step()  # get (404), create
        assert elector.step()  # get, update


def policy_resources(server: FakeApiServer, clock: Any) -> None:
    server.cluster.policy_plurals = {f"{k.lower()}s": k for k in KINDS}
    for kind in KINDS:
        server.cluster.put_policy(f"{kind.lower()}s", {
            "apiVersion": "policyd.io/v1alpha1", "kind": kind,
            "metadata": {"name": f"{kind.lower()}-a"}, "spec": {}})
    stop = threading.Event()
    with server.api_client() as api:
        watched = PolicyResources(k8s.CustomObjectsApi(api), list(KINDS), window_seconds=1)
        watched.start(stop)
        threading.Event().wait(0.5)
        stop.set()
        watched.join()


SCENARIOS: list[Callable[[FakeApiServer, Any], None]] = [
    resize, bare_rolled_back, pending_then_again, job_move, admission, source_and_watch,
    election, policy_resources]


@pytest.fixture(scope="module")
def needed() -> set[Rule]:
    rules: set[Rule] = set()
    for scenario in SCENARIOS:
        with served() as (server, clock):
            scenario(server, clock)
        rules |= {rule_of(r) for r in server.requests}
    return rules


def test_every_request_is_declared(needed: set[Rule]) -> None:
    assert sorted(needed - REQUIRED_RULES) == []


def test_every_rule_is_used(needed: set[Rule]) -> None:
    assert sorted(REQUIRED_RULES - needed) == []


def test_every_declared_method_is_a_client_method() -> None:
    apis = (k8s.CoreV1Api, k8s.BatchV1Api, k8s.EventsV1Api, k8s.PolicyV1Api,
            k8s.CoordinationV1Api)
    for method in CALLS:
        assert any(hasattr(api, method) for api in apis), method


def test_resize_needs_its_own_subresource_rule() -> None:
    assert Rule("", "pods", "resize", "patch") in REQUIRED_RULES
    rendered = role_rules()
    resized = [r for r in rendered if r["resources"] == ["pods/resize"]]
    assert resized == [{"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]}]
    pods_rule = next(r for r in rendered if r["resources"] == ["pods"])
    assert pods_rule["verbs"] == ["create", "delete", "get", "list", "patch", "watch"]
