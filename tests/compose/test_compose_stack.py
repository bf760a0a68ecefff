"""deploy/docker run for real: Debian's docker-compose starts the stack's policyd (its image built
from deploy/docker/Dockerfile on a base made by `docker import`), Prometheus, Alertmanager and
the trainer on a test engine, and policyd acts on the trainer.

What the test changes in a copy of the stack's compose.yaml (nothing else):
* images: there is no registry. Prometheus, Alertmanager and the trainer run this machine's
  binaries and venv in the mount-points image of deploy/trainer-image (as tests/e2e does);
  policyd's image is built by compose's own `build:` section with `BASE` set.
* network: the engine has no bridge, so every service uses host networking, listens on
  127.0.0.1 only, and finds the others by the stack's service names through `extra_hosts`.
* no published ports (host networking refuses them), and no cAdvisor (none can be installed
  here): policyd's settings are the stack's with
  `profile: docker-stats` (the loss from Prometheus, the CPU from the engine).
* the stack's policy is in dry-run: the test's copy has `dry_run: false` and a 4 s interval.
The stack's prometheus.yml, alertmanager.yml, rules and the trainer's command are used as they
are.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.compose.images import BASE_TAG, python_base
from tests.e2e.harness import wait_for
from tests.integration.docker_engines import (
    ROOT,
    TRAINER_TAG,
    Engine,
    build_trainer_image,
    docker_engines,
    host_binds,
)

pytestmark = pytest.mark.slow

STACK = ROOT / "deploy" / "docker"
PORTS = {"prometheus": 9090, "alertmanager": 9093, "policyd": 9097, "trainer": 9108}
NAMES = [f"{name}:127.0.0.1" for name in ("prometheus", "alertmanager", "policyd", "trainer",
                                           "cadvisor")]


def stack() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((STACK / "compose.yaml").read_text())
    return loaded


def _absolute(source: str) -> str:
    return str((STACK / source).resolve()) if source.startswith(".") else source


def _mount(service: dict[str, Any], entry: str) -> None:
    """Add a volume `entry`, replacing the stack's volume with the same target (as an override
    file would)."""
    target = entry.split(":")[1]
    kept = [v for v in service.get("volumes", []) if v.split(":")[1] != target]
    service["volumes"] = [*kept, entry]


def stack_for_test(directory: Path, engine: Engine) -> Path:
    """The stack's compose.yaml with the changes of the module docstring, written next to the
    settings and policy it mounts. (Not an override file: docker-compose 1.29 cannot remove the
    stack's `ports`, which host networking refuses.)"""
    document = stack()
    services = document["services"]
    del services["cadvisor"]
    settings = yaml.safe_load((STACK / "policyd" / "settings.yaml").read_text())
    settings["prometheus"]["profile"] = "docker-stats"
    settings["prometheus"].pop("node_names", None)
    settings["http"]["addr"] = "127.0.0.1"
    settings["docker"]["state_path"] = "/tmp/policyd-docker-state.json"
    (directory / "settings.yaml").write_text(yaml.safe_dump(settings))
    policies = directory / "policies"
    policies.mkdir()
    policy = yaml.safe_load((STACK / "policies" / "flowcon.yaml").read_text())
    policy["spec"] |= {"dry_run": False, "interval_seconds": 4}
    (policies / "flowcon.yaml").write_text(yaml.safe_dump(policy))
    for name, service in services.items():
        service.pop("ports", None)
        service.pop("expose", None)
        service["network_mode"] = "host"
        service["extra_hosts"] = NAMES
        service["depends_on"] = [d for d in service.get("depends_on", []) if d in services]
        service["volumes"] = [":".join([_absolute(v.split(":")[0]), *v.split(":")[1:]])
                              for v in service.get("volumes", [])]
        if name != "policyd":
            service["image"] = TRAINER_TAG
            service.pop("build", None)
            _mount(service, "/usr:/usr:ro")
    for name in ("prometheus", "alertmanager"):
        binary = shutil.which("prometheus" if name == "prometheus" else "prometheus-alertmanager")
        services[name]["entrypoint"] = [binary]
        services[name]["command"] = [*services[name]["command"],
                                     f"--web.listen-address=127.0.0.1:{PORTS[name]}"]
    policyd = services["policyd"]
    policyd["build"] |= {"context": _absolute(policyd["build"]["context"]),
                         "args": {"BASE": BASE_TAG}, "network": "host"}
    policyd["group_add"] = [str(os.stat(engine.socket).st_gid)]
    _mount(policyd, f"{engine.socket}:/var/run/docker.sock")
    _mount(policyd, f"{directory / 'settings.yaml'}:/etc/policyd/settings.yaml:ro")
    _mount(policyd, f"{policies}:/etc/policyd/policies:ro")
    trainer = services["trainer"]
    trainer["entrypoint"] = [str(ROOT / ".venv" / "bin" / "python"),
                             str(ROOT / "exporters" / "examples" / "train_mnist_like.py"),
                             "--addr", "127.0.0.1", "--port", str(PORTS["trainer"]),
                             "--checkpoint-dir", "/checkpoints", "--threads", "1"]
    trainer["cpu_shares"] = 256  # policyd gives a new job 1024 (FlowCon, Algorithm 2)
    for bind in host_binds():
        _mount(trainer, bind)
    path = directory / "compose.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def compose(engine: Engine, files: list[Path], *args: str, timeout: float = 900
            ) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("docker-compose")
    assert binary is not None, "docker-compose is missing: run scripts/install-test-deps"
    # BuildKit through Debian's docker CLI: the only builder that honours the per-Dockerfile
    # ignore files (the classic one would send the whole repository, .venv included).
    env = {**os.environ, "DOCKER_HOST": engine.url, "COMPOSE_DOCKER_CLI_BUILD": "1",
           "DOCKER_BUILDKIT": "1", "PATH": "/usr/bin:" + os.environ.get("PATH", "")}
    argv = [binary, "--project-name", "policyd-test"]
    for f in files:
        argv += ["-f", str(f)]
    done = subprocess.run([*argv, *args], capture_output=True, text=True, env=env,
                          timeout=timeout, check=False)
    assert done.returncode == 0, f"docker-compose {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


