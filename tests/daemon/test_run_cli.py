"""`policyd run` as users run it: the simulator (as a subprocess, and in-process with
`--once`), the docker backend's `--once` through fakes, and broken settings."""

from __future__ import annotations

import io
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from policyd.cli import main
from policyd.daemon import DaemonSettings, DockerHost, DockerSection, PrometheusSettings, run
from policyd.daemon.backend import Parts
from policyd.daemon.settings import HttpSettings
from tests.daemon.fakes import FakeActuator, FakeSource, one_to_limit, policy_yaml

ROOT = Path(__file__).resolve().parents[2]


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def settings_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "settings.yaml"
    path.write_text(text)
    return path


def test_simulated_run_as_a_subprocess(tmp_path: Path) -> None:
    path = settings_file(tmp_path, "http: {port: 0}\nsimulation: {speed: max}\n"
                                   "log_level: warning\n")
    done = subprocess.run([sys.executable, "-m", "policyd", "run", "--config", str(path)],
                          capture_output=True, text=True, timeout=60, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("simulating flowcon-fixed-3 (seed 1, speed max)")
    ticks = [line for line in lines if line.startswith("t=")]
    assert len(ticks) > 5
    assert any("job-1 cpu 0.25 (shares)" in line for line in ticks)
    assert "results under policy flowcon-fixed-3: makespan" in done.stdout
    for job in ("job-1", "job-2", "job-3"):
        assert any(line.startswith(f"{job} ") for line in lines), job


def test_simulated_once_runs_each_policys_first_tick(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(policy_yaml("mine", interval=30))
    path = settings_file(tmp_path, "policies: [p.yaml]\nhttp: {enabled: false}\n"
                                   "simulation: {speed: max}\n")
    code, out, err = cli("run", "--config", str(path), "--once")
    assert (code, err) == (0, "")
    ticks = [line for line in out.splitlines() if line.startswith("t=")]
    assert len(ticks) == 1 and "mine: no actions; next in 30 s" in ticks[0]
    assert "results" not in out


def test_policies_of_any_kind_run_together_in_the_simulated_world(tmp_path: Path) -> None:
    path = settings_file(tmp_path, "http: {enabled: false}\n"
                                   "simulation: {scenario: flowcon-fixed-3, speed: max}\n"
                                   f"policies: [{ROOT / 'policies' / 'thesis-flowcon.yaml'}, "
                                   f"{ROOT / 'policies' / 'thesis-specon.yaml'}]\n")
    code, out, err = cli("run", "--config", str(path), "--once")
    assert (code, err) == (0, "")
    ticked = [line.split()[2] for line in out.splitlines() if line.startswith("t=")]
    assert sorted(ticked) == ["thesis-flowcon:", "thesis-specon:"]  # one world, both policies


def test_broken_settings_exit_1_with_every_problem(tmp_path: Path) -> None:
    path = settings_file(tmp_path, "backend: kubernetes\nhttp: {port: -3}\n")
    code, out, err = cli("run", "--config", str(path))
    assert (code, out) == (1, "")
    assert err.splitlines() == [  # no policy file: the policy resources may be all there is
        f"{path}:1: backend: the kubernetes backend needs prometheus.url (where the training "
        "jobs' loss and CPU are scraped)",
        f"{path}:2: http.port: -3 is not allowed: must be at least 0",
        "policyd run: the settings file is invalid; nothing started",
    ]


def test_invalid_policy_file_starts_nothing(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("kind: FlowCom\n")
    path = settings_file(tmp_path, "policies: [p.yaml]\nhttp: {enabled: false}\n")
    code, _, err = cli("run", "--config", str(path), "--once")
    assert code == 1
    *problems, last = err.splitlines()
    assert all(line.startswith(f"{tmp_path / 'p.yaml'}:1: ") for line in problems)
    assert last == f"policyd run: {len(problems)} problems in the policy files; nothing started"


def test_docker_backend_once_with_fakes(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(policy_yaml() + "---\n" + policy_yaml("dry", dry_run=True))
    settings = DaemonSettings(
        policies=(tmp_path / "p.yaml",), backend="docker",
        prometheus=PrometheusSettings(url="http://127.0.0.1:9"),
        docker=DockerSection(hosts={"w1": DockerHost(url="unix:///nonexistent.sock")}),
        http=HttpSettings(enabled=False))
    actuator = FakeActuator()
    out = io.StringIO()
    code = run(settings, out=out, stop=threading.Event(), once=True,
               parts=Parts(source=FakeSource(one_to_limit), actuator=actuator, events=None))
    assert code == 0
    assert out.getvalue().splitlines() == [
        "policy fc: ok, 1 actions (0 failed), next interval 20 s",
        "policy dry: ok, 1 actions (0 failed), next interval 20 s [dry run]",
    ]
    assert [a.policy for a in actuator.applied] == ["fc"]

    failing = FakeSource(one_to_limit, fail=1)
    code = run(settings, out=io.StringIO(), stop=threading.Event(), once=True,
               parts=Parts(source=failing, actuator=FakeActuator(), events=None))
    assert code == 1


def test_the_simulated_daemon_times_its_ticks() -> None:
    registry = CollectorRegistry()
    code = run(DaemonSettings(http=HttpSettings(enabled=False)), out=io.StringIO(),
               stop=threading.Event(), once=True, registry=registry)
    assert code == 0
    count = registry.get_sample_value("policyd_tick_duration_seconds_count",
                                      {"policy": "flowcon-fixed-3"})
    total = registry.get_sample_value("policyd_tick_duration_seconds_sum",
                                      {"policy": "flowcon-fixed-3"})
    assert count == 1 and total is not None and total > 0


@pytest.mark.parametrize("bound", [1, 4])
def test_the_prometheus_source_sends_as_many_queries_at_once_as_the_settings_say(
        bound: int) -> None:
    from policyd.daemon.backend import prometheus_source  # noqa: PLC0415
    from policyd.sources.prometheus import PrometheusSource  # noqa: PLC0415

    source = prometheus_source(PrometheusSettings(url="http://127.0.0.1:9", profile="process",
                                                  max_concurrent_queries=bound))
    assert isinstance(source, PrometheusSource) and source.max_concurrent_queries == bound


@pytest.mark.parametrize("profile", ["docker-stats", "cadvisor-rest"])
def test_the_other_docker_sources_send_as_many_queries_at_once_as_the_settings_say(
        profile: str, tmp_path: Path) -> None:
    from policyd.daemon.backend import docker_parts  # noqa: PLC0415

    (tmp_path / "p.yaml").write_text(policy_yaml())
    cadvisor = {"w1": "http://127.0.0.1:9"} if profile == "cadvisor-rest" else {}
    settings = DaemonSettings(
        policies=(tmp_path / "p.yaml",), backend="docker",
        prometheus=PrometheusSettings(url="http://127.0.0.1:9", profile=profile,
                                      cadvisor=cadvisor, max_concurrent_queries=3),
        docker=DockerSection(hosts={"w1": DockerHost(url="tcp://127.0.0.1:9")}),
        http=HttpSettings(enabled=False))
    source = docker_parts(settings).source
    try:
        assert getattr(source, "max_concurrent_queries", None) == 3
    finally:
        source.close()  # type: ignore[attr-defined]


def test_the_docker_backend_reads_cadvisor_rest_when_the_settings_say_so(tmp_path: Path) -> None:
    from policyd.daemon.backend import docker_parts  # noqa: PLC0415
    from policyd.sources.cadvisor_source import CadvisorRestSource  # noqa: PLC0415

    (tmp_path / "p.yaml").write_text(policy_yaml())
    settings = DaemonSettings(
        policies=(tmp_path / "p.yaml",), backend="docker",
        prometheus=PrometheusSettings(url="http://127.0.0.1:9", profile="cadvisor-rest",
                                      cadvisor={"w1": "http://127.0.0.1:9"}),
        # nothing listens there: recovery fails and is retried later. (Not a missing unix socket:
        # docker-py's unix transport drops the socket of a failed connect unclosed, inside the
        # traceback's cycle, and a later test's garbage collection reported it.)
        docker=DockerSection(hosts={"w1": DockerHost(url="tcp://127.0.0.1:9")}),
        http=HttpSettings(enabled=False))
    parts = docker_parts(settings)
    assert isinstance(parts.source, CadvisorRestSource)
    assert not parts.sees_held_jobs  # a Deadline policy is warned: only docker-stats lists them
