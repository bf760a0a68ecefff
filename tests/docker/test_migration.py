"""DockerActuator: Migrate, step by step, on fake engines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policyd.actuators.docker import ActuationError
from tests.docker.builders import Clock, actuator, decision, migrate
from tests.docker.fakes import FakeEngine


def engines(*, exits_on_sigterm: bool = True) -> tuple[FakeEngine, FakeEngine]:
    """Engines a and b, on a a job that exits on its SIGTERM (a trainer: checkpoint, exit)
    or, with `exits_on_sigterm=False`, one that goes on until `docker stop` ends it."""
    a, b = FakeEngine(), FakeEngine()
    job = a.containers.add("job", labels={"policyd.io/managed": "true", "app": "train"})
    job.exit_on_kill = exits_on_sigterm
    return a, b


def test_happy_path_in_order(tmp_path: Path) -> None:
    a, b = engines()
    state = tmp_path / "s.json"
    act = actuator(a, b, state_path=state, clock=Clock(5000.0))
    act.apply(migrate(rebalance=True, grace_seconds=45), decision("p"))
    # exited on its SIGTERM: no second signal (`docker stop`), which could land in the job's
    # interpreter shutdown after its checkpoint and kill it (exit 143)
    assert a.log == ["kill job SIGTERM", "remove job"]
    assert b.log == ["create job", "start job"]
    spec = b.containers.created[0]
    assert spec["image"] == "trainer:local" and spec["network_mode"] == "host"
    assert spec["volumes"] == ["/srv/ckpt:/ckpt"] and spec["command"] == ["python", "train.py"]
    assert spec["environment"] == ["A=1", "POLICYD_CONTAINER=job"]
    assert spec["labels"] == {"policyd.io/managed": "true", "app": "train",
                              "policyd.io/migrated": "true", "policyd.io/migrated-from": "a",
                              "policyd.io/last_action_at": "5000",
                              "policyd.io/converged_at": "1700000000",
                              "policyd.io/rebalanced": "true",
                              "policyd.io/move-id": spec["labels"]["policyd.io/move-id"]}
    assert len(spec["labels"]["policyd.io/move-id"]) == 32
    assert "cpu_shares" not in spec and "cpu_quota" not in spec
    assert "job" not in a.containers.by_name
    assert b.containers.by_name["job"].status == "running"
    assert json.loads(state.read_text())["migrations"] == {}


def test_default_grace_and_no_converged_at_or_rebalance() -> None:
    a, b = engines(exits_on_sigterm=False)
    clock = Clock()
    actuator(a, b, clock=clock).apply(migrate(converged_at=None), decision("other"))
    # the whole default grace waited for its exit, then `docker stop` with nothing left
    assert a.log[:2] == ["kill job SIGTERM", "stop job 0"]
    assert sum(clock.slept) == pytest.approx(60.0)
    labels = b.containers.created[0]["labels"]
    assert "policyd.io/converged_at" not in labels and "policyd.io/rebalanced" not in labels


def test_a_zero_grace_on_the_action_is_kept_not_replaced_by_the_default() -> None:
    a, b = engines(exits_on_sigterm=False)
    actuator(a, b).apply(migrate(grace_seconds=0), decision("p"))
    assert a.log[1] == "stop job 0"


def test_missing_image_is_copied_from_the_source_engine() -> None:
    a = FakeEngine(images=("sha256:img",))
    b = FakeEngine(images=())
    a.containers.add("job")
    actuator(a, b).apply(migrate(), decision())
    assert b.images.loaded == [b"tar:sha256:img"]
    assert b.containers.by_name["job"].status == "running"


def test_image_that_cannot_be_copied_fails_before_anything_stops() -> None:
    a, b = FakeEngine(), FakeEngine(images=())
    a.containers.add("job")
    b.refuse_load = True
    with pytest.raises(ActuationError, match=r"image trainer:local is not on node b and could "
                                             r"not be copied from node a: .*no space left"):
        actuator(a, b, retries=0).apply(migrate(), decision())
    assert a.containers.by_name["job"].status == "running" and a.log == []


def test_no_checkpoint_exit_code_rolls_back() -> None:
    a, b = engines(exits_on_sigterm=False)
    a.containers.by_name["job"].exit_on_stop = 137
    act = actuator(a, b)
    with pytest.raises(ActuationError, match=r"moving job from node a to node b: the old one "
                                             r"exited with code 137 instead of 0 after SIGTERM "
                                             r".*rolled back: it runs on node a again"):
        act.apply(migrate(), decision())
    assert a.log == ["kill job SIGTERM", "stop job 0", "start job"]
    assert b.log == ["create job", "remove job"]
    assert a.containers.by_name["job"].status == "running" and not b.containers.by_name
    assert act.state.migrations == {}


def test_replacement_that_crashes_rolls_back_with_its_log() -> None:
    a, b = engines()
    b.crash_new = True
    with pytest.raises(ActuationError, match=r"the replacement exited with code 1 "
                                             r"\(log: Traceback \| ImportError: no torch\); "
                                             r"rolled back: it runs on node a again"):
        actuator(a, b).apply(migrate(), decision())
    assert a.containers.by_name["job"].status == "running" and not b.containers.by_name


def test_replacement_that_never_runs_times_out() -> None:
    a, b = engines()
    b.stall_new = True  # started, but it stays "created"
    with pytest.raises(ActuationError, match="the replacement was not running within 2 s; "
                                             "rolled back"):
        actuator(a, b, start_timeout_seconds=2.0).apply(migrate(), decision())
    assert a.containers.by_name["job"].status == "running" and not b.containers.by_name


def test_named_volume_cannot_move() -> None:
    a, b = FakeEngine(), FakeEngine()
    a.containers.add("job", binds=["ckpt-vol:/ckpt"])
    with pytest.raises(ActuationError, match=r"uses named volumes \(ckpt-vol:/ckpt\), which are "
                                             "local to node a; mount a shared host path"):
        actuator(a, b).apply(migrate(), decision())
    assert a.log == [] and b.log == []


def test_a_stopped_source_is_not_migrated() -> None:
    a, b = FakeEngine(), FakeEngine()
    a.containers.add("job", status="exited")
    with pytest.raises(ActuationError, match="container job on node a is exited, not running"):
        actuator(a, b).apply(migrate(), decision())


def test_name_clash_on_the_target_is_refused() -> None:
    a, b = engines()
    b.containers.add("job", labels={"policyd.io/managed": "true"})
    with pytest.raises(ActuationError, match="node b already has a container named job that "
                                             "policyd did not create"):
        actuator(a, b).apply(migrate(), decision())
    assert a.containers.by_name["job"].status == "running"


def test_retry_after_success_is_a_no_op() -> None:
    a, b = engines()
    act = actuator(a, b)
    act.apply(migrate(), decision())
    log_a, log_b = list(a.log), list(b.log)
    act.apply(migrate(), decision())
    assert (a.log, b.log) == (log_a, log_b)


def test_leftover_failed_replacement_is_replaced() -> None:
    a, b = engines()
    b.containers.add("job", status="exited",
                     labels={"policyd.io/managed": "true", "policyd.io/migrated-from": "a"})
    actuator(a, b).apply(migrate(), decision())
    assert b.containers.by_name["job"].status == "running"
    assert "job" not in a.containers.by_name


def test_daemon_error_while_stopping_is_retried() -> None:
    from tests.docker.fakes import api_error  # noqa: PLC0415

    a, b = engines(exits_on_sigterm=False)
    a.fail["stop"] = [api_error(502)]
    clock = Clock()
    actuator(a, b, clock=clock).apply(migrate(), decision())
    assert a.log == ["kill job SIGTERM", "stop job 0", "remove job"] and 0.5 in clock.slept


def test_the_copy_keeps_the_original_submission_for_a_relative_deadline() -> None:
    a, b = engines()
    a.containers.by_name["job"].attrs["Created"] = "2026-11-22T01:59:30.5Z"
    actuator(a, b).apply(migrate(), decision("p"))
    assert b.containers.created[0]["labels"]["policyd.io/submitted-at"] == "1795312770.5"
    a, b = engines()
    a.containers.by_name["job"].labels["policyd.io/submitted-at"] = "1700000000"
    actuator(a, b).apply(migrate(), decision("p"))
    assert b.containers.created[0]["labels"]["policyd.io/submitted-at"] == "1700000000"


@pytest.mark.parametrize("policy", ["always", "unless-stopped", "on-failure"])
def test_a_job_the_engine_would_restart_gets_docker_stop_alone(policy: str) -> None:
    a, b = FakeEngine(), FakeEngine()
    a.containers.add("job", host={"RestartPolicy": {"Name": policy, "MaximumRetryCount": 0}})
    actuator(a, b).apply(migrate(), decision())
    assert a.log == ["stop job 60", "remove job"]
    assert b.containers.by_name["job"].status == "running"
