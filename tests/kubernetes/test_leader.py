"""Lease leader election: two candidates on a fake Lease API, one fake clock."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest

from policyd.daemon.leader import LeaderElector, LeaderOnly, LeaseSettings
from tests.kubernetes.builders import FakeClock, answer, api_error, lease_api, raw, set_cpu
from tests.kubernetes.builders import decision as make_decision


class FakeLeases:
    """One Lease with resourceVersion checks (409 on a stale update), behind an autospec'd
    CoordinationV1Api shared by the candidates."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.api = lease_api()
        answer(self.api.read_namespaced_lease, self.read)
        answer(self.api.create_namespaced_lease, self.create)
        answer(self.api.replace_namespaced_lease, self.replace)

    def read(self, name: str, ns: str, **k: Any) -> Any:
        if self.lease is None:
            raise api_error(404)
        return raw(self.lease)

    def create(self, ns: str, body: dict[str, Any], **k: Any) -> Any:
        if self.lease is not None:
            raise api_error(409, "already exists")
        return self._store(body)

    def replace(self, name: str, ns: str, body: dict[str, Any], **k: Any) -> Any:
        assert self.lease is not None
        if body["metadata"].get("resourceVersion") != self.lease["metadata"]["resourceVersion"]:
            raise api_error(409, "the object has been modified")
        return self._store(body)

    def _store(self, body: dict[str, Any]) -> Any:
        self.version += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.version)
        return raw(self.lease)


def settings(identity: str) -> LeaseSettings:
    return LeaseSettings(identity=identity, lease_duration_seconds=15,
                         renew_deadline_seconds=10, retry_period_seconds=2)


def test_hand_over_after_the_lease_expires() -> None:
    leases, clock = FakeLeases(), FakeClock(0.0)
    a = LeaderElector(settings("a"), leases.api, clock=clock, wall=clock)
    b = LeaderElector(settings("b"), leases.api, clock=clock, wall=clock)
    acting = LeaderOnly(_Recorder(), a)
    assert a.step() and not b.step()
    for _ in range(5):  # a renews every retry period; b keeps waiting
        clock.now += 2
        assert a.step() and not b.step()
    acting.apply(set_cpu(0.5), make_decision(set_cpu(0.5)))
    assert len(acting.actuator.applied) == 1  # type: ignore[attr-defined]
    # a stops renewing (its API calls hang or it is partitioned)
    for _ in range(5):
        clock.now += 2
        assert not b.step()  # 10 s: the record has not changed for less than 15 s
    assert not a.leading()  # 10 s since a's last renewal: a stops acting before b can lead
    acting.apply(set_cpu(0.5), make_decision(set_cpu(0.5)))
    assert acting.skipped == 1 and not a.is_leader.is_set()
    clock.now += 6  # 16 s since b first saw a's last record
    assert b.step() and b.is_leader.is_set()
    assert leases.lease is not None and leases.lease["spec"]["holderIdentity"] == "b"
    assert leases.lease["spec"]["leaseTransitions"] == 1
    assert not a.step()  # a comes back: it sees b holding a fresh lease


def test_racing_candidates_get_one_conflict() -> None:
    leases, clock = FakeLeases(), FakeClock(0.0)
    a = LeaderElector(settings("a"), leases.api, clock=clock, wall=clock)
    a.step()
    stale = copy.deepcopy(leases.lease)
    clock.now += 20
    b = LeaderElector(settings("b"), leases.api, clock=clock, wall=clock)
    b._observed, b._observed_at = ("a", stale["spec"]["renewTime"], 0), -100.0  # type: ignore[index]
    a.step()  # a renews first: b's update carries a stale resourceVersion
    leases.api.read_namespaced_lease.side_effect = lambda *x, **k: raw(stale)
    assert not b.step()


def test_bad_timings_are_a_value_error_not_an_exit() -> None:
    with pytest.raises(ValueError, match="lease_duration_seconds > renew_deadline_seconds"):
        LeaseSettings(identity="a", lease_duration_seconds=5, renew_deadline_seconds=10)
    with pytest.raises(ValueError, match=r"1.2 x retry_period_seconds"):
        LeaseSettings(identity="a", renew_deadline_seconds=2, retry_period_seconds=2)


def test_run_on_a_thread_and_stop() -> None:
    leases = FakeLeases()
    elector = LeaderElector(LeaseSettings(identity="a", lease_duration_seconds=0.5,
                                          renew_deadline_seconds=0.3,
                                          retry_period_seconds=0.05), leases.api)
    stop = threading.Event()
    thread = threading.Thread(target=elector.run, args=(stop,))
    thread.start()
    assert elector.is_leader.wait(2)
    stop.set()
    thread.join(2)
    assert not elector.is_leader.is_set() and not elector.leading()
    assert leases.lease is not None and leases.lease["spec"]["holderIdentity"] == ""


def test_a_clean_stop_hands_the_lease_over_at_the_next_retry() -> None:
    leases, clock = FakeLeases(), FakeClock(0.0)
    a = LeaderElector(settings("a"), leases.api, clock=clock, wall=clock)
    b = LeaderElector(settings("b"), leases.api, clock=clock, wall=clock)
    assert a.step() and not b.step()
    clock.now += 2
    assert a.release() and not a.leading()
    assert leases.lease is not None and leases.lease["spec"]["holderIdentity"] == ""
    clock.now += 2  # b's next retry, 13 s before a's lease would have expired
    assert b.step() and leases.lease["spec"]["holderIdentity"] == "b"
    assert leases.lease["spec"]["leaseTransitions"] == 1
    assert not a.release()  # not leading any more: nothing to give up, b's lease untouched
    assert leases.lease["spec"]["holderIdentity"] == "b"


def test_release_never_clears_another_holder_and_survives_api_errors() -> None:
    leases, clock = FakeLeases(), FakeClock(0.0)
    a = LeaderElector(settings("a"), leases.api, clock=clock, wall=clock)
    assert a.step()
    assert leases.lease is not None
    leases.lease["spec"]["holderIdentity"] = "b"  # b took over while a was partitioned
    assert not a.release() and leases.lease["spec"]["holderIdentity"] == "b"
    assert a.step() is False
    c = LeaderElector(settings("c"), FakeLeases().api, clock=clock, wall=clock)
    assert c.step()
    c.api.replace_namespaced_lease.side_effect = api_error(500)
    assert not c.release() and not c.is_leader.is_set()  # logged; the Lease just expires


class _Recorder:
    def __init__(self) -> None:
        self.applied: list[Any] = []

    def apply(self, action: Any, decision: Any) -> None:
        self.applied.append(action)
