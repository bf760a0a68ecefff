"""DockerActuator and Stop: the restart policy set to no before SIGTERM with the grace, the
container and its checkpoint kept, the delivery recorded; an exit other than 0 is an error
that says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policyd.actuators.docker import ActuationError
from policyd.actuators.docker.stop import checkpoint_of, host_path
from policyd.model import Stop
from tests.docker.builders import Clock, actuator, decision
from tests.docker.fakes import FakeEngine


def stop(grace: float | None = 45.0) -> Stop:
    return Stop(policy="p", container="job", node="a", event="target",
                reason="reached its target loss: 0.09 <= 0.1", grace_seconds=grace)


def test_a_stopped_job_is_delivered_and_kept(tmp_path: Path) -> None:
    a = FakeEngine()
    job = a.containers.add("job")
    job.logs = lambda tail=3: b"step 900\ncheckpoint: step=900 path=/ckpt/job/step-900.pt\n"  # type: ignore[method-assign]
    state = tmp_path / "state.json"
    actuator(a, state_path=state, clock=Clock(2000.0)).apply(stop(), decision())
    assert a.calls["get"] == 1  # read once, checked on that read
    assert job.updates == [{"restart_policy": {"Name": "no"}}]  # before the stop
    assert job.stopped_with == [45]
    assert "job" in a.containers.by_name  # kept, with its checkpoint
    entry = json.loads(state.read_text())["markers"]["job"]
    assert entry["delivered"] is True and entry["delivered_event"] == "target"
    assert entry["exit_code"] == 0
    assert entry["checkpoint"] == "/srv/ckpt/job/step-900.pt (step 900)"


def test_a_job_killed_after_the_grace_is_an_error_that_says_so(tmp_path: Path) -> None:
    a = FakeEngine()
    a.containers.add("job", exit_on_stop=137)
    with pytest.raises(ActuationError, match=r"exited with code 137 instead of 0"):
        actuator(a, state_path=tmp_path / "s.json").apply(stop(), decision())


def test_a_job_that_is_not_running_is_not_stopped() -> None:
    a = FakeEngine()
    job = a.containers.add("job", status="exited")
    with pytest.raises(ActuationError, match="not running; nothing to stop"):
        actuator(a).apply(stop(), decision())
    assert job.stopped_with == []


def test_a_second_stop_of_a_delivered_job_does_nothing(tmp_path: Path) -> None:
    """A manager deciding from node reports may ask again before the agent reports the job
    gone: the job stays as the first stop left it, and that is no failed action."""
    a = FakeEngine()
    job = a.containers.add("job")
    act = actuator(a, state_path=tmp_path / "s.json", clock=Clock(2000.0))
    act.apply(stop(), decision())
    act.apply(stop(), decision())
    assert job.stopped_with == [45]
    assert job.updates == [{"restart_policy": {"Name": "no"}}]


def test_a_stop_of_a_container_gone_does_nothing() -> None:
    a = FakeEngine()
    actuator(a).apply(stop(), decision())  # no container "job": nothing to stop, no error


def test_an_exited_container_of_the_same_name_not_delivered_by_policyd_is_an_error(
        tmp_path: Path) -> None:
    """The delivery mark is for one container: a new container under the delivered one's name
    that is not running is not taken for the delivered job."""
    a = FakeEngine()
    a.containers.add("job")
    act = actuator(a, state_path=tmp_path / "s.json")
    act.apply(stop(), decision())
    a.containers.by_name.pop("job")
    again = a.containers.add("job", status="exited")
    with pytest.raises(ActuationError, match="not running; nothing to stop"):
        act.apply(stop(), decision())
    assert again.stopped_with == []


@pytest.mark.parametrize(("path", "binds", "host"), [
    ("/ckpt/a.pt", ["/srv/ckpt:/ckpt"], "/srv/ckpt/a.pt"),
    ("/ckpt/x/a.pt", ["/srv/ckpt:/ckpt:rw", "/data/x:/ckpt/x"], "/data/x/a.pt"),
    ("/tmp/a.pt", ["/srv/ckpt:/ckpt"], None),
])
def test_host_path(path: str, binds: list[str], host: str | None) -> None:
    assert host_path(path, binds) == host


def test_a_checkpoint_not_reported_names_the_mounts() -> None:
    assert checkpoint_of("", {"HostConfig": {"Binds": ["/srv/ckpt:/ckpt:rw"]}}) == (
        "not reported by the job; its mounts: /srv/ckpt:/ckpt")
