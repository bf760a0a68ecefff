"""Node agents that decide a policy which may stop jobs (`on_converged: stop` on a QoE policy,
a kind of scope node) and report the jobs to stop; the manager stops them from what its source
reads back (`node_reports: true`, `policyd.engine.reported_stops`)."""

from __future__ import annotations

import io
import json
import threading
import time
from dataclasses import replace
from functools import cache
from pathlib import Path

import yaml
from prometheus_client import CollectorRegistry

from policyd.cli import main
from policyd.daemon.metrics import DaemonMetrics
from policyd.daemon.roles import NodeScopedSource, manager_reads, node_agent_policies
from policyd.daemon.scheduler import Daemon
from policyd.engine import decide, report
from policyd.engine.spec import PolicyDocument
from policyd.model import SetCpu, Snapshot, Stop
from policyd.sim import scenarios
from policyd.sim.world import World
from policyd.sources.node_reports import NodeReportSource, ReportedSource
from policyd.tick import FixedSource, observe
from tests.daemon.fakes import FakeActuator
from tests.daemon.test_node_reports import Answering, samples, vector
from tests.engine.test_reported_stops import scenario_policy, stopping
from tests.sources.cadvisor_server import Stub, serving

SCENARIO = "qoe-random-32-4w"


@cache
def policy() -> PolicyDocument:
    return stopping(SCENARIO)


@cache
def with_stops() -> Snapshot:
    """The first snapshot of the scenario (every 15 s) whose decision stops a job."""
    p = policy()
    world = World(replace(scenarios.build(SCENARIO), policies=(p,)), policies=(p,))
    for seconds in range(60, 3000, 15):
        world.run_until(seconds)
        snap = observe(world, p)
        if any(isinstance(a, Stop) for a in decide(p, snap).actions):
            return snap
    raise AssertionError("no stop in the run")


def stopping_node(snap: Snapshot) -> str:
    return next(a.node for a in decide(policy(), snap).actions if isinstance(a, Stop))


def test_a_node_agent_sets_its_nodes_cpu_and_publishes_the_jobs_to_stop() -> None:
    snap, p = with_stops(), policy()
    node = stopping_node(snap)
    registry, actuator = CollectorRegistry(), FakeActuator()
    agent = Daemon([p], source=NodeScopedSource(FixedSource(snap), node), actuator=actuator,
                   metrics=DaemonMetrics(registry), scope="node", node_reports=True)
    (ticked,) = agent.run_once()
    agent.shutdown()
    assert ticked.result == "ok"
    whole = decide(p, snap)
    # its node's part: what one snapshot does there, but the stops (the manager's)
    assert [a for a in actuator.applied] == [
        a for a in whole.actions if a.node == node and not isinstance(a, Stop)]
    assert all(isinstance(a, SetCpu) for a in actuator.applied)
    found = samples(registry)
    stops = {(k[1][0][1], k[1][1][1]): v for k, v in found.items()
             if k[0] == "policyd_node_report_stop_request"}
    expected = [a for a in whole.actions if isinstance(a, Stop) and a.node == node]
    assert sorted(stops) == sorted((a.container, a.event) for a in expected)
    assert all(v >= 0 for v in stops.values())


def test_the_manager_stops_from_the_reports_what_one_snapshot_stops() -> None:
    snap, p = with_stops(), policy()
    _, reports = report(p, snap)
    registry = CollectorRegistry()
    DaemonMetrics(registry).node_reports.publish(p.name, reports)
    source = ReportedSource(FixedSource(snap), NodeReportSource(
        "http://prom", client=Answering(vector(registry)), clock=lambda: snap.time))
    manager = source.snapshot([p])
    assert source.reports.last_warnings == ()
    assert manager.containers == () and manager.node_reports == reports
    found = decide(p, manager)
    whole = decide(p, snap)
    assert [(a.container, a.node, a.event, a.grace_seconds) for a in found.actions] == sorted(
        (a.container, a.node, a.event, a.grace_seconds) for a in whole.actions
        if isinstance(a, Stop))
    assert all("reported by the node agent of" in a.reason for a in found.actions)


def test_which_process_runs_a_policy_that_may_stop_jobs() -> None:
    p = policy()
    assert node_agent_policies([p], node_reports=True) == [p]
    assert node_agent_policies([p]) == []  # without reports: the manager's, every container
    notify = p.model_copy(update={"spec": p.spec.model_copy(update={
        "on_converged": "notify", "on_target": "notify"})})
    assert node_agent_policies([notify]) == [notify]  # a node policy: the agents' alone


