"""`policyd plan --prometheus URL --source-profile cadvisor-rest --cadvisor NODE=URL`, against
a local server answering as cAdvisor (real payloads) and Prometheus do."""

from __future__ import annotations

import io
import json
import socket
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from policyd.cli import main
from tests.sources.builders import envelope, series
from tests.sources.cadvisor_server import Stub, load, serving

POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: FlowCon
metadata: {name: flowcon}
spec: {interval_seconds: 20, window_intervals: 5}
"""


def loss_now(params: dict[str, str]) -> dict[str, Any]:
    """The evaluation series of the dd-agent container at the query's own steps."""
    start, end, step = float(params["start"]), float(params["end"]), float(params["step"])
    times = [start + step * k for k in range(round((end - start) / step) + 1)]
    name = load("ddagent_metrics_1.2_trimmed.json")[1]["aliases"][0]
    return envelope([series({"container": name}, [3.0 / (1 + k) for k in range(len(times))],
                            times)])


def plan(*args: str, policy: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["plan", "--policy", str(policy), *args], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return path


def test_plan_decides_from_cadvisor_and_prometheus(policy: Path, tmp_path: Path) -> None:
    prom = Stub(prometheus=loss_now)
    host = Stub(docker=[load("ddagent_metrics_1.2_trimmed.json")[1]],
                machine=load("ddagent_machine_info_1.2.json"))
    with ExitStack() as stack:
        prom_url, host_url = (stack.enter_context(serving(s)) for s in (prom, host))
        saved = tmp_path / "seen.json"
        code, out, err = plan("--prometheus", prom_url, "--source-profile", "cadvisor-rest",
                              "--cadvisor", f"w1={host_url}", "--output", "json",
                              "--save-snapshot", str(saved), policy=policy)
    assert code == 0, err
    decision = json.loads(out)
    snapshot = json.loads(saved.read_text())
    (container,) = snapshot["containers"]
    assert container["node"] == "w1" and container["cpu_allocation"] == 0.25
    assert snapshot["nodes"] == [{"name": "w1", "cpu_capacity": 2.0, "cpu_usage": 0.0}]
    # The samples are from 2016: nothing covers today's window, and the output says so.
    assert "no CPU samples cover the window yet" in err
    assert decision["actions"] == []
    assert [m for m, _, _ in host.requests] == ["GET", "POST"]


@pytest.mark.parametrize(("bound", "at_once"), [
    pytest.param([], 2, id="default-two-at-once"),
    pytest.param(["--max-concurrent-queries", "1"], 1, id="one-after-the-other"),
    pytest.param(["--max-concurrent-queries", "3"], 3, id="three-at-once")])
def test_max_concurrent_queries_reaches_the_source(policy: Path, bound: list[str],
                                                   at_once: int) -> None:
    """The loss and the progress pair, held a while by the fake Prometheus, go out together
    up to the bound (the cAdvisors read meanwhile)."""
    prom = Stub(prometheus=loss_now, query_delay_seconds=0.3)
    host = Stub(docker=[load("ddagent_metrics_1.2_trimmed.json")[1]],
                machine=load("ddagent_machine_info_1.2.json"))
    with ExitStack() as stack:
        prom_url, host_url = (stack.enter_context(serving(s)) for s in (prom, host))
        code, _, err = plan("--prometheus", prom_url, "--source-profile", "cadvisor-rest",
                            "--cadvisor", f"w1={host_url}", *bound, policy=policy)
    assert code == 0, err
    assert prom.most_in_flight == at_once


def _free_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize(("args", "message"), [
    pytest.param(["--source-profile", "cadvisor-rest"],
                 "--cadvisor: no cAdvisor given: name at least one NODE=URL\n", id="none"),
    pytest.param(["--source-profile", "cadvisor-docker", "--cadvisor", "w1=http://h:8080"],
                 "--cadvisor goes with --source-profile cadvisor-rest\n", id="wrong-profile"),
    pytest.param(["--source-profile", "cadvisor-rest", "--cadvisor", "w1", "--cadvisor", "=x"],
                 "--cadvisor 'w1': expected NODE=URL\n--cadvisor '=x': expected NODE=URL\n",
                 id="not-pairs"),
    pytest.param(["--source-profile", "cadvisor-rest", "--cadvisor", "w1=h:8080"],
                 "--cadvisor: cAdvisor of node 'w1': 'h:8080' is not an http:// or https:// "
                 "URL with a host\n", id="not-a-url"),
])
def test_bad_cadvisor_options_are_clear_messages(args: list[str], message: str,
                                                 policy: Path) -> None:
    code, out, err = plan("--prometheus", "http://127.0.0.1:9", *args, policy=policy)
    assert (code, out, err) == (1, "", message)


def test_a_host_down_is_one_clear_error_and_no_decision(
        policy: Path, caplog: pytest.LogCaptureFixture) -> None:
    prom = Stub(prometheus=loss_now)
    down = _free_url()
    with serving(prom) as prom_url:
        code, out, err = plan("--prometheus", prom_url, "--source-profile", "cadvisor-rest",
                              "--cadvisor", f"w1={down}", "--prometheus-timeout-seconds", "2",
                              policy=policy)
    assert (code, out) == (1, "")
    assert err.endswith("policyd plan: no decision: the snapshot could not be read from "
                        "Prometheus and cAdvisor\n")
    (record,) = [r for r in caplog.records if r.levelname == "ERROR"]
    assert f"{down}: cAdvisor of node w1: GET '/api/v1.3/machine' failed (connection)" in (
        record.getMessage())
