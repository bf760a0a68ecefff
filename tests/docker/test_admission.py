"""DockerActuator: Admit, on fake engines: a held (created, never started) container started
where it is held with its CPU limit first, or copied to the chosen node and started there
before the held one goes; failures leave the job held; a repeated action is harmless."""

from __future__ import annotations

import logging
from typing import Literal

import pytest
import requests

from policyd.actuators.docker import ActuationError
from policyd.actuators.docker.admission import created_at
from policyd.model import Admit
from tests.docker.builders import Clock, actuator, decision
from tests.docker.fakes import FakeEngine

CREATED = "2026-11-22T01:59:30.123456789Z"


def admit(node: str = "a", held_on: str | None = "a", fraction: float | None = 0.25,
          mode: Literal["shares", "quota"] = "quota") -> Admit:
    return Admit(policy="dl", container="job", node=node, held_on=held_on, fraction=fraction,
                 mode=mode, reason="earliest deadline first")


def held_on_a(labels: dict[str, str] | None = None) -> tuple[FakeEngine, FakeEngine]:
    a, b = FakeEngine(ncpu=4), FakeEngine(ncpu=8)
    c = a.containers.add("job", status="created", labels=labels)
    c.attrs["Created"] = CREATED
    return a, b


def test_held_here_gets_its_limit_then_starts() -> None:
    a, b = held_on_a()
    actuator(a, b).apply(admit(), decision("dl"))
    job = a.containers.by_name["job"]
    assert job.updates == [{"cpu_period": 100_000, "cpu_quota": 100_000}]  # 0.25 x 4 cores
    assert a.log == ["start job"] and job.status == "running"
    assert b.log == []


def test_held_here_without_a_limit_just_starts() -> None:
    a, b = held_on_a()
    actuator(a, b).apply(admit(fraction=None), decision("dl"))
    assert a.containers.by_name["job"].updates == []
    assert a.log == ["start job"]


def test_held_elsewhere_is_copied_started_then_the_held_one_removed() -> None:
    a, b = held_on_a(labels={"policyd.io/managed": "true", "policyd.io/deadline": "1h"})
    actuator(a, b, clock=Clock(5000.0)).apply(admit(node="b", fraction=0.5), decision("dl"))
    assert b.log == ["create job", "start job"]
    assert a.log == ["remove job"]
    spec = b.containers.created[0]
    assert spec["labels"] == {"policyd.io/managed": "true", "policyd.io/deadline": "1h",
                              "policyd.io/last_action_at": "5000",
                              "policyd.io/submitted-at": "1795312770.123",
                              "policyd.io/admitted-from": "a"}
    assert (spec["cpu_period"], spec["cpu_quota"]) == (100_000, 400_000)  # 0.5 x 8 cores
    assert spec["environment"] == ["A=1", "POLICYD_CONTAINER=job"]
    assert b.containers.by_name["job"].status == "running"


class OwnerStarts(Clock):
    """A clock whose sleep lets the owner's `docker run` start `job` on `engine` meanwhile."""

    def __init__(self, now: float, engine: FakeEngine | None) -> None:
        super().__init__(now)
        self.engine = engine

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        if self.engine is not None:
            self.engine.containers.by_name["job"].attrs["State"].update(Status="running",
                                                                        Running=True)


@pytest.mark.parametrize(("age", "slept"), [
    pytest.param(0.2, [0.8], id="created-0.2-s-ago-waits-0.8-s"),
    pytest.param(1.5, [], id="created-1.5-s-ago-no-wait"),
    pytest.param(-3.0, [], id="created-in-the-future-skewed-clock-no-wait"),
])
def test_a_held_container_is_copied_once_it_is_a_second_old(age: float,
                                                             slept: list[float]) -> None:
    a, b = held_on_a()
    created = created_at(a.containers.by_name["job"].attrs)
    assert created is not None
    clock = OwnerStarts(created + age, None)
    actuator(a, b, clock=clock).apply(admit(node="b"), decision("dl"))
    assert clock.slept[:len(slept)] == pytest.approx(slept)
    assert b.containers.by_name["job"].status == "running" and a.log == ["remove job"]