def test_policyd_plan_node_reports_shows_the_managers_decision(tmp_path: Path) -> None:
    """`policyd plan --prometheus URL --node-reports`: the decision a manager with
    `node_reports: true` makes now, from the reports Prometheus holds (a stand-in answering the
    one instant query with what two agents publish), in text and JSON."""
    snap, p = with_stops(), policy()
    now = float(int(time.time()))
    _, reports = report(p, snap)
    registry = CollectorRegistry()
    DaemonMetrics(registry).node_reports.publish(p.name, tuple(replace(r, time=now)
                                                               for r in reports))
    answer = vector(registry)
    for sample in answer:
        sample["value"][0] = now
    path = tmp_path / "qoe-stop.yaml"
    path.write_text(yaml.safe_dump(p.model_dump(mode="json", by_alias=True)))
    expected = sorted((a.container, a.event) for a in decide(p, snap).actions
                      if isinstance(a, Stop))
    stub = Stub(instant={"status": "success", "data": {"resultType": "vector",
                                                          "result": answer}})
    with serving(stub) as url:
        out, err = io.StringIO(), io.StringIO()
        code = main(["plan", "--policy", str(path), "--prometheus", url, "--node-reports",
                     "--output", "json"], out=out, err=err)
        assert code == 0, err.getvalue()
        decision = json.loads(out.getvalue())  # one policy: its decision
        assert sorted((a["container"], a["event"]) for a in decision["actions"]) == expected
        text = io.StringIO()
        assert main(["plan", "--policy", str(path), "--prometheus", url, "--node-reports"],
                    out=text, err=io.StringIO()) == 0
        assert "reported by the node agent of" in text.getvalue()
        assert f"{reports[0].selected} jobs in its node agent's report" in text.getvalue()
    # one instant query a plan (the reports'), no range query: no container is read
    assert [where for _, where, _ in stub.requests] == ["/api/v1/query"] * 2


def test_policyd_plan_node_reports_refuses_a_policy_not_decided_from_them(
        tmp_path: Path) -> None:
    notify = policy().model_copy(update={"spec": policy().spec.model_copy(update={
        "on_converged": "notify", "on_target": "notify"})})
    path = tmp_path / "qoe.yaml"
    path.write_text(yaml.safe_dump(notify.model_dump(mode="json", by_alias=True)))
    out, err = io.StringIO(), io.StringIO()
    code = main(["plan", "--policy", str(path), "--prometheus", "http://127.0.0.1:9",
                 "--node-reports"], out=out, err=err)
    assert code != 0
    assert f"policy {notify.name} (QoE) is not decided from node reports" in err.getvalue()


def test_a_manager_says_which_policies_it_decides_from_reports_and_which_read_everything(
) -> None:
    split, specon = policy(), stopping("specon-random-20")
    (flowcon2,) = scenarios.build("flowcon2-4w-20").policies
    notify = scenario_policy(SCENARIO)  # scope node: the agents' alone, not the manager's
    lines = manager_reads([split, specon, flowcon2, notify])
    assert lines == [
        f"policy {split.name} (QoE): decided from its node agents' reports",
        f"policy {specon.name} (SpeCon): reads every container: it may stop jobs, and its "
        "node agents decide nothing that could report them",
        f"policy {flowcon2.name} (FlowCon2): decided from its node agents' reports"]


def test_policyd_run_a_flowcon_policy_that_stops_jobs_runs_on_its_agents_with_node_reports(
        tmp_path: Path) -> None:
    """`policyd run --node w1` with a FlowCon policy that stops converged jobs: without
    `node_reports` the agent leaves it to the manager (it would start nothing); with them the
    agent sets its node's CPU and publishes its report, and the manager sends the policy's tick
    to the node reports in Prometheus (here a closed port: that tick's source error)."""
    from policyd.daemon.app import StartupError, run  # noqa: PLC0415
    from policyd.daemon.backend import Parts  # noqa: PLC0415
    from tests.daemon.fakes import FakeSource, policy_yaml  # noqa: PLC0415
    from tests.daemon.test_kubernetes import k8s_settings, two_nodes  # noqa: PLC0415

    path = tmp_path / "stop.yaml"
    path.write_text(policy_yaml("fc-stop") + "  on_converged: stop\n")
    settings = k8s_settings(tmp_path, path)

    def parts() -> Parts:
        return Parts(source=FakeSource(two_nodes), actuator=actuator, events=None)

    actuator = FakeActuator()
    try:
        run(settings, out=io.StringIO(), stop=threading.Event(), once=True, node="w1",
            parts=parts())
    except StartupError as exc:
        assert "no policy of a node-scoped kind" in str(exc)
    else:
        raise AssertionError("a node agent started without a policy it runs")
    split = settings.model_copy(update={"node_reports": True})
    registry, out = CollectorRegistry(), io.StringIO()
    code = run(split, out=out, stop=threading.Event(), once=True, node="w1",
               registry=registry, parts=parts())
    assert code == 0, out.getvalue()
    assert actuator.applied and all(isinstance(a, SetCpu) and a.node == "w1"
                                    for a in actuator.applied)
    assert ("policyd_node_report_time_seconds", (("node", "w1"), ("policy", "fc-stop"))) \
        in samples(registry)
    out = io.StringIO()
    code = run(split, out=out, stop=threading.Event(), once=True, parts=parts())
    (line,) = out.getvalue().splitlines()
    assert code == 1 and "source_error" in line and "policyd_node_report_" in line, line


