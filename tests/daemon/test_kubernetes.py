"""The kubernetes backend in the daemon: the node agent's scope (`--node`), the manager's leader
gating (`--leader-elect`), the checks of both flags, and the backend's assembly. Fakes only:
the hand fakes of `tests.daemon.fakes` and the Lease API of `tests.kubernetes.test_leader`."""

from __future__ import annotations

import io
import math
import threading
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from policyd.cli import main
from policyd.daemon import (
    DaemonSettings,
    DockerHost,
    DockerSection,
    PrometheusSettings,
    StartupError,
    run,
)
from policyd.daemon.backend import Parts, kubernetes_parts, kubernetes_settings
from policyd.daemon.leader import LeaderElector
from policyd.daemon.metrics import DaemonMetrics
from policyd.daemon.reload import PolicyWatcher
from policyd.daemon.roles import (
    Election,
    NodeScopedEvents,
    NodeScopedSource,
    lease_settings,
    scope_to_node,
)
from policyd.daemon.scheduler import Daemon
from policyd.daemon.settings import HttpSettings, KubernetesSection
from policyd.model import Container
from policyd.model.events import ContainerEvent
from tests.daemon.fakes import (
    NOW,
    FakeActuator,
    FakeSource,
    one_to_limit,
    policy_yaml,
    wait_for,
    write,
)
from tests.engine.flowcon_builders import flowcon, job, losses, snapshot
from tests.kubernetes.builders import FakeClock, api_error
from tests.kubernetes.test_leader import FakeLeases

ROOT = Path(__file__).resolve().parents[2]
SPECON = ROOT / "deploy" / "kubernetes" / "policies" / "specon.yaml"


def two_nodes(interval: float) -> tuple[Container, ...]:
    """On w1 and on w2 alike: one job goes WL -> CL (a SetCpu), one keeps learning."""
    return (job("w1-a", losses(0.2, 0.01, 0.01), node="w1"),
            job("w1-b", losses(0.3, 0.3, 0.3), node="w1"),
            job("w2-a", losses(0.2, 0.01, 0.01), node="w2"),
            job("w2-b", losses(0.3, 0.3, 0.3), node="w2"))


def k8s_settings(tmp_path: Path, *files: Path, **section: Any) -> DaemonSettings:
    """The kubernetes backend on `files` (default: p.yaml, a FlowCon policy `fc`)."""
    if not (tmp_path / "p.yaml").exists():
        (tmp_path / "p.yaml").write_text(policy_yaml())
    files = files or (tmp_path / "p.yaml",)
    return DaemonSettings(policies=files, backend="kubernetes",
                          prometheus=PrometheusSettings(url="http://127.0.0.1:9",
                                                        profile="kubernetes"),
                          kubernetes=KubernetesSection(**section),
                          http=HttpSettings(enabled=False))


# --- --node: the node agent -------------------------------------------------------------------

def test_scope_to_node_keeps_that_node_and_its_containers() -> None:
    whole = snapshot(*two_nodes(20.0), nodes=["w3"])
    mine = scope_to_node(whole, "w1")
    assert [n.name for n in mine.nodes] == ["w1"]
    assert [c.id for c in mine.containers] == ["w1-a", "w1-b"]
    assert mine.time == whole.time
    assert scope_to_node(whole, "nowhere").containers == ()


def test_node_scoped_source_passes_the_intervals_on() -> None:
    inner = FakeSource(two_nodes)
    got = NodeScopedSource(inner, "w2").snapshot([flowcon()], intervals={"fc": 40.0})
    assert [c.id for c in got.containers] == ["w2-a", "w2-b"]
    assert inner.intervals() == [40.0] and got.intervals == {"fc": 40.0}


def test_node_scoped_events_pass_only_that_nodes_events() -> None:
    class Events:
        def watch(self, on_event: Any, stop: threading.Event) -> None:
            for node in ("w1", "w2", "w1"):
                on_event(ContainerEvent(kind="started", container=f"{node}-x", node=node,
                                        time=NOW))

    seen: list[str] = []
    NodeScopedEvents(Events(), "w1").watch(lambda e: seen.append(e.node), threading.Event())
    assert seen == ["w1", "w1"]


