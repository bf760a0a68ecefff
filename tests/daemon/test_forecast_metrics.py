"""Each job's forecast on the daemon's /metrics (`policyd.daemon.forecast_metrics`): its
predicted finish, expected and the range's ends, from the latest decision of each policy; the
jobs without a forecast counted; a job's series gone with it, a policy's with the policy; and
from a real decision, the same figures `policyd.engine.decide` attached."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from policyd.daemon.metrics import DaemonMetrics
from policyd.daemon.scheduler import Daemon
from policyd.engine import decide
from policyd.model import Assessment, Decision, JobForecast
from policyd.sim import scenarios
from policyd.sim.world import World
from policyd.tick import FixedSource, Outcome
from tests.daemon.fakes import FakeActuator

NOW = 1_700_000_000.0


def forecast(remaining: float, low: float, high: float) -> JobForecast:
    return JobForecast(steps_done=100.0, total_steps=1000.0, remaining_steps=900.0,
                       remaining_seconds=remaining, finish_at=NOW + remaining,
                       low_seconds=low, high_seconds=high, steps_per_second=9.0,
                       basis="total steps")


def outcome(policy: str, *assessments: Assessment) -> Outcome:
    return Outcome(decision=Decision(policy=policy, kind="FlowCon", time=NOW, actions=(),
                                     assessments=assessments, next_interval=20.0))


def finish(registry: CollectorRegistry, policy: str, container: str,
           estimate: str) -> float | None:
    return registry.get_sample_value("policyd_job_finish_timestamp_seconds", {
        "policy": policy, "container": container, "node": "w1", "estimate": estimate})


def counted(registry: CollectorRegistry, policy: str, state: str) -> float | None:
    return registry.get_sample_value("policyd_job_forecasts", {"policy": policy,
                                                               "state": state})


def test_each_job_has_its_predicted_finish_and_the_range_from_the_latest_decision() -> None:
    registry = CollectorRegistry()
    metrics = DaemonMetrics(registry)
    a = Assessment(container="a", node="w1", category="NL", forecast=forecast(100, 80, 130))
    b = Assessment(container="b", node="w1", category="CL", forecast=forecast(40, 40, 45))
    new = Assessment(container="new", node="w1", category="NL",
                     forecast_note="too few samples: 1 (needs 2 to measure speed)")
    metrics.record_outcome("fc", outcome("fc", a, b, new), dry_run=False)
    assert [finish(registry, "fc", "a", e) for e in ("expected", "earliest", "latest")] == [
        NOW + 100, NOW + 80, NOW + 130]
    assert finish(registry, "fc", "b", "expected") == NOW + 40
    assert finish(registry, "fc", "new", "expected") is None
    assert counted(registry, "fc", "forecast") == 2 and counted(registry, "fc", "none") == 1
    # The next decision replaces the last: b is gone, a's forecast moved, new has one now.
    later = Assessment(container="new", node="w1", category="NL", forecast=forecast(300, 200,
                                                                                   500))
    a2 = Assessment(container="a", node="w1", category="NL", forecast=forecast(90, 70, 120))
    metrics.record_outcome("fc", outcome("fc", a2, later), dry_run=False)
    assert finish(registry, "fc", "b", "expected") is None
    assert finish(registry, "fc", "a", "latest") == NOW + 120
    assert finish(registry, "fc", "new", "earliest") == NOW + 200
    assert counted(registry, "fc", "forecast") == 2 and counted(registry, "fc", "none") == 0
    # Another policy's are its own; a removed policy leaves nothing.
    metrics.record_outcome("other", outcome("other", a), dry_run=False)
    metrics.forget_policy("fc")
    assert finish(registry, "fc", "a", "expected") is None
    assert counted(registry, "fc", "forecast") is None
    assert finish(registry, "other", "a", "expected") == NOW + 100


def test_a_daemon_publishes_what_its_decision_forecast() -> None:
    """A real tick on a simulated cluster halfway through its jobs: every job the decision
    forecast is on /metrics with that forecast's figures, and only those."""
    scenario = scenarios.build("flowcon-random-10")
    world = World(scenario, policies=scenario.policies)
    world.run_until(300.0)
    snap = world.snapshot(world.policies)
    (policy,) = world.policies
    expected = decide(policy, snap)
    forecasts = {a.container: a.forecast for a in expected.assessments
                 if a.forecast is not None}
    assert forecasts, "the scenario has forecast jobs at 300 s"
    registry = CollectorRegistry()
    daemon = Daemon([policy], source=FixedSource(snap), actuator=FakeActuator(),
                    metrics=DaemonMetrics(registry))
    (ticked,) = daemon.run_once()
    daemon.shutdown()
    assert ticked.result == "ok"
    text = generate_latest(registry).decode()
    published = {line.split('container="')[1].split('"')[0]
                 for line in text.splitlines()
                 if line.startswith("policyd_job_finish_timestamp_seconds{")
                 and 'estimate="expected"' in line}
    assert published == set(forecasts)
    for container, f in forecasts.items():
        node = next(a.node for a in expected.assessments if a.container == container)
        assert registry.get_sample_value("policyd_job_finish_timestamp_seconds", {
            "policy": policy.name, "container": container, "node": node,
            "estimate": "latest"}) == snap.time + f.high_seconds
    assert counted(registry, policy.name, "none") == len(expected.assessments) - len(forecasts)



def test_a_job_never_forecast_is_not_counted_as_one_without_a_forecast() -> None:
    # A manager's answer to a node report carries no forecast and no note: its agent
    # publishes the job's forecast, the manager does not count it as missing.
    registry = CollectorRegistry()
    answered = Assessment(container="w", node="w1", category=None,
                          note="moves to w2: predicted gain 40 s")
    DaemonMetrics(registry).record_outcome("p", outcome("p", answered), dry_run=False)
    assert counted(registry, "p", "none") == 0 and counted(registry, "p", "forecast") == 0