def test_the_manager_reads_the_report_of_an_agent_that_backed_off() -> None:
    """FlowCon doubles its interval while every job of a node has converged (up to
    `max_interval_seconds`), on a node agent as anywhere: a healthy agent then reports every
    40, 80, ... s, while the manager decides the policy at its base interval. Its report is
    not stale until two of the agent's intervals have passed: the manager must not leave it
    out, and the stops in it, as from an agent that stopped."""
    p = stopping("flowcon-random-10")
    base = p.spec.interval_seconds  # type: ignore[attr-defined]
    world = World(replace(scenarios.build("flowcon-random-10"), policies=(p,)), policies=(p,))
    for seconds in range(600, 3000, 10):
        world.run_until(seconds)
        snap = observe(world, p)
        local, reports = report(p, snap)
        assert local is not None
        if local.next_interval >= 4 * base:
            break
    else:
        raise AssertionError("the agent never backed off")
    registry = CollectorRegistry()
    DaemonMetrics(registry).node_reports.publish(p.name, reports)
    # the manager's cycle just before the agent's next tick, at its own (base) interval
    at = snap.time + local.next_interval - 1
    source = NodeReportSource("http://prom", client=Answering(vector(registry)),
                              clock=lambda: at)
    manager = source.snapshot([p], intervals={p.name: base})
    assert source.last_warnings == ()
    assert manager.node_reports == reports


def test_a_policy_updated_so_that_it_stops_no_job_takes_its_stop_requests_off_metrics(
) -> None:
    """A policy that stopped jobs, reloaded with `notify`: its node agent decides it alone now
    and reports nothing; the stop requests it published before must go with its report, or the
    agent would publish them for good (and PolicydStopsUnanswered fire for jobs nothing is
    asked to stop any more)."""
    snap, p = with_stops(), policy()
    node = stopping_node(snap)
    registry = CollectorRegistry()
    agent = Daemon([p], source=NodeScopedSource(FixedSource(snap), node),
                   actuator=FakeActuator(), metrics=DaemonMetrics(registry), scope="node",
                   node_reports=True)

    def stop_requests() -> list[object]:
        return [k for k in samples(registry) if k[0] == "policyd_node_report_stop_request"]

    agent.run_once()
    assert stop_requests()
    notify = p.model_copy(update={"spec": p.spec.model_copy(update={
        "on_converged": "notify", "on_target": "notify"})})
    agent.replace_policies([notify])
    (ticked,) = agent.run_once()
    agent.shutdown()
    assert ticked.result == "ok"
    assert stop_requests() == []
    assert not any(k[0].startswith("policyd_node_report_") for k in samples(registry))


def test_policyd_plan_node_reports_is_refused_with_a_snapshot_file(tmp_path: Path) -> None:
    """`--node-reports` reads the reports from Prometheus: with `--snapshot FILE` it would be
    ignored in silence (a policy not decided from reports planned as if it were), so it is
    refused, as `--save-snapshot` is."""
    from policyd.model.codec import snapshot_to_dict  # noqa: PLC0415

    snap, p = with_stops(), policy()
    path = tmp_path / "qoe-stop.yaml"
    path.write_text(yaml.safe_dump(p.model_dump(mode="json", by_alias=True)))
    saved = tmp_path / "snap.json"
    saved.write_text(json.dumps(snapshot_to_dict(snap)))
    out, err = io.StringIO(), io.StringIO()
    code = main(["plan", "--policy", str(path), "--snapshot", str(saved), "--node-reports"],
                out=out, err=err)
    assert code != 0
    assert "--node-reports goes with --prometheus" in err.getvalue()