def test_node_agent_decides_and_acts_for_its_node_only(tmp_path: Path) -> None:
    settings = k8s_settings(tmp_path, tmp_path / "p.yaml", SPECON)
    out, actuator = io.StringIO(), FakeActuator()
    code = run(settings, out=out, stop=threading.Event(), once=True, node="w1",
               parts=Parts(source=FakeSource(two_nodes), actuator=actuator, events=None))
    assert code == 0
    # The SpeCon policy is left out (a node agent runs FlowCon only); w2's job is not w1's.
    assert out.getvalue().splitlines() == [
        "policy fc: ok, 1 actions (0 failed), next interval 20 s"]
    assert [a.container for a in actuator.applied] == ["w1-a"]
    # Without --node the same snapshot yields both nodes' actions.
    whole = FakeActuator()
    run(k8s_settings(tmp_path), out=io.StringIO(),
        stop=threading.Event(), once=True,
        parts=Parts(source=FakeSource(two_nodes), actuator=whole, events=None))
    assert sorted(a.container for a in whole.applied) == ["w1-a", "w2-a"]


def test_node_agent_without_flowcon_starts_nothing(tmp_path: Path) -> None:
    """Without policy resources (or no API for them) the files are all there is."""
    with pytest.raises(StartupError) as caught:
        run(k8s_settings(tmp_path, SPECON, policy_resources=False), out=io.StringIO(),
            stop=threading.Event(), once=True, node="w1",
            parts=Parts(source=FakeSource(), actuator=FakeActuator(), events=None))
    assert caught.value.lines == [
        "--node w1: no policy of a node-scoped kind (FlowCon) in policies: a node agent runs "
        "those only"]