def test_a_docker_run_seen_between_its_create_and_start_is_not_copied(
        caplog: pytest.LogCaptureFixture) -> None:
    """Listed as held in the moment between a `docker run`'s create and its start: by the end
    of the wait its owner has started it, and it is left where it runs. Nothing to do, not a
    failed action (a PolicydActionFailed alert at every docker run would be noise)."""
    a, b = held_on_a()
    created = created_at(a.containers.by_name["job"].attrs)
    assert created is not None
    act = actuator(a, b, clock=OwnerStarts(created + 0.1, a))
    with caplog.at_level(logging.INFO):
        act.apply(admit(node="b"), decision("dl"))
    assert b.log == [] and b.containers.created == []
    assert a.containers.by_name["job"].status == "running" and "remove job" not in a.log
    assert "job" not in act.state.markers  # policyd did not start it
    assert "it was started on a within 1 s of its creation (a docker run, not a held job): " \
        "left where it runs" in caplog.text


def test_a_docker_run_started_before_the_admission_looks_is_left_where_it_runs(
        caplog: pytest.LogCaptureFixture) -> None:
    """On a loaded host the owner's start often comes before the Admit reads the container:
    running where it was created, it is left there, and nothing is copied or failed."""
    a, b = FakeEngine(), FakeEngine()
    a.containers.add("job", status="running", labels=MANAGED)
    act = actuator(a, b)
    with caplog.at_level(logging.INFO):
        act.apply(admit(node="b"), decision("dl"))
    assert b.log == [] and b.containers.created == [] and "remove job" not in a.log
    assert "job" not in act.state.markers
    assert "it was started on a by the admission (a docker run" in caplog.text


def test_a_docker_run_that_exited_within_the_wait_is_a_failed_admission() -> None:
    """Neither held nor running once it is a second old: not what the policy saw, said."""
    a, b = held_on_a()
    created = created_at(a.containers.by_name["job"].attrs)
    assert created is not None

    class OwnerRanIt(OwnerStarts):
        def sleep(self, seconds: float) -> None:
            super().sleep(seconds)
            a.containers.by_name["job"].attrs["State"].update(Status="exited", Running=False)

    with pytest.raises(ActuationError, match=r"container job on node a was exited within 1 s "
                                             r"of its creation, not held \(created\)"):
        actuator(a, b, clock=OwnerRanIt(created + 0.1, a)).apply(admit(node="b"),
                                                                 decision("dl"))
    assert b.containers.created == []


def test_a_copy_that_does_not_start_is_removed_and_the_job_stays_held() -> None:
    a, b = held_on_a()
    b.crash_new = True
    with pytest.raises(ActuationError, match=r"copy of held container job on node b exited "
                                             r"with code 1 .*the job stays held on node a"):
        actuator(a, b).apply(admit(node="b"), decision("dl"))
    assert "job" not in b.containers.by_name
    assert a.containers.by_name["job"].status == "created"


@pytest.mark.parametrize(("status", "words"), [("exited", r"is exited, not held \(created\)"),
                                               ("paused", r"is paused, not held \(created\)")])
def test_only_a_created_container_is_admitted(status: str, words: str) -> None:
    a, b = FakeEngine(), FakeEngine()
    a.containers.add("job", status=status)
    with pytest.raises(ActuationError, match=words):
        actuator(a, b).apply(admit(), decision("dl"))
    assert a.log == []


def test_an_unmanaged_container_is_left_alone() -> None:
    a, b = FakeEngine(), FakeEngine()
    a.containers.add("job", status="created", labels={"app": "x"})
    with pytest.raises(ActuationError, match=r"lacks the label policyd\.io/managed"):
        actuator(a, b).apply(admit(), decision("dl"))
    assert a.log == []


