"""deploy/docker: the compose stack is validated, not run (no image registry on CI machines).

Parses compose.yaml and checks its services, that every file it mounts or builds from exists,
that published ports bind 127.0.0.1, that Prometheus scrapes services on ports they expose; then
`promtool check config` on the stack's prometheus.yml (with the rules beside it, as mounted),
`amtool check-config` on alertmanager.yml, and `policyd validate` on its policies.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from policyd.cli import main
from policyd.daemon.settings_file import load_settings

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "deploy" / "docker"
SERVICES = {"prometheus", "cadvisor", "alertmanager", "policyd", "trainer"}
HOST_PATHS = {"/", "/var/run", "/sys", "/var/lib/docker/", "/dev/disk/", "/var/run/docker.sock"}


def compose() -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    return document


def services() -> dict[str, dict[str, Any]]:
    result: dict[str, dict[str, Any]] = compose()["services"]
    return result


def mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(source, target) of each short-syntax volume."""
    return [(entry.split(":")[0], entry.split(":")[1]) for entry in service.get("volumes", [])]


def container_ports(service: dict[str, Any]) -> set[int]:
    published = {int(str(p).rsplit(":", 1)[-1]) for p in service.get("ports", [])}
    return published | {int(p) for p in service.get("expose", [])}


def run(*command: str, cwd: Path) -> str:
    binary = shutil.which(command[0])
    assert binary is not None, f"{command[0]} is missing: run scripts/install-test-deps as root"
    result = subprocess.run([binary, *command[1:]], capture_output=True, text=True, cwd=cwd,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def test_services() -> None:
    assert set(services()) == SERVICES
    for name, service in services().items():
        assert "image" in service or "build" in service, name


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_mounted_files_exist(name: str) -> None:
    declared = set(compose().get("volumes", {}))
    for source, target in mounts(services()[name]):
        assert target.startswith("/"), (name, target)
        if source.startswith("."):
            assert (DOCKER / source).exists(), f"{name}: {source} does not exist"
        elif source.startswith("/"):
            assert source in HOST_PATHS, f"{name}: unexpected host path {source}"
        else:
            assert source in declared, f"{name}: named volume {source} is not declared"


@pytest.mark.parametrize("name", ["policyd", "trainer"])
def test_build_files_exist(name: str) -> None:
    build = services()[name]["build"]
    context = DOCKER / build["context"]
    dockerfile = context / build["dockerfile"]
    assert context.resolve() == ROOT
    assert dockerfile.is_file()
    assert dockerfile.with_name(dockerfile.name + ".dockerignore").is_file()
    for line in dockerfile.read_text().splitlines():  # every COPY source is in the context
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (context / source).exists(), f"{dockerfile.name}: COPY {source}"


def test_published_ports_bind_loopback_only() -> None:
    for name, service in services().items():
        for port in service.get("ports", []):
            assert re.fullmatch(r"127\.0\.0\.1:\d+:\d+", str(port)), (name, port)


def test_policyd_dockerfile() -> None:
    text = (DOCKER / "Dockerfile").read_text()
    # the base is a build argument (tests/compose builds on an imported one), python by default
    assert re.search(r"^ARG BASE=python:3\.11-slim$", text, re.M)
    assert re.search(r"^FROM \$\{BASE\}$", text, re.M)
    user = re.findall(r"^USER (\S+)$", text, re.M)
    assert user and not user[-1].startswith(("root", "0:", "0")), user
    assert ('ENTRYPOINT ["policyd", "run", "--config", "/etc/policyd/settings.yaml"]'
            in text)
    targets = dict((t, s) for s, t in mounts(services()["policyd"]))
    assert targets["/etc/policyd/settings.yaml"] == "./policyd/settings.yaml"
    assert "/var/run/docker.sock" in targets


def test_trainer_uses_the_example_cli() -> None:
    example = (ROOT / "exporters" / "examples" / "train_mnist_like.py").read_text()
    dockerfile = (DOCKER / "trainer.Dockerfile").read_text()
    flags = set(re.findall(r"--[a-z-]+", " ".join(services()["trainer"]["command"])))
    flags |= set(re.findall(r'"(--[a-z-]+)"', dockerfile))
    for flag in flags:
        assert f"  {flag} " in example, f"train_mnist_like.py has no {flag}"
    assert services()["trainer"]["labels"]["app"] == "train"


def test_prometheus_scrapes_services_on_their_ports() -> None:
    config = yaml.safe_load((DOCKER / "prometheus.yml").read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert {"cadvisor", "training", "policyd"} <= set(jobs)
    targets = [t for job in jobs.values() for sc in job["static_configs"] for t in sc["targets"]]
    targets += [t for am in config["alerting"]["alertmanagers"]
                for sc in am["static_configs"] for t in sc["targets"]]
    for target in targets:
        host, port = target.split(":")
        assert host in services(), target
        assert int(port) in container_ports(services()[host]), target
    mounted = dict((t, s) for s, t in mounts(services()["prometheus"]))
    for rule_file in config["rule_files"]:
        assert mounted[f"/etc/prometheus/{rule_file}"] == f"../prometheus/{rule_file}"


def test_promtool_check_config(tmp_path: Path) -> None:
    shutil.copy(DOCKER / "prometheus.yml", tmp_path)
    shutil.copy(ROOT / "deploy" / "prometheus" / "policyd-rules.yml", tmp_path)
    output = run("promtool", "check", "config", "prometheus.yml", cwd=tmp_path)
    assert "SUCCESS" in output


def test_amtool_check_config() -> None:
    assert "SUCCESS" in run("amtool", "check-config", "alertmanager.yml", cwd=DOCKER)


def test_policies_validate() -> None:
    out, err = io.StringIO(), io.StringIO()
    files = [str(p) for p in sorted((DOCKER / "policies").glob("*.yaml"))]
    assert files
    assert main(["validate", *files], out=out, err=err) == 0, err.getvalue()


def test_settings_load_and_point_at_the_stack() -> None:
    settings = load_settings(DOCKER / "policyd" / "settings.yaml")
    assert settings.alertmanager is not None
    assert settings.alertmanager.url == "http://alertmanager:9093"
    assert settings.prometheus.url == "http://prometheus:9090"
    assert settings.http.addr == "0.0.0.0"
    assert settings.http.port in container_ports(services()["policyd"])
    mounted = {t for _, t in mounts(services()["policyd"])}
    for policy in settings.policies:  # each policy file is inside a mounted directory
        assert any(str(policy).startswith(t + "/") for t in mounted), policy
    for host in settings.docker.hosts.values():
        assert host.url.removeprefix("unix://") in mounted
    key, _, value = settings.docker.managed_label.partition("=")
    assert services()["trainer"]["labels"][key] == (value or "true")
