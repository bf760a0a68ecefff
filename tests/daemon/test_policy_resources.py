"""Policies as custom resources: `kubectl apply -f policies/flowcon.yaml` on the fake API
server, watched by `PolicyResources`, with the hot-reload rule of files applied to each
resource and the verdict written into its status; `policyd run` runs them with the files."""

from __future__ import annotations

import copy
import io
import threading
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s  # type: ignore[import-untyped]
from prometheus_client import CollectorRegistry

from policyd.daemon import run
from policyd.daemon.backend import Parts
from policyd.daemon.policy_resources import PolicyResources
from policyd.daemon.policy_set import PolicySources
from policyd.daemon.reload import PolicyWatcher
from policyd.engine.registry import KINDS
from tests.daemon.fakes import FakeActuator, FakeSource, one_to_limit, policy_yaml
from tests.daemon.test_kubernetes import k8s_settings
from tests.kubernetes.fake_apiserver import FakeApiServer
from tests.kubernetes.world import served

ROOT = Path(__file__).resolve().parents[2]
FLOWCON = yaml.safe_load((ROOT / "policies" / "flowcon.yaml").read_text())
SPECON = yaml.safe_load((ROOT / "policies" / "specon.yaml").read_text())


def install(server: FakeApiServer) -> None:
    """The CRDs of deploy/kubernetes/crds/policies.yaml, installed."""
    server.cluster.policy_plurals = {f"{k.lower()}s": k for k in KINDS}


def watched(server: FakeApiServer, api: Any, **kw: Any) -> PolicyResources:
    resources = PolicyResources(k8s.CustomObjectsApi(api), list(KINDS), **kw)
    resources.list_all()
    return resources


def accepted(server: FakeApiServer, plural: str, name: str) -> dict[str, Any]:
    found = server.cluster.get(plural, "", name)
    assert found is not None
    (condition,) = found["status"]["conditions"]
    assert condition["type"] == "Accepted"
    assert found["status"]["observedGeneration"] == condition["observedGeneration"]
    return dict(condition)


def status_writes(server: FakeApiServer) -> int:
    return sum(r["path"].endswith("/status") for r in server.requests)


def test_the_shipped_policy_files_are_accepted_as_resources() -> None:
    with served() as (server, _):
        install(server)
        server.cluster.put_policy("flowcons", FLOWCON)
        server.cluster.put_policy("specons", SPECON)
        with server.api_client() as api:
            resources = watched(server, api)
        assert [p.name for p in resources.current()] == ["flowcon-default", "specon-default"]
        for plural, name in (("flowcons", "flowcon-default"), ("specons", "specon-default")):
            condition = accepted(server, plural, name)
            assert (condition["status"], condition["reason"], condition["observedGeneration"]
                    ) == ("True", "Valid", 1)


def test_an_invalid_generation_keeps_the_last_good_one_and_says_why() -> None:
    with served() as (server, _):
        install(server)
        server.cluster.put_policy("flowcons", FLOWCON)
        with server.api_client() as api:
            resources = watched(server, api)
            assert resources.take() is not None
            broken = copy.deepcopy(FLOWCON)
            broken["spec"]["alpha"] = 1.5  # relative normalization: a fraction below 1
            server.cluster.put_policy("flowcons", broken)
            resources.list_all()
        assert resources.take() is None  # nothing changed in what runs
        (running,) = resources.current()
        assert running.spec.alpha == 0.05  # type: ignore[attr-defined]
        condition = accepted(server, "flowcons", "flowcon-default")
        assert (condition["status"], condition["reason"], condition["observedGeneration"]) == (
            "False", "Invalid", 2)
        assert condition["message"].startswith("spec: alpha (1.5) must be below 1")
        assert condition["message"].endswith("generation 1 (the last good one) keeps running")


def test_a_new_invalid_resource_does_not_run() -> None:
    with served() as (server, _):
        install(server)
        broken = copy.deepcopy(SPECON)
        broken["spec"]["weights"] = {"pc": 1, "wc": 2, "cc": 0.5}
        server.cluster.put_policy("specons", broken)
        with server.api_client() as api:
            resources = watched(server, api)
        assert resources.current() == ()
        condition = accepted(server, "specons", "specon-default")
        assert condition["reason"] == "Invalid"
        assert condition["message"] == ("spec.weights: pc (1) must be greater than wc (2); "
                                         "not running")


def test_a_verdict_is_written_once() -> None:
    """Several processes watch the same resources: each writes only what the status lacks."""
    with served() as (server, _):
        install(server)
        server.cluster.put_policy("flowcons", FLOWCON)
        with server.api_client() as api:
            watched(server, api)
            watched(server, api).list_all()
        assert status_writes(server) == 1


def test_a_name_a_policy_file_uses_is_refused(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(policy_yaml(name="flowcon-default"))
    files = PolicyWatcher([tmp_path / "p.yaml"])
    with served() as (server, _):
        install(server)
        server.cluster.put_policy("flowcons", FLOWCON)
        with server.api_client() as api:
            resources = PolicyResources(k8s.CustomObjectsApi(api), list(KINDS))
            sources = PolicySources(files, resources, files.load().policies)
            resources.list_all()
        assert [p.name for p in sources.policies()] == ["flowcon-default"]
        condition = accepted(server, "flowcons", "flowcon-default")
        assert condition["reason"] == "NameTaken"
        assert str(tmp_path / "p.yaml") in condition["message"]


def test_resources_changed_while_running_are_reloaded() -> None:
    with served() as (server, _):
        install(server)
        stop = threading.Event()
        with server.api_client() as api:
            resources = PolicyResources(k8s.CustomObjectsApi(api), list(KINDS),
                                        window_seconds=5)
            sources = PolicySources(PolicyWatcher([]), resources, [])
            resources.list_all()
            assert sources.poll() is None
            resources.start(stop)
            server.cluster.put_policy("flowcons", FLOWCON)
            found = wait_reload(sources)
            assert [p.name for p in found] == ["flowcon-default"]
            server.cluster.delete_policy("flowcons", "flowcon-default")
            assert wait_reload(sources) == ()
            stop.set()
            resources.join(5)


def wait_reload(sources: PolicySources) -> tuple[Any, ...]:
    for _ in range(200):
        found = sources.poll()
        if found is not None:
            return found.policies
        threading.Event().wait(0.02)
    raise AssertionError("no reload")


def test_without_the_crds_the_files_still_work() -> None:
    with served() as (server, _):
        with server.api_client() as api:
            resources = watched(server, api)  # 404: logged, not raised
        assert resources.current() == ()


def test_policyd_run_runs_the_resources_with_the_files(tmp_path: Path) -> None:
    """The kubernetes backend with no policy file at all: the resources are the policies."""
    settings = k8s_settings(tmp_path).model_copy(update={"policies": ()})
    with served() as (server, _):
        install(server)
        server.cluster.put_policy("flowcons", {**FLOWCON, "metadata": {"name": "fc"}})
        out, actuator = io.StringIO(), FakeActuator()
        with server.api_client() as api:
            code = run(settings, out=out, stop=threading.Event(), once=True,
                       registry=CollectorRegistry(),
                       parts=Parts(source=FakeSource(one_to_limit), actuator=actuator,
                                   events=None, policy_api=k8s.CustomObjectsApi(api)))
    assert code == 0
    assert out.getvalue().splitlines() == [
        "policy fc: ok, 1 actions (0 failed), next interval 20 s"]
    assert [a.policy for a in actuator.applied] == ["fc"]