def test_a_repeated_admission_is_harmless_and_finishes_a_half_done_one() -> None:
    a, b = held_on_a()
    act = actuator(a, b)
    act.apply(admit(), decision("dl"))
    act.apply(admit(), decision("dl"))  # already running where it was held
    assert a.log == ["start job"]
    a2, b2 = held_on_a()
    b2.containers.add("job", status="running")  # a copy started, the held one not yet removed
    actuator(a2, b2).apply(admit(node="b"), decision("dl"))
    assert a2.log == ["remove job"] and b2.log == []


@pytest.mark.parametrize(("text", "seconds"), [
    (CREATED, 1_795_312_770.123456), ("2026-11-22T01:59:30Z", 1_795_312_770.0),
    ("", None), ("yesterday", None)])
def test_created_at(text: str, seconds: float | None) -> None:
    got = created_at({"Created": text})
    assert got == (pytest.approx(seconds) if seconds is not None else None)


@pytest.mark.parametrize("chosen", ["a", "b", "c"])
def test_a_copy_started_before_a_crash_is_never_started_twice(chosen: str) -> None:
    """policyd stopped between starting the copy on b and removing the held one on a: whatever
    node the next Admit chooses (a itself, b, or a third node), the held container is removed
    and nothing else is created or started."""
    a, b = held_on_a(labels={"policyd.io/managed": "true"})
    c = FakeEngine(ncpu=2)
    b.containers.add("job", status="running", labels={"policyd.io/managed": "true"})
    actuator(a, b, c).apply(admit(node=chosen), decision("dl"))
    assert a.log == ["remove job"] and b.log == [] and c.log == []
    assert "job" not in a.containers.by_name


def test_a_copy_on_an_engine_that_does_not_answer_does_not_block_admission() -> None:
    a, b = held_on_a(labels={"policyd.io/managed": "true"})
    c = FakeEngine(ncpu=2)
    c.fail["get"] = [requests.exceptions.ConnectionError("connection refused")] * 10
    actuator(a, b, c).apply(admit(node="b"), decision("dl"))
    assert b.log == ["create job", "start job"] and a.log == ["remove job"]


MANAGED = {"policyd.io/managed": "true"}


def test_start_up_removes_a_held_original_whose_copy_runs_elsewhere() -> None:
    """policyd stopped between starting the copy on b and removing the held one on a, and no
    Admit comes again (the sources no longer offer a held job whose name runs): the start-up
    recovery removes the held original, and touches nothing else."""
    a, b = held_on_a(labels=MANAGED)
    b.containers.add("job", status="running",
                     labels={**MANAGED, "policyd.io/admitted-from": "a"})
    a.containers.add("other", status="created", labels=MANAGED)  # a held job of its own
    actuator(a, b).recover()
    assert a.log == ["remove job"] and b.log == []
    assert "job" not in a.containers.by_name and "other" in a.containers.by_name


@pytest.mark.parametrize(("copy_labels", "held_status"), [
    (MANAGED, "created"),  # a running job of the same name, not an admission's copy
    ({**MANAGED, "policyd.io/admitted-from": "c"}, "created"),  # admitted from another node
    ({**MANAGED, "policyd.io/admitted-from": "a"}, "exited"),  # not held: not ours to remove
])
def test_start_up_leaves_what_is_not_an_admissions_leftover(
        copy_labels: dict[str, str], held_status: str) -> None:
    a, b = FakeEngine(), FakeEngine()
    a.containers.add("job", status=held_status, labels=MANAGED)
    b.containers.add("job", status="running", labels=copy_labels)
    actuator(a, b).recover()
    assert a.log == [] and b.log == []


def test_start_up_skips_an_engine_that_does_not_answer() -> None:
    a, b = held_on_a(labels=MANAGED)
    b.containers.add("job", status="running",
                     labels={**MANAGED, "policyd.io/admitted-from": "a"})
    a.fail["get"] = [requests.exceptions.ConnectionError("refused")] * 10
    actuator(a, b, retries=0).recover()  # the held node does not answer: looked at next time
    assert a.containers.by_name["job"].status == "created"
