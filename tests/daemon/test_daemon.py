"""The daemon with hand fakes at its seams: scheduling, back-off, the listener, failures,
dry-run, hot reload and an orderly stop. A 20 s policy runs every 0.2 s (`SCALE`)."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from policyd.daemon import Daemon, DaemonMetrics, Health, PolicyWatcher, stop_on_signals
from policyd.model import SetCpu
from policyd.policy import load_policies
from tests.daemon.fakes import (
    POLICY,
    SCALE,
    FakeActuator,
    FakeEvents,
    FakeSource,
    flowcon,
    one_to_limit,
    policy_yaml,
    wait_for,
    with_newcomer,
    write,
)

ROOT = Path(__file__).resolve().parents[2]


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    found = registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


def make(registry: CollectorRegistry, source: FakeSource, actuator: FakeActuator | None = None,
         *, policies: list | None = None, **options: object) -> Daemon:  # type: ignore[type-arg]
    return Daemon(policies if policies is not None else [flowcon()], source=source,
                  actuator=actuator or FakeActuator(), metrics=DaemonMetrics(registry),
                  interval_scale=SCALE, loop_seconds=0.05, **options)  # type: ignore[arg-type]


@pytest.fixture
def started(registry: CollectorRegistry) -> Iterator[list[Daemon]]:
    """Daemons started in a test are shut down after it, whatever happened."""
    daemons: list[Daemon] = []
    yield daemons
    for daemon in daemons:
        daemon.shutdown()


def test_ticks_back_off_and_reschedule(registry: CollectorRegistry,
                                       started: list[Daemon]) -> None:
    source = FakeSource()  # converged jobs: FlowCon doubles the interval every tick
    daemon = make(registry, source)
    started.append(daemon)
    daemon.start()
    wait_for(lambda: daemon.interval_seconds(POLICY) >= 80, what="back-off to 80 s")
    # The snapshot carried each current interval; the job runs at the one decided last.
    assert source.intervals()[:2] == [20.0, 40.0]
    interval, wall = daemon.schedule(POLICY)
    assert interval >= 80 and wall == pytest.approx(interval * SCALE)
    assert value(registry, "policyd_ticks_total", policy=POLICY, result="ok") >= 2
    assert value(registry, "policyd_interval_seconds", policy=POLICY) >= 80


def test_event_ticks_now_and_resets_the_interval(registry: CollectorRegistry,
                                                 started: list[Daemon]) -> None:
    source = FakeSource()
    events = FakeEvents()
    daemon = make(registry, source, events=events)
    started.append(daemon)
    daemon.start()
    events.watching.wait(2)
    wait_for(lambda: daemon.interval_seconds(POLICY) >= 160, what="back-off to 160 s")
    ticks = len(source.intervals())
    source.containers = with_newcomer  # what the next snapshot shows: a new container
    events.emit("started", "c")
    # The tick runs at once (the backed-off job would wait 1.6 s), from the base interval.
    wait_for(lambda: len(source.intervals()) > ticks, timeout=1.0, what="the immediate tick")
    assert source.intervals()[ticks] == 20.0
    wait_for(lambda: daemon.scheduled_seconds(POLICY) == pytest.approx(20 * SCALE),
             timeout=1.0, what="the job back at its base interval")
    assert daemon.interval_seconds(POLICY) == 20.0


def test_source_error_is_counted_then_recovers(registry: CollectorRegistry,
                                               started: list[Daemon]) -> None:
    source = FakeSource(one_to_limit, fail=2)
    actuator = FakeActuator()
    health = Health()
    daemon = make(registry, source, actuator, health=health)
    started.append(daemon)
    assert health.ready() == (False, "no snapshot has succeeded yet")
    daemon.start()
    wait_for(lambda: value(registry, "policyd_ticks_total", policy=POLICY, result="ok") >= 1,
             what="a successful tick after the errors")
    assert value(registry, "policyd_source_errors_total", policy=POLICY, kind="connection") == 2
    assert value(registry, "policyd_ticks_total", policy=POLICY, result="source_error") == 2
    assert source.intervals()[:3] == [20.0, 20.0, 20.0]  # retried on the same schedule
    assert actuator.applied  # acted only once a snapshot was read
    assert health.ready()[0]


def test_failing_action_is_counted_as_failed(registry: CollectorRegistry) -> None:
    daemon = make(registry, FakeSource(one_to_limit), FakeActuator(error="engine said no"))
    (report,) = daemon.run_once()
    assert report.result == "ok" and report.outcome is not None
    (failed, reason), = report.outcome.failed
    assert isinstance(failed, SetCpu) and reason == "RuntimeError: engine said no"
    labels = {"policy": POLICY, "kind": "set_cpu", "dry_run": "false"}
    assert value(registry, "policyd_actions_total", result="failed", **labels) == 1
    assert value(registry, "policyd_actions_total", result="applied", **labels) == 0
    assert value(registry, "policyd_job_category", policy=POLICY, container="a", node="w1",
                 category="CL") == 1


@pytest.mark.parametrize(("error", "dry_run", "expected"), [
    (None, False, ["policy fc: set_cpu of job a on node w1 to 0.25 (shares): "]),
    ("engine said no", False, []),  # the failure's own error line says it
    (None, True, []),  # the dry-run actuator logs what it would do
], ids=["applied", "failed", "dry run"])
def test_each_applied_action_is_logged_with_its_reason(
        registry: CollectorRegistry, caplog: pytest.LogCaptureFixture, error: str | None,
        dry_run: bool, expected: list[str]) -> None:
    daemon = make(registry, FakeSource(one_to_limit), FakeActuator(error=error),
                  policies=[flowcon(dry_run=dry_run)])
    with caplog.at_level("INFO", logger="policyd.daemon.scheduler"):
        (report,) = daemon.run_once()
    assert report.outcome is not None
    (action,) = report.outcome.decision.actions
    found = [r.getMessage() for r in caplog.records if ": set_cpu of job" in r.getMessage()]
    assert found == [line + action.reason for line in expected]


def test_a_large_decision_logs_its_actions_at_debug_level(
        registry: CollectorRegistry, caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("policyd.daemon.scheduler.ACTIONS_LOGGED_EACH", 0)
    daemon = make(registry, FakeSource(one_to_limit), FakeActuator())
    with caplog.at_level("DEBUG", logger="policyd.daemon.scheduler"):
        daemon.run_once()
    (record,) = [r for r in caplog.records if ": set_cpu of job" in r.getMessage()]
    assert record.levelname == "DEBUG"


def test_pending_moves_are_settled_before_every_snapshot(registry: CollectorRegistry) -> None:
    order: list[str] = []
    source = FakeSource(one_to_limit)
    real_snapshot = source.snapshot

    def snapshot(*args: object, **kwargs: object) -> object:
        order.append("snapshot")
        return real_snapshot(*args, **kwargs)  # type: ignore[arg-type]

    source.snapshot = snapshot  # type: ignore[method-assign,assignment]

    def settle() -> None:
        order.append("settle")
        if len(order) == 1:
            raise RuntimeError("node e2: connection refused")  # an engine still down

    daemon = make(registry, source, settle=settle)
    assert [r.result for r in daemon.run_once()] == ["ok"]
    assert [r.result for r in daemon.run_once()] == ["ok"]
    assert order == ["settle", "snapshot", "settle", "snapshot"]


def test_dry_run_policies_use_the_dry_run_actuator(registry: CollectorRegistry) -> None:
    actuator = FakeActuator()
    daemon = make(registry, FakeSource(one_to_limit), actuator,
                  policies=[flowcon(dry_run=True)])
    (report,) = daemon.run_once()
    assert report.result == "ok"
    assert actuator.applied == []
    assert [a.container for a in daemon.dry_run_actuator.applied] == ["a"]
    assert value(registry, "policyd_actions_total", policy=POLICY, kind="set_cpu",
                 result="applied", dry_run="true") == 1


def test_a_container_two_policies_select_is_acted_on_by_its_owner_only(
        registry: CollectorRegistry) -> None:
    # Two live FlowCon policies select the same jobs: "boss" (priority 10) owns their CPU, so
    # only its SetCpu is applied and "fc" says who owns the container it leaves alone.
    actuator = FakeActuator()
    daemon = make(registry, FakeSource(one_to_limit), actuator,
                  policies=[flowcon(), flowcon(name="boss", priority=10)])
    reports = {r.policy: r for r in daemon.run_once()}
    assert [(a.policy, a.container) for a in actuator.applied] == [("boss", "a")]
    yielded = reports[POLICY].outcome
    assert yielded is not None and yielded.decision.actions == ()
    notes = {a.container: a.note for a in yielded.decision.assessments}
    assert notes["a"].startswith("cpu owned by policy boss (priority 10 vs 0)")
    daemon.shutdown()


def test_hot_reload_adds_a_policy_and_keeps_the_last_good_set(
        tmp_path: Path, registry: CollectorRegistry) -> None:
    path = tmp_path / "policies.yaml"
    write(path, policy_yaml())
    watcher = PolicyWatcher([path])
    first = watcher.load()
    assert first.ok
    health = Health()
    daemon = make(registry, FakeSource(), policies=list(first.policies), watcher=watcher,
                  health=health, reload_seconds=0.05)
    stop = threading.Event()
    thread = threading.Thread(target=daemon.run, args=(stop,))
    thread.start()
    try:
        write(path, policy_yaml() + "---\n" + policy_yaml("fc-two", interval=30))
        wait_for(lambda: daemon.scheduler.get_job("fc-two") is not None, what="the new job")
        assert [p.name for p in daemon.policies] == [POLICY, "fc-two"]
        wait_for(lambda: value(registry, "policyd_ticks_total", policy="fc-two",
                               result="ok") >= 1, what="a tick of the new policy")

        write(path, policy_yaml() + "---\nkind: FlowCom\n")
        wait_for(lambda: value(registry, "policyd_policy_reload_errors_total") == 1,
                 what="the rejected reload")
        assert [p.name for p in daemon.policies] == [POLICY, "fc-two"]  # last good set
        ready, text = health.ready()
        assert ready and "policy reload: rejected (" in text

        write(path, policy_yaml())  # fixed again, and fc-two removed
        wait_for(lambda: daemon.scheduler.get_job("fc-two") is None, what="the removal")
        assert "policy reload" not in health.ready()[1]
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()


def test_sigterm_lets_the_running_tick_finish(registry: CollectorRegistry) -> None:
    actuator = FakeActuator(block_seconds=0.4)
    events = FakeEvents()
    daemon = make(registry, FakeSource(one_to_limit), actuator, events=events)
    stop = threading.Event()
    with stop_on_signals(stop):
        thread = threading.Thread(target=daemon.run, args=(stop,))
        thread.start()
        assert actuator.entered.wait(3)
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.wait(2)
        thread.join(5)
    assert not thread.is_alive()
    assert actuator.done.is_set()  # the action in flight completed: no half tick
    assert [a.container for a in actuator.applied] == ["a"]
    assert value(registry, "policyd_ticks_total", policy=POLICY, result="ok") == 1
    assert events.stopped.is_set()
    assert not daemon.scheduler.running


def test_a_policy_removed_during_its_tick_leaves_no_series(registry: CollectorRegistry) -> None:
    """The tick in flight finishes, but the removed policy's interval and category series are
    not written back after the removal (a reload during a slow tick did that)."""
    actuator = FakeActuator(block_seconds=0.3)
    daemon = make(registry, FakeSource(one_to_limit), actuator)
    ticking = threading.Thread(target=daemon.tick_policy, args=(POLICY,))
    ticking.start()
    assert actuator.entered.wait(3)
    daemon.replace_policies([flowcon(name="fc-other")])
    ticking.join(5)
    assert not ticking.is_alive()
    assert registry.get_sample_value("policyd_interval_seconds", {"policy": POLICY}) is None
    assert value(registry, "policyd_ticks_total", policy=POLICY, result="ok") == 1
    assert [p.name for p in daemon.policies] == ["fc-other"]
    daemon.shutdown()


@pytest.mark.parametrize(("sees", "warned"), [(False, True), (True, False)])
def test_a_policy_that_admits_is_warned_of_a_source_blind_to_held_jobs(
        registry: CollectorRegistry, caplog: pytest.LogCaptureFixture, sees: bool,
        warned: bool) -> None:
    policies = [*load_policies(ROOT / "policies" / "deadline.yaml"), flowcon()]
    with caplog.at_level("WARNING", logger="policyd.daemon.scheduler"):
        daemon = make(registry, FakeSource(), policies=policies, sees_held_jobs=sees)
        daemon.replace_policies(policies)  # and again on every reload
    found = [r.getMessage() for r in caplog.records if "admits held jobs" in r.getMessage()]
    deadline = [p.name for p in policies if p.kind == "Deadline"]
    assert found == ([f"policy {deadline[0]} (Deadline) admits held jobs, but this source "
                      "cannot list them (created, never started containers): they stay held. "
                      "On Docker, prometheus.profile docker-stats lists them"] * 2
                     if warned else [])
