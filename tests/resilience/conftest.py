"""The world the resilience tests share (started once for this package's tests, ~20 s,
and stopped after its last one, so that its trainers do not load the machine under the later
tests):

* two real Docker engines, e1 and e2 (`tests.integration.docker_engines`), the trainer image
  built on each;
* two real trainer containers, `rs-a` on e1 and `rs-b` on e2: the example PyTorch job with its
  loss exporter on 127.0.0.1 (host networking), managed (`policyd.io/managed=true`, `app=train`),
  a checkpoint directory of their own, and the restart policy `unless-stopped`: when their engine
  restarts they are stopped with SIGTERM (the job checkpoints and exits 0) and started again by
  the engine when it comes back (same container id, same HostConfig), resuming from the
  checkpoint. That is what a production training container should do, so the tests use it;
* an unmanaged decoy on e1 (`rs-decoy`, `app=train` but no managed label, CPU shares 512): policyd
  must never touch it;
* a real Prometheus (restartable on the same port and data directory) scraping both exporters
  every 0.5 s.

Each test runs its own `policyd run --config FILE` subprocess against this world and puts the
world back the way it found it (trainers running, Prometheus up).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import pytest

from tests.integration.docker_engines import (
    TRAINER_TAG,
    Engine,
    build_trainer_image,
    docker_engines,
    host_binds,
    trainer_command,
)
from tests.integration.servers import free_port
from tests.resilience.harness import (
    Policyd,
    RestartablePrometheus,
    policy_yaml,
    settings_yaml,
    wait_for,
    write_atomically,
)

TRAINERS = {"rs-a": "e1", "rs-b": "e2"}
DECOY = "rs-decoy"
MANAGED_LABELS = {"policyd.io/managed": "true", "app": "train"}
SLEEP = ["/usr/bin/sleep", "infinity"]
UNLESS_STOPPED: Any = {"Name": "unless-stopped", "MaximumRetryCount": 0}


@dataclass
class World:
    engines: dict[str, Engine]
    prometheus: RestartablePrometheus
    ports: dict[str, int]
    base: Path

    def api(self, node: str) -> docker.APIClient:
        return self.engines[node].client().api

    def inspect(self, node: str, name: str) -> dict[str, object]:
        """`docker inspect` of the container `name` on engine `node`."""
        found: dict[str, object] = self.api(node).inspect_container(name)
        return found

    def shares(self, node: str, name: str) -> int:
        host = self.inspect(node, name)["HostConfig"]
        assert isinstance(host, dict)
        return int(host.get("CpuShares") or 0)

    def cpu(self, node: str, name: str) -> dict[str, int]:
        host = self.inspect(node, name)["HostConfig"]
        assert isinstance(host, dict)
        return {k: int(host.get(k) or 0) for k in ("CpuShares", "CpuQuota", "CpuPeriod")}

    def set_shares(self, node: str, name: str, shares: int) -> None:
        self.api(node).update_container(name, cpu_shares=shares)
        assert self.shares(node, name) == shares

    def running(self, node: str, name: str) -> bool:
        try:
            state = self.inspect(node, name)["State"]
        except docker.errors.DockerException:
            return False
        return isinstance(state, dict) and bool(state.get("Running"))

    def exported(self) -> set[str]:
        """Containers whose loss Prometheus holds a fresh sample of."""
        result = self.prometheus.query("max by (container) (policyd_training_loss)")
        names: set[str] = set()
        for r in result:
            metric = r.get("metric")
            if isinstance(metric, dict):
                names.add(str(metric.get("container")))
        return names

    def ensure_ready(self, timeout_seconds: float = 90) -> None:
        """Prometheus up, both trainers running and their loss in Prometheus."""
        if not self.prometheus.running():
            self.prometheus.start()
        for name, node in TRAINERS.items():
            if not self.running(node, name):
                self.api(node).start(name)
        wait_for(lambda: set(TRAINERS) <= self.exported(), timeout_seconds=timeout_seconds,
                 what=f"the loss of {sorted(TRAINERS)} in Prometheus", every=0.5)

    def hosts(self) -> dict[str, str]:
        return {name: e.url for name, e in self.engines.items()}


def run_trainer(engine: Engine, name: str, port: int, ckpt: Path) -> None:
    engine.client().containers.run(
        TRAINER_TAG, trainer_command(port, step_sleep=0.05), name=name, detach=True,
        network_mode="host", labels=MANAGED_LABELS, cpu_shares=1024,
        restart_policy=UNLESS_STOPPED,
        environment={"POLICYD_CONTAINER": name, "POLICYD_JOB_NAME": name},
        volumes=host_binds(f"{ckpt}:/ckpt"))


def run_sleeper(engine: Engine, name: str, *, labels: dict[str, str], shares: int) -> None:
    """A container with no exporter; SIGKILL as its stop signal, so that an engine stopping
    does not wait 10 s for a PID 1 that ignores SIGTERM."""
    engine.client().containers.run(
        TRAINER_TAG, SLEEP, name=name, detach=True, network_mode="host", labels=labels,
        cpu_shares=shares, stop_signal="SIGKILL", restart_policy=UNLESS_STOPPED,
        volumes=host_binds())


@pytest.fixture(scope="package")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("resilience")
    with docker_engines(2, prefix="pd-rs-") as started:
        engines = {e.name: e for e in started}
        for e in started:
            build_trainer_image(e)
        ports = {name: free_port() for name in TRAINERS}
        for name, node in TRAINERS.items():
            ckpt = base / "ckpt" / name
            ckpt.mkdir(parents=True)
            run_trainer(engines[node], name, ports[name], ckpt)
        run_sleeper(engines["e1"], DECOY, labels={"app": "train"}, shares=512)
        (base / "prom").mkdir()
        prom = RestartablePrometheus(base / "prom", [f"127.0.0.1:{p}" for p in ports.values()])
        prom.start()
        world = World(engines=engines, prometheus=prom, ports=ports, base=base)
        try:
            world.ensure_ready()
            yield world
        finally:
            prom.stop()


@pytest.fixture
def start_policyd(tmp_path: Path) -> Iterator[Callable[..., tuple[Policyd, Path]]]:
    """`start_policyd(world, name, interval=, max_interval=)`: the tests' common start. The
    world is made ready and both trainers parked at 512 shares (so policyd's first actions,
    back to 1024, are visible); then a FlowCon policy file and a settings file (backend
    docker, profile docker-stats, both engines, a free /metrics port) are written, `policyd
    run --config FILE` is started, /healthz waited for and then watched; (process, policy
    file). Whatever is still running at the end is stopped."""
    started: list[Policyd] = []

    def start(world: World, name: str, *, interval: float,
              max_interval: float | None = None) -> tuple[Policyd, Path]:
        world.ensure_ready()
        for trainer, node in TRAINERS.items():
            world.set_shares(node, trainer, 512)
        policy = tmp_path / "policy.yaml"
        write_atomically(policy, policy_yaml(name, interval=interval, max_interval=max_interval))
        port = free_port()
        config = tmp_path / "settings.yaml"
        config.write_text(settings_yaml(prometheus_url=world.prometheus.url, hosts=world.hosts(),
                                        port=port, policies=[policy.name]))
        process = Policyd(config, port)
        started.append(process)
        process.wait_serving()
        process.watch_health()
        return process, policy

    yield start
    for process in started:
        if process.alive():
            process.stop()