def http_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


def status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)
    except OSError:
        return 0


def port_is_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    busy = [p for p in PORTS.values() if not port_is_free(p)]
    assert not busy, f"the stack's ports {busy} are taken on 127.0.0.1"
    with docker_engines(1, prefix="pd-cmp-") as (started,):
        yield started


def test_the_compose_stack_runs_and_policyd_acts_on_the_trainer(
    engine: Engine, tmp_path: Path
) -> None:
    build_trainer_image(engine)
    python_base(engine, tmp_path)
    files = [stack_for_test(tmp_path, engine)]
    compose(engine, files, "build", "policyd")
    try:
        compose(engine, files, "up", "-d", "--no-deps", "prometheus", "alertmanager", "policyd")
        policyd = f"http://127.0.0.1:{PORTS['policyd']}"
        wait_for(lambda: status(f"{policyd}/readyz") == 200, timeout_seconds=120,
                 what="policyd's /readyz", every=0.5,
                 state=lambda: compose(engine, files, "logs", "--tail=30").stdout)
        compose(engine, files, "up", "-d", "--no-deps", "trainer")
        api = engine.client().api

        def shares() -> int:
            return int(api.inspect_container("train-1")["HostConfig"]["CpuShares"] or 1024)

        # A FlowCon action reached the trainer: policyd's `docker update` of its CPU shares.
        wait_for(lambda: shares() == 1024, timeout_seconds=120, every=0.5,
                 what="policyd to give train-1 1024 CPU shares",
                 state=lambda: compose(engine, files, "logs", "--tail=30", "policyd").stdout)
        prometheus = f"http://127.0.0.1:{PORTS['prometheus']}"

        def up() -> dict[str, str]:
            query = urllib.parse.urlencode({"query": "up"})
            result = http_json(f"{prometheus}/api/v1/query?{query}")["data"]["result"]
            return {r["metric"]["job"]: r["value"][1] for r in result}

        wait_for(lambda: up().get("training") == "1" and up().get("policyd") == "1",
                 timeout_seconds=90, every=1, what="Prometheus scraping the trainer and policyd",
                 state=up)
        query = urllib.parse.urlencode({"query": 'policyd_training_loss{job_name="train-1"}'})
        assert http_json(f"{prometheus}/api/v1/query?{query}")["data"]["result"]
    finally:
        compose(engine, files, "down", "--volumes", "--timeout", "10")