def test_node_agent_reload_keeps_node_scoped_kinds_only(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    write(path, policy_yaml())
    daemon = Daemon([flowcon()], source=FakeSource(one_to_limit), actuator=FakeActuator(),
                    metrics=DaemonMetrics(CollectorRegistry()), scope="node",
                    watcher=PolicyWatcher([path]))
    write(path, policy_yaml() + "---\n" + SPECON.read_text())
    found = daemon.reload_if_changed()
    assert found is not None and found.ok
    assert {p.kind for p in found.policies} == {"FlowCon", "SpeCon"}
    assert [p.name for p in daemon.policies] == ["fc"]  # SpeCon is the manager's
    write(path, "kind: FlowCon\n")
    broken = daemon.reload_if_changed()
    assert broken is not None and not broken.ok  # an invalid set is still reported as such
    assert [p.name for p in daemon.policies] == ["fc"]  # and the last good set kept
    daemon.shutdown()


# --- the flags' checks --------------------------------------------------------------------------

ROLE_ERRORS = {
    "leader-elect-with-docker": (
        "docker", None, "me",
        ["--leader-elect needs backend kubernetes (the election is on a Lease); the settings "
         "say backend docker"]),
    "leader-elect-with-simulator": (
        "simulated", None, "me",
        ["--leader-elect needs backend kubernetes (the election is on a Lease); the settings "
         "say backend simulated"]),
    "node-with-simulator": (
        "simulated", "w1", None,
        ["--node needs backend docker or kubernetes: the simulator is the whole cluster (a "
         "node agent runs node-scoped policies on one real node)"]),
    "both": (
        "kubernetes", "w1", "me",
        ["--node and --leader-elect do not go together: a node agent owns its node (no "
         "election); the manager (SpeCon) is the one elected"]),
    "empty-node": ("kubernetes", " ", None,
                   ["--node needs a node name (e.g. --node $(NODE_NAME))"]),
}


@pytest.mark.parametrize("case", ROLE_ERRORS.values(), ids=ROLE_ERRORS.keys())
def test_flags_that_make_no_sense_are_rejected(tmp_path: Path,
                                               case: tuple[str, Any, Any, list[str]]) -> None:
    backend, node, identity, expected = case
    settings = k8s_settings(tmp_path)
    if backend == "simulated":
        settings = DaemonSettings(http=HttpSettings(enabled=False))
    elif backend == "docker":
        settings = DaemonSettings(
            policies=settings.policies, backend="docker", prometheus=settings.prometheus,
            docker=DockerSection(hosts={"w1": DockerHost(url="unix:///nonexistent.sock")}),
            http=HttpSettings(enabled=False))
    with pytest.raises(StartupError) as caught:
        run(settings, out=io.StringIO(), stop=threading.Event(), once=True, node=node,
            leader_identity=identity,
            parts=Parts(source=FakeSource(), actuator=FakeActuator(), events=None))
    assert caught.value.lines == expected


def test_cli_rejects_leader_elect_with_the_simulator(capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    assert main(["run", "--once", "--leader-elect"]) == 1
    assert ("--leader-elect needs backend kubernetes (the election is on a Lease); the "
            "settings say backend simulated") in capsys.readouterr().err


# --- --leader-elect: only the leader applies ---------------------------------------------------

def test_only_the_lease_holder_applies(tmp_path: Path) -> None:
    """Two replicas, --once each: both decide (same report), only the holder applies."""
    leases = FakeLeases()
    settings = k8s_settings(tmp_path)
    applied: dict[str, FakeActuator] = {}
    for identity in ("a", "b"):
        out, applied[identity] = io.StringIO(), FakeActuator()
        code = run(settings, out=out, stop=threading.Event(), once=True,
                   leader_identity=identity,
                   parts=Parts(source=FakeSource(one_to_limit), actuator=applied[identity],
                               events=None, lease_api=leases.api))
        assert code == 0
        assert out.getvalue().splitlines() == [
            "policy fc: ok, 1 actions (0 failed), next interval 20 s"]
    assert leases.lease is not None and leases.lease["spec"]["holderIdentity"] == "a"
    assert leases.lease["metadata"]["name"] == "policyd-specon"
    assert leases.lease["metadata"]["namespace"] == "policyd"
    assert [a.container for a in applied["a"].applied] == ["a"]
    assert applied["b"].applied == []


def test_leadership_loss_stops_acting_within_the_lease(tmp_path: Path) -> None:
    """A leader whose renewals fail stops applying after renew_deadline_seconds (< the
    lease duration, after which the standby may take over); decisions go on meanwhile."""
    leases, clock = FakeLeases(), FakeClock(0.0)
    section = KubernetesSection(lease_duration_seconds=15, renew_deadline_seconds=10,
                                retry_period_seconds=2)
    actuator = FakeActuator()
    recovered: list[float] = []
    elector = LeaderElector(lease_settings(section, "a"), leases.api, clock=clock, wall=clock)
    election = Election(elector.settings, leases.api, actuator, elector=elector,
                        recover=lambda: recovered.append(clock.now))
    daemon = Daemon([flowcon()], source=FakeSource(one_to_limit),
                    actuator=election.gate, metrics=DaemonMetrics(CollectorRegistry()))
    assert election.try_once() and recovered == [0.0]  # recovery when leadership starts
    assert daemon.tick_policy("fc").result == "ok" and len(actuator.applied) == 1
    leases.api.replace_namespaced_lease.side_effect = api_error(500)  # renewals fail now
    clock.now += 9
    assert election.try_once()  # 9 s since the last renewal: still leading
    daemon.tick_policy("fc")
    assert len(actuator.applied) == 2
    clock.now += 1  # 10 s: the renew deadline, 5 s before the lease expires for the others
    assert not election.try_once()
    report = daemon.tick_policy("fc")
    assert report.result == "ok" and report.outcome is not None
    assert len(report.outcome.decision.actions) == 1  # still decided ...
    assert len(actuator.applied) == 2 and election.gate.skipped == 1  # ... but not applied
    daemon.shutdown()


def test_election_thread_leads_then_stops(tmp_path: Path) -> None:
    leases = FakeLeases()
    section = KubernetesSection(lease_duration_seconds=0.5, renew_deadline_seconds=0.3,
                                retry_period_seconds=0.05)
    recovered = threading.Event()
    election = Election(lease_settings(section, "a"), leases.api, FakeActuator(),
                        recover=recovered.set)
    election.start()
    assert election.elector.is_leader.wait(2) and recovered.wait(2)
    election.stop()
    assert not election.elector.leading()


def test_leader_elect_runs_until_stopped(tmp_path: Path) -> None:
    """The long-running path: the elector's thread starts with the daemon and ends with it,
    releasing the Lease."""
    leases = FakeLeases()
    stop = threading.Event()
    actuator = FakeActuator()
    settings = k8s_settings(tmp_path, lease_duration_seconds=1.0, renew_deadline_seconds=0.5,
                            retry_period_seconds=0.05)
    code: list[int] = []
    thread = threading.Thread(target=lambda: code.append(run(
        settings, out=io.StringIO(), stop=stop, leader_identity="a",
        parts=Parts(source=FakeSource(one_to_limit), actuator=actuator, events=None,
                    lease_api=leases.api))))
    thread.start()
    try:
        wait_for(lambda: leases.lease is not None, what="the lease")
        wait_for(lambda: bool(actuator.applied), what="the leader's first action")
    finally:
        stop.set()
        thread.join(10)
    assert code == [0] and not thread.is_alive()
    # it led ("a" renewed it at least once), then gave the Lease up on the way out
    assert leases.lease is not None and leases.lease["spec"]["holderIdentity"] == ""
    assert leases.lease["spec"]["leaseDurationSeconds"] == 1 and leases.version >= 2
    assert not any(t.name == "policyd-leader" and t.is_alive() for t in threading.enumerate())


# --- the backend's assembly -----------------------------------------------------------------

def test_kubernetes_settings_map_the_section() -> None:
    section = KubernetesSection(qps=20, burst=40, namespaces=("training",),
                                label_selector="team=ml", lease_name="l",
                                lease_duration_seconds=30, renew_deadline_seconds=20,
                                retry_period_seconds=4, namespace="ops")
    scope = kubernetes_settings(section)
    assert (scope.qps, scope.burst, scope.namespaces, scope.label_selector) == (
        20, 40, ("training",), "team=ml")
    lease = lease_settings(section, "pod-1")
    assert (lease.name, lease.namespace, lease.identity, lease.lease_duration_seconds,
            lease.renew_deadline_seconds, lease.retry_period_seconds) == (
        "l", "ops", "pod-1", 30, 20, 4)


@pytest.mark.parametrize("case", [(True, None, 1, True), (False, None, 0, False),
                                  (True, "w1", 0, True)],
                         ids=["recover-at-start", "leader-recovers-later", "node-agent-never"])
def test_kubernetes_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                          case: tuple[bool, str | None, int, bool]) -> None:
    """No cluster: the client config falls back to a kubeconfig that is not read; recovery is
    counted instead of run. Afterwards the actuator looks for pending moves at its first
    action unless they were settled (at start) or it is a node agent (it makes none)."""
    recover, node, calls, recovered = case
    from kubernetes import config as k8s_config  # type: ignore[import-untyped]  # noqa: PLC0415

    from policyd.actuators.kubernetes import KubernetesActuator  # noqa: PLC0415
    from policyd.actuators.kubernetes.declaration_events import (  # noqa: PLC0415
        DeclarationEvents,
    )
    from policyd.sources.kubernetes_jobs import JobWatch  # noqa: PLC0415
    from policyd.sources.kubernetes_node_watch import NodeWatch  # noqa: PLC0415
    from policyd.sources.kubernetes_pod_watch import PodWatch  # noqa: PLC0415
    from policyd.sources.kubernetes_pods import KubernetesPodSource  # noqa: PLC0415
    from policyd.sources.merged_events import MergedEvents  # noqa: PLC0415

    def no_cluster() -> None:
        raise k8s_config.ConfigException("not in a cluster")

    monkeypatch.setattr(k8s_config, "load_incluster_config", no_cluster)
    monkeypatch.setattr(k8s_config, "load_kube_config", lambda **_: None)
    ran: list[int] = []

    def fake_recover(self: KubernetesActuator) -> list[Any]:
        ran.append(1)
        self._settle_at = math.inf  # nothing was pending
        return []

    monkeypatch.setattr(KubernetesActuator, "recover", fake_recover)
    settings = k8s_settings(tmp_path, tmp_path / "p.yaml", SPECON)
    settings = settings.model_copy(update={"prometheus": settings.prometheus.model_copy(
        update={"max_concurrent_queries": 3})})
    parts = kubernetes_parts(settings, recover=recover, node=node)
    assert isinstance(parts.source, KubernetesPodSource)
    assert parts.source.max_concurrent_queries == 3  # prometheus.max_concurrent_queries
    # the pods and the nodes watched, their views the source's; the manager also watches the
    # Jobs, for the held ones (a node agent has no RBAC on Jobs)
    assert isinstance(parts.events, MergedEvents)
    watches = parts.events.sources
    assert [type(s) for s in watches] == [PodWatch, NodeWatch, *([JobWatch] if node is None
                                                                 else [])]
    assert parts.source.pods_from == watches[0].running_now  # type: ignore[attr-defined]
    assert parts.source.nodes_from == watches[1].nodes_now  # type: ignore[attr-defined]
    assert isinstance(parts.actuator, KubernetesActuator)
    assert len(ran) == calls and (parts.actuator._settle_at == math.inf) is recovered
    assert parts.actuator.settings.node_name == node  # the source and the watch read it too
    assert parts.actuator.settings.record_namespace == settings.kubernetes.namespace
    assert parts.lease_api is not None and parts.recover is not None
    assert parts.policy_api is not None
    # unreadable declarations are told as Events through the actuator's own recorder
    assert isinstance(parts.observer, DeclarationEvents)
    assert parts.observer._recorder is parts.actuator.events
