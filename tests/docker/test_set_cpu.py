"""DockerActuator: SetCpu, retries, 404s, MarkMigrated, and the error messages."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import requests
from pydantic import ValidationError

from policyd.actuators.docker import ActuationError, DockerHost, DockerSettings, DockerTls
from policyd.model import Admit, Stop
from tests.docker.builders import Clock, actuator, decision, mark, migrate, set_cpu
from tests.docker.fakes import FakeEngine, api_error


def test_shares_update_and_last_action_recorded(tmp_path: Path) -> None:
    a = FakeEngine()
    job = a.containers.add("job")
    state = tmp_path / "state.json"
    act = actuator(a, state_path=state, clock=Clock(1500.0))
    act.apply(set_cpu(0.25), decision())
    assert job.updates == [{"cpu_shares": 256}]
    entry = json.loads(state.read_text())["markers"]["job"]
    assert entry == {"id": job.id, "last_action_at": 1500.0}
    assert act.recorded_markers()[job.id].last_action_at == 1500.0


def test_quota_uses_ncpu_read_once() -> None:
    a = FakeEngine(ncpu=8)
    job = a.containers.add("job")
    act = actuator(a)
    act.apply(set_cpu(0.5, "quota"), decision())
    act.apply(set_cpu(0.25, "quota"), decision())
    assert job.updates == [{"cpu_period": 100_000, "cpu_quota": 400_000},
                           {"cpu_period": 100_000, "cpu_quota": 200_000}]
    assert a.info_calls == 1


def test_switch_from_quota_to_shares_lifts_the_cap() -> None:
    a = FakeEngine()
    job = a.containers.add("job", host={"CpuQuota": 50_000, "CpuPeriod": 100_000})
    actuator(a).apply(set_cpu(1.0, "shares"), decision())
    assert job.updates == [{"cpu_shares": 1024, "cpu_quota": -1}]


def test_quota_on_a_container_created_with_cpus_is_refused() -> None:
    a = FakeEngine()
    a.containers.add("job", host={"NanoCpus": 2_000_000_000})
    with pytest.raises(ActuationError, match=r"created with --cpus \(NanoCpus\)"):
        actuator(a).apply(set_cpu(0.5, "quota"), decision())


def test_unmanaged_container_is_left_alone() -> None:
    a = FakeEngine()
    job = a.containers.add("job", labels={"app": "x"})
    with pytest.raises(ActuationError,
                       match=r"lacks the label policyd\.io/managed=true; policyd leaves it alone"):
        actuator(a).apply(set_cpu(), decision())
    assert job.updates == []


def test_missing_container_is_a_404_not_retried() -> None:
    a = FakeEngine()
    clock = Clock()
    with pytest.raises(ActuationError, match=r"^container job not found on node a$"):
        actuator(a, clock=clock).apply(set_cpu(), decision())
    assert a.calls["get"] == 1 and clock.slept == []


def test_daemon_errors_are_retried_with_exponential_backoff() -> None:
    a = FakeEngine()
    job = a.containers.add("job")
    a.fail["update"] = [api_error(500), requests.exceptions.ConnectionError("reset"),
                        api_error(503)]
    clock = Clock()
    actuator(a, clock=clock).apply(set_cpu(), decision())
    assert job.updates == [{"cpu_shares": 256}]
    assert clock.slept == [0.5, 1.0, 2.0]


def test_retries_run_out_with_one_line_reason() -> None:
    a = FakeEngine()
    a.containers.add("job")
    a.fail["update"] = [api_error(500, "engine\nbusy")] * 4
    with pytest.raises(ActuationError) as caught:
        actuator(a).apply(set_cpu(), decision())
    message = str(caught.value)
    assert message.startswith("node a: update cpu of job ({'cpu_shares': 256}) failed after "
                              "4 attempts: HTTP 500: engine busy")
    assert "\n" not in message


def test_client_errors_are_not_retried() -> None:
    a = FakeEngine()
    a.containers.add("job")
    a.fail["update"] = [api_error(409, "conflict")]
    clock = Clock()
    with pytest.raises(ActuationError, match=r"failed: HTTP 409: conflict$"):
        actuator(a, clock=clock).apply(set_cpu(), decision())
    assert clock.slept == []


def test_unknown_node_is_named() -> None:
    a = FakeEngine()
    with pytest.raises(ActuationError, match="node 'z' is not one of the Docker hosts: a, b"):
        actuator(a).apply(set_cpu(node="z"), decision())


def test_mark_migrated_is_recorded_in_the_state_file(tmp_path: Path) -> None:
    a = FakeEngine()
    job = a.containers.add("job")
    state = tmp_path / "state.json"
    actuator(a, state_path=state, clock=Clock(2000.0)).apply(mark(), decision())
    assert job.updates == [] and a.containers.created == []
    reloaded = actuator(a, state_path=state)  # a restarted daemon reads it back
    markers = reloaded.recorded_markers()[job.id]
    assert (markers.migrated, markers.converged_at, markers.last_action_at) == (
        True, 1234.5, 2000.0)


def test_a_new_container_of_the_same_name_does_not_inherit_markers(tmp_path: Path) -> None:
    a = FakeEngine()
    a.containers.add("job")
    state = tmp_path / "state.json"
    act = actuator(a, state_path=state)
    act.apply(mark(), decision())
    a.containers.by_name.pop("job")
    again = a.containers.add("job")
    act.apply(set_cpu(), decision())
    assert act.recorded_markers()[again.id].migrated is False


@pytest.mark.parametrize(("kw", "error"), [
    ({"hosts": {}}, ((), "hosts: name at least one node")),
    ({"grace_seconds": 0}, (("grace_seconds",), "Input should be greater than 0")),
    ({"managed_label": "=x"}, (("managed_label",), "Value error, '=x' must be key or "
                                                   "key=value")),
    ({"retries": -1}, (("retries",), "Input should be greater than or equal to 0")),
])
def test_settings_are_checked(kw: dict[str, object], error: tuple[tuple[str, ...], str]
                              ) -> None:
    args: dict[str, object] = {"hosts": {"a": DockerHost(url="unix:///a.sock")}, **kw}
    with pytest.raises(ValidationError) as caught:
        DockerSettings(**args)  # type: ignore[arg-type]
    assert [(e["loc"], e["msg"]) for e in caught.value.errors()] == [error]


def test_tls_files_go_together() -> None:
    with pytest.raises(ValueError, match="cert and key go together"):
        DockerHost(url="tcp://10.0.0.5:2376", tls=DockerTls(cert=Path("c.pem")))
    host = DockerHost(url="tcp://10.0.0.5:2376", tls=DockerTls(cert=Path("c.pem"),
                                                                key=Path("k.pem")))
    assert (host.tls_ca, host.tls_cert, host.tls_key) == (None, Path("c.pem"), Path("k.pem"))



OPTED_OUT = {"policyd.io/managed": "true", "policyd.io/opt-out": "True"}


@pytest.mark.parametrize("action", ["set_cpu", "mark", "migrate", "stop", "admit"])
def test_an_opted_out_container_is_left_alone_whatever_the_decision_says(action: str) -> None:
    """The engine selects on its source's labels; the actuator checks the opt-out again on the
    container as it reads it before acting (a source that read the label wrong, or a label
    put on after the snapshot), as the Kubernetes actuator does on the pod."""
    a, b = FakeEngine(), FakeEngine()
    job = a.containers.add("job", labels=OPTED_OUT,
                           status="created" if action == "admit" else "running")
    acts: dict[str, Any] = {
        "set_cpu": set_cpu(), "mark": mark(), "migrate": migrate(),
        "stop": Stop(policy="p", container="job", node="a", event="target", reason="done"),
        "admit": Admit(policy="p", container="job", node="a", held_on="a", reason="fits")}
    with pytest.raises(ActuationError,
                       match=r"^container job on node a is opted out \(policyd\.io/opt-out=true\);"
                             r" left alone$"):
        actuator(a, b).apply(acts[action], decision())
    assert job.updates == [] and job.stopped_with == [] and "job" in a.containers.by_name
    assert b.containers.by_name == {}


def test_the_deciding_policys_own_opt_out_key_is_checked_on_the_container() -> None:
    """A policy with its own `selector.opt_out_key`: the decision carries the key, and the
    actuator refuses a container labelled with it (the default key still counts), whatever
    the source read."""
    a = FakeEngine()
    job = a.containers.add("job", labels={"policyd.io/managed": "true",
                                          "example.com/no-policyd": "true"})
    act = actuator(a)
    with pytest.raises(ActuationError, match=r"is opted out \(example\.com/no-policyd=true\)"):
        act.apply(set_cpu(), replace(decision(), opt_out_key="example.com/no-policyd"))
    assert job.updates == []
    act.apply(set_cpu(), decision())  # a key no deciding policy names stops nothing
    assert job.updates != []
    assert act.engines.opt_out.keys == ("policyd.io/opt-out",)
