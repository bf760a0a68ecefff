"""The Docker edge against real engines (Debian's dockerd, two of them as two hosts).

Every container runs the local trainer image with host networking and listens on 127.0.0.1.
"""

from __future__ import annotations

import os
import re
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import pytest
from docker.models.containers import Container

from policyd.actuators.docker import ActuationError, DockerActuator, DockerHost, DockerSettings
from policyd.model import Admit, Decision, Migrate, SetCpu
from policyd.model.events import ContainerEvent
from policyd.sources.docker_events import DockerEvents
from policyd.sources.docker_poll import DockerStats
from policyd.sources.docker_stats import DockerSnapshotSource
from tests.integration.docker_engines import (
    MANAGED,
    TRAINER_TAG,
    Engine,
    build_trainer_image,
    docker_engines,
    host_binds,
    trainer_command,
)
from tests.integration.servers import free_port, prometheus
from tests.sources.builders import flowcon

pytestmark = pytest.mark.slow


def settings_for(engines: list[Engine], **kw: object) -> DockerSettings:
    return DockerSettings(hosts={e.name: DockerHost(url=e.url) for e in engines},
                          **kw)  # type: ignore[arg-type]


def decision(policy: str = "p") -> Decision:
    return Decision(policy=policy, kind="SpeCon", time=0.0, actions=(), assessments=(),
                    next_interval=10.0)


def wait_for(predicate: Callable[[], bool], *, timeout_seconds: float, what: str) -> None:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_seconds} s waiting for {what}")


def run_trainer(engine: Engine, name: str, ckpt: Path, port: int, step_sleep: float = 0.0
                ) -> Container:
    return engine.client().containers.run(
        TRAINER_TAG, trainer_command(port, step_sleep=step_sleep), name=name, detach=True,
        network_mode="host", labels={"policyd.io/managed": "true", "app": "train"},
        environment={"POLICYD_CONTAINER": name, "POLICYD_JOB_NAME": name},
        volumes=host_binds(f"{ckpt}:/ckpt"))


def steps_exported(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
        text = response.read().decode()
    match = re.search(r"^policyd_training_steps_total\{[^}]*\} ([0-9.e+]+)$", text, re.M)
    return float(match.group(1)) if match else -1.0


def logs(container: Container) -> str:
    return str(container.logs().decode(errors="replace"))


@pytest.fixture
def cleanup(engines: list[Engine]) -> Iterator[None]:
    yield
    for e in engines:
        e.remove_all_containers()


def test_set_cpu_shares_and_quota_show_in_inspect(engines: list[Engine], tmp_path: Path,
                                                  cleanup: None) -> None:
    e1 = engines[0]
    c = run_trainer(e1, "cpu-1", tmp_path, free_port(), step_sleep=0.01)
    actuator = DockerActuator(settings_for(engines))
    ncpu = e1.client().info()["NCPU"]

    def host() -> dict[str, int]:
        c.reload()
        return {k: c.attrs["HostConfig"][k] for k in ("CpuShares", "CpuQuota", "CpuPeriod")}

    def set_cpu(fraction: float, mode: str) -> None:
        actuator.apply(SetCpu(policy="p", container="cpu-1", node="e1", fraction=fraction,
                              mode=mode, reason="test"), decision())  # type: ignore[arg-type]

    set_cpu(0.25, "shares")
    assert host()["CpuShares"] == 256
    set_cpu(0.5, "quota")
    assert host() == {"CpuShares": 1024, "CpuQuota": round(0.5 * ncpu * 100_000),
                      "CpuPeriod": 100_000}
    set_cpu(1.0, "quota")
    assert host()["CpuQuota"] in (-1, 0)  # the cap is gone
    set_cpu(0.5, "quota")
    set_cpu(0.75, "shares")  # quota -> shares: the cap goes, the weight comes
    assert host()["CpuShares"] == 768 and host()["CpuQuota"] in (-1, 0)
    assert c.status == "running"
    actuator.close()


def test_migration_checkpoints_and_resumes_on_the_other_engine(
        engines: list[Engine], tmp_path: Path, cleanup: None) -> None:
    e1, e2 = engines
    port = free_port()
    old = run_trainer(e1, "mig-1", tmp_path, port, step_sleep=0.005)
    wait_for(lambda: "step=100 " in logs(old), timeout_seconds=60, what="100 steps on e1")
    state = tmp_path / "state" / "docker.json"
    actuator = DockerActuator(settings_for(engines, grace_seconds=30, state_path=state))
    started = time.monotonic()
    actuator.apply(Migrate(policy="p", container="mig-1", from_node="e1", to_node="e2",
                           reason="converged", converged_at=1_700_000_000.0, rebalance=True),
                   decision())
    took = time.monotonic() - started
    actuator.close()
    with pytest.raises(docker.errors.NotFound):
        e1.client().containers.get("mig-1")  # the old one is removed
    new = e2.client().containers.get("mig-1")
    assert new.status == "running"
    assert new.labels["policyd.io/migrated"] == "true"
    assert new.labels["policyd.io/migrated-from"] == "e1"
    assert new.labels["policyd.io/rebalanced"] == "true"
    assert float(new.labels["policyd.io/converged_at"]) == 1_700_000_000.0
    assert "POLICYD_CONTAINER=mig-1" in new.attrs["Config"]["Env"]
    checkpoints = sorted(tmp_path.glob("step-*.ckpt"))
    assert checkpoints, "the SIGTERM checkpoint is on the shared path"
    wait_for(lambda: "resumed: step=" in logs(new), timeout_seconds=30, what="resume on e2")
    resumed = int(re.search(r"resumed: step=(\d+)", logs(new)).group(1))  # type: ignore[union-attr]
    assert resumed >= 100
    wait_for(lambda: steps_exported(port) > resumed, timeout_seconds=30,
             what=f"the exporter's steps counter past {resumed}")
    assert e2.client().images.get(TRAINER_TAG)  # copied from e1 by the migration
    assert '"migrations": {}' in state.read_text()
    print(f"migration took {took:.1f} s, resumed at step {resumed}")


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of host process `pid` (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_stats_reports_a_busy_container_as_the_cores_it_used(engines: list[Engine],
                                                              tmp_path: Path,
                                                              cleanup: None) -> None:
    """The busy loop's cores by docker stats equal what its process used meanwhile by the
    kernel's count: a whole core on an idle machine, less when others share the cores (0.4
    once in CI with the load average at 8 on 2 cores), so the truth is measured, not assumed."""
    e1 = engines[0]
    python = trainer_command(0)[0]
    busy = e1.client().containers.run(
        TRAINER_TAG, [python, "-c", "while True: pass"], name="busy-1", detach=True,
        network_mode="host", labels={"policyd.io/managed": "true"}, volumes=host_binds())
    e1.client().containers.run(  # unmanaged: not polled
        TRAINER_TAG, [python, "-c", "import time; time.sleep(600)"], name="other-1",
        detach=True, network_mode="host", volumes=host_binds())
    busy.reload()
    pid = busy.attrs["State"]["Pid"]
    stats = DockerStats(settings_for(engines))
    try:
        time.sleep(0.5)
        w0, cpu_before = time.monotonic(), process_cpu_seconds(pid)
        first = stats.poll(at=1000.0)
        w1 = time.monotonic()
        time.sleep(3.0)
        w2 = time.monotonic()
        second = stats.poll(at=1003.0)
        cpu_after, w3 = process_cpu_seconds(pid), time.monotonic()
    finally:
        stats.close()
    assert not first.warnings and not second.warnings
    by_node = {h.node: h for h in second.hosts}
    assert [c.name for c in by_node["e1"].containers] == ["busy-1"]
    cid = by_node["e1"].containers[0].id
    cores = stats.cores(cid)
    assert list(cores.times_seconds) == [1003.0]
    # The stats' two samples were taken somewhere inside the polls, so between w2 - w1 and
    # w3 - w0 seconds apart, and their difference is divided by the 3 s of `at`. The process
    # used `rate` cores over [w0, w3] by the kernel's count; 0.1 core of slack for its changes.
    rate = (cpu_after - cpu_before) / (w3 - w0)
    assert rate > 0.1, f"the busy loop got {rate:.2f} cores: nothing to compare"
    low, high = rate * (w2 - w1) / 3.0 - 0.1, rate * (w3 - w0) / 3.0 + 0.1
    assert low <= cores.values[0] <= high, (cores.values, rate, low, high)
    assert w3 - w2 < 1.5, f"one_shot polls should not wait for a second sample: {w3 - w2}"


def test_events_report_create_start_and_die(engines: list[Engine], cleanup: None) -> None:
    e2 = engines[1]
    seen: list[ContainerEvent] = []
    stop = threading.Event()
    watcher = DockerEvents(settings_for(engines))
    thread = threading.Thread(target=watcher.watch, args=(seen.append, stop), daemon=True)
    thread.start()
    wait_for(lambda: watcher.connects == {"e1": 1, "e2": 1}, timeout_seconds=10,
             what="both streams open")
    python = trainer_command(0)[0]
    for engine, labels in ((e2, {"policyd.io/managed": "true"}), (e2, {})):
        engine.client().containers.run(
            TRAINER_TAG, [python, "-c", "import time; time.sleep(0.5)"],
            name=f"ev-{len(labels)}", detach=True, network_mode="host", labels=labels,
            volumes=host_binds())
    wait_for(lambda: len(seen) >= 3, timeout_seconds=20, what="create, start and die events")
    time.sleep(0.5)
    stopped_at = time.monotonic()
    stop.set()
    thread.join(timeout=5)
    assert not thread.is_alive() and time.monotonic() - stopped_at < 3
    assert [(e.kind, e.container, e.node) for e in seen] == [
        ("submitted", "ev-1", "e2"), ("started", "ev-1", "e2"), ("stopped", "ev-1", "e2")]


def test_events_reconnect_after_the_engine_restarts() -> None:
    with docker_engines(1, prefix="pd-dkr-") as (engine,):
        build_trainer_image(engine)
        seen: list[ContainerEvent] = []
        stop = threading.Event()
        watcher = DockerEvents(DockerSettings(hosts={"r1": DockerHost(url=engine.url)}),
                               backoff_seconds=0.2)
        thread = threading.Thread(target=watcher.watch, args=(seen.append, stop), daemon=True)
        thread.start()
        try:
            wait_for(lambda: watcher.connects.get("r1") == 1, timeout_seconds=10, what="stream")
            engine.restart()
            wait_for(lambda: watcher.connects.get("r1", 0) >= 2, timeout_seconds=20,
                     what="the watcher to reconnect")
            engine.client().containers.run(
                TRAINER_TAG, ["/usr/bin/true"], detach=True, name="after-restart",
                labels={MANAGED.split("=")[0]: "true"}, network_mode="host",
                volumes=host_binds())
            wait_for(lambda: [e.kind for e in seen if e.container == "after-restart"]
                     == ["submitted", "started", "stopped"], timeout_seconds=20,
                     what="events after the restart")
        finally:  # a failure above must not leave the watcher reconnecting to a removed engine
            stop.set()
            thread.join(timeout=5)
        assert not thread.is_alive()


def test_a_job_that_ignores_sigterm_is_rolled_back(engines: list[Engine], tmp_path: Path,
                                                   cleanup: None) -> None:
    e1, e2 = engines
    python = trainer_command(0)[0]
    stubborn = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                "print('up', flush=True); time.sleep(600)")
    old = e1.client().containers.run(
        TRAINER_TAG, [python, "-c", stubborn], name="stubborn", detach=True, network_mode="host",
        labels={"policyd.io/managed": "true"}, volumes=host_binds(f"{tmp_path}:/ckpt"))
    wait_for(lambda: "up" in logs(old), timeout_seconds=20, what="the job to start")
    actuator = DockerActuator(settings_for(engines, grace_seconds=1))
    with pytest.raises(ActuationError, match="exited with code 137 instead of 0 after SIGTERM"):
        actuator.apply(Migrate(policy="p", container="stubborn", from_node="e1", to_node="e2",
                               reason="test"), decision())
    actuator.close()
    old.reload()
    assert old.status == "running"
    with pytest.raises(docker.errors.NotFound):
        e2.client().containers.get("stubborn")


def test_recover_finishes_a_half_done_migration(engines: list[Engine], tmp_path: Path,
                                                cleanup: None) -> None:
    e1, e2 = engines
    python = trainer_command(0)[0]
    sleeper = [python, "-c", "import time; time.sleep(600)"]
    for engine in (e1, e2):  # the image on both (a previous migration copied it)
        if not engine.client().images.list(name=TRAINER_TAG):
            build_trainer_image(engine)
    old = e1.client().containers.run(TRAINER_TAG, sleeper, name="half", detach=True,
                                     network_mode="host", volumes=host_binds(),
                                     labels={"policyd.io/managed": "true"})
    old.stop(timeout=1)
    e2.client().containers.run(TRAINER_TAG, sleeper, name="half", detach=True,
                               network_mode="host", volumes=host_binds(),
                               labels={"policyd.io/managed": "true",
                                       "policyd.io/migrated-from": "e1"})
    actuator = DockerActuator(settings_for(engines))
    done = actuator.recover()
    actuator.close()
    assert [(d.name, d.old, d.new, d.steps) for d in done] == [
        ("half", "failed", "running", ("remove_old",))]  # killed after the 1 s stop: 137
    with pytest.raises(docker.errors.NotFound):
        e1.client().containers.get("half")
    assert e2.client().containers.get("half").status == "running"


def test_snapshot_from_prometheus_and_docker(engines: list[Engine], tmp_path: Path,
                                             cleanup: None) -> None:
    e1 = engines[0]
    port = free_port()
    run_trainer(e1, "snap-1", tmp_path, port)
    policy = flowcon(interval_seconds=1, window_intervals=5)
    (tmp_path / "prom").mkdir()
    with prometheus(tmp_path / "prom", [f"127.0.0.1:{port}"], scrape_seconds=0.5) as prom:
        source = DockerSnapshotSource(prom.url, settings_for(engines))
        try:
            wait_for(lambda: any(c.id == "snap-1" and len(c.evaluation) >= 2
                                 for c in source.snapshot([policy]).containers),
                     timeout_seconds=40, what="the loss in Prometheus")
            time.sleep(1.5)
            snap = source.snapshot([policy])
        finally:
            source.close()
    (job,) = snap.containers
    assert (job.id, job.node, job.cpu_allocation) == ("snap-1", "e1", 1.0)
    assert job.labels["app"] == "train" and not job.markers.migrated
    assert len(job.cpu_usage) >= 1 and 0.3 < job.cpu_usage.values[-1] < 1.3
    assert {n.name for n in snap.nodes} == {"e1", "e2"}


def test_held_containers_are_pending_then_admitted_here_and_elsewhere(
        engines: list[Engine], tmp_path: Path, cleanup: None) -> None:
    e1, e2 = engines
    python = trainer_command(0)[0]
    for name in ("held-1", "held-2"):
        e1.client().containers.create(
            TRAINER_TAG, [python, "-c", "import time; time.sleep(600)"], name=name,
            network_mode="host", volumes=host_binds(),
            labels={"policyd.io/managed": "true", "policyd.io/deadline": "1h"})
    stats = DockerStats(settings_for(engines))
    try:
        poll = stats.poll(at=1000.0)
    finally:
        stats.close()
    held = {h.name: h for host in poll.hosts for h in host.held}
    assert sorted(held) == ["held-1", "held-2"] and held["held-1"].node == "e1"
    assert abs(held["held-1"].created_at - time.time()) < 120
    assert not any(c.name.startswith("held-") for h in poll.hosts for c in h.containers)
    actuator = DockerActuator(settings_for(engines))
    ncpu = e1.client().info()["NCPU"]
    try:
        actuator.apply(Admit(policy="dl", container="held-1", node="e1", held_on="e1",
                             fraction=0.5, mode="quota", reason="test"), decision())
        actuator.apply(Admit(policy="dl", container="held-2", node="e2", held_on="e1",
                             fraction=0.25, mode="shares", reason="test"), decision())
    finally:
        actuator.close()
    here = e1.client().containers.get("held-1")
    assert here.status == "running"
    assert here.attrs["HostConfig"]["CpuQuota"] == round(0.5 * ncpu * 100_000)
    with pytest.raises(docker.errors.NotFound):
        e1.client().containers.get("held-2")
    there = e2.client().containers.get("held-2")
    assert there.status == "running" and there.attrs["HostConfig"]["CpuShares"] == 256
    assert there.labels["policyd.io/deadline"] == "1h"
    assert abs(float(there.labels["policyd.io/submitted-at"]) - held["held-2"].created_at) < 1


def test_a_deadline_tick_admits_a_held_container_end_to_end(
        engines: list[Engine], tmp_path: Path, cleanup: None) -> None:
    """The real chain: the docker-stats source sees a held container, the Deadline policy
    admits it (earliest deadline first, on the node with the most free cores), the actuator
    starts it; the next tick sees it running and nothing waiting."""
    from policyd.engine.registry import KINDS  # noqa: PLC0415
    from policyd.engine.spec import API_VERSION  # noqa: PLC0415
    from policyd.tick import tick  # noqa: PLC0415

    e1, e2 = engines
    port = free_port()
    run_trainer(e1, "busy-dl", tmp_path, port, step_sleep=0.01)
    python = trainer_command(0)[0]
    e2.client().containers.create(
        TRAINER_TAG, [python, "-c", "import time; time.sleep(600)"], name="wait-dl",
        network_mode="host", volumes=host_binds(),
        labels={"policyd.io/managed": "true", "policyd.io/deadline": "30m"})
    policy = KINDS["Deadline"].document.model_validate({
        "apiVersion": API_VERSION, "kind": "Deadline", "metadata": {"name": "dl"},
        "spec": {"interval_seconds": 2, "admission_cores": 0.5, "migrate": False}})
    (tmp_path / "prom").mkdir()
    with prometheus(tmp_path / "prom", [f"127.0.0.1:{port}"], scrape_seconds=0.5) as prom:
        source = DockerSnapshotSource(prom.url, settings_for(engines))
        actuator = DockerActuator(settings_for(engines))
        try:
            first = tick(source, policy, actuator)
            second = tick(source, policy, actuator)
        finally:
            source.close()
            actuator.close()
    admits = [a for a in first.decision.actions if isinstance(a, Admit)]
    assert [(a.container, a.held_on) for a in admits] == [("wait-dl", "e2")], first
    assert first.failed == ()
    started = find_running(engines, "wait-dl")
    assert started is not None and started.labels["policyd.io/deadline"] == "30m"
    assert second.decision.queue == ()
    assert not [a for a in second.decision.actions if isinstance(a, Admit)]


def find_running(engines: list[Engine], name: str) -> Container | None:
    for engine in engines:
        try:
            found = engine.client().containers.get(name)
        except docker.errors.NotFound:
            continue
        if found.status == "running":
            return found
    return None
