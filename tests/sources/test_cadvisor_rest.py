"""The cadvisor-rest source and its HTTP client over real HTTP: a server on 127.0.0.1 answers
as cAdvisor does, from the real payloads of payloads/cadvisor/, and as Prometheus does for the
evaluation range query."""

from __future__ import annotations

import copy
import logging
import math
import socket
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any

import numpy as np
import pytest

from policyd.model import Markers
from policyd.sources.cadvisor import CadvisorClient
from policyd.sources.cadvisor_info import cpu_samples, parse_timestamp
from policyd.sources.cadvisor_source import CadvisorRestSource, cadvisor_rest_source
from policyd.sources.errors import SourceError
from tests.sources.builders import envelope, flowcon, series
from tests.sources.cadvisor_server import Fault, Stub, load, refused, serving

AGENT_NOW = parse_timestamp("2016-06-17T16:07:10Z")
OTEL_NOW = parse_timestamp("2019-04-09T22:26:43Z")
AGENT_ID = "1d6e5db3abbfbb69718899748a882e2519da5b5d798b4b6bf1ec7dd6b5f26a60"
OTEL_ID = "573ee6cd04a6208af809b2329652c74386f1992faca8662c733d7f250014e718"


def agent_info() -> dict[str, Any]:
    return dict(load("ddagent_metrics_1.2_trimmed.json")[1])


def otel_info(which: str = "Pre") -> dict[str, Any]:
    (info,) = load(f"otel_{which}InfoContainer.json").values()
    return dict(info)


def loss(container: str, now: float, step: float = 20.0, count: int = 6) -> dict[str, Any]:
    """The exporter's evaluation series of one container, ending at `now`."""
    times = [now - step * k for k in range(count - 1, -1, -1)]
    return series({"__name__": "training_loss", "container": container, "job": "training"},
                  [2.0 - 0.1 * k for k in range(count)], times)


def free_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as s:
        yield s


def source(prometheus: str, hosts: dict[str, str], now: float, **kw: Any) -> CadvisorRestSource:
    return CadvisorRestSource(prometheus, hosts, timeout_seconds=1, retries=1,
                              retry_backoff_seconds=0, clock=lambda: now, **kw)


def test_two_hosts_one_snapshot_from_a_fixed_number_of_requests(stack: ExitStack) -> None:
    agent = agent_info()
    prom = Stub(prometheus=envelope([loss(agent["aliases"][0], AGENT_NOW)]))
    w1 = Stub(docker=[agent], machine=load("ddagent_machine_info_1.2.json"))
    w2 = Stub(docker=[otel_info()], machine=load("cadvisor_client_test_machine.json"))
    urls = {name: stack.enter_context(serving(stub))
            for name, stub in (("prom", prom), ("w1", w1), ("w2", w2))}
    src = source(urls["prom"], {"w1": urls["w1"], "w2": urls["w2"]}, AGENT_NOW)
    stack.callback(src.close)
    snap = src.snapshot([flowcon()])

    assert {n.name: n.cpu_capacity for n in snap.nodes} == {"w1": 2.0, "w2": 8.0}
    (job,) = snap.containers
    assert (job.id, job.node) == (agent["aliases"][0], "w1")
    assert job.started_at == pytest.approx(parse_timestamp("2016-06-16T13:56:08.429573036Z"))
    assert job.cpu_allocation == 256 / 1024  # shares: a fraction f of the node is f * 1024
    assert job.labels["io.kubernetes.pod.name"] == "dd-agent-1rxlh"
    assert job.labels["job"] == "training" and "__name__" not in job.labels
    assert job.markers == Markers()
    times, cpu, _ = cpu_samples(agent["stats"])
    assert job.cpu_usage.values[0] == pytest.approx(np.diff(cpu)[0] / np.diff(times)[0])
    assert (job.cpu_usage.times_seconds - AGENT_NOW).tolist() == [-60.0, -40.0, -20.0, 0.0]
    usage = {n.name: n.cpu_usage for n in snap.nodes}
    assert usage == {"w1": pytest.approx(job.cpu_usage.values[-1]), "w2": 0.0}  # w2 is stale
    assert any("1 Docker containers have no evaluation series" in w and "k8s_ubuntu" in w
               for w in src.last_warnings)
    # The loss and the steps (two range queries) and the progress ratio; per host one POST
    # and, the first time only, the machine info.
    assert [(m, p) for m, p, _ in prom.requests] == [
        ("GET", "/api/v1/query_range"), ("GET", "/api/v1/query_range"), ("GET", "/api/v1/query")]
    for stub in (w1, w2):
        assert [(m, p) for m, p, _ in stub.requests] == [
            ("GET", "/api/v1.3/machine"), ("POST", "/api/v1.3/docker/")]
    body = w1.requests[1][2]
    assert body == {"num_stats": -1, "start": "2016-06-17T16:05:10Z"}  # window start - a step

    src.snapshot([flowcon()])
    assert [p for _, p, _ in w1.requests[2:]] == ["/api/v1.3/docker/"]
    assert parse_timestamp(w1.requests[2][2]["start"]) == pytest.approx(
        parse_timestamp("2016-06-17T16:07:05.989800285Z") - 5.0, abs=1e-5)


def test_samples_across_cycles_join_by_short_id(stack: ExitStack) -> None:
    """Two cycles of the otel payloads (one sample each, one second apart): the second cycle
    has a counter to read; the exporter names the container by its short id."""
    prom = Stub(prometheus=envelope([loss(OTEL_ID[:12], OTEL_NOW, step=1.0)]))
    host = Stub(docker=[otel_info("Pre")], machine=load("cadvisor_client_test_machine.json"))
    urls = [stack.enter_context(serving(s)) for s in (prom, host)]
    src = source(urls[0], {"w1": urls[1]}, OTEL_NOW)
    stack.callback(src.close)
    policy = flowcon(interval_seconds=1)

    (first,) = src.snapshot([policy]).containers
    assert first.id.startswith("k8s_ubuntu_stress-1-core") and len(first.cpu_usage) == 0
    assert any("no CPU samples cover the window yet" in w for w in src.last_warnings)
    assert first.cpu_allocation == pytest.approx(2 / 1024)
    assert first.labels["container"] == OTEL_ID[:12]

    host.docker = [otel_info("Cur")]
    (second,) = src.snapshot([policy]).containers
    # 10,000,000 ns of CPU in the second between the two samples, read in (42, 43].
    assert second.cpu_usage.times_seconds.tolist() == [OTEL_NOW]
    assert second.cpu_usage.values == pytest.approx([0.01])


def hostile(info: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(info)
    labels = out["spec"]["labels"]
    labels.update({
        "app": 'train"}) or vector(1) #\n\\',
        "policyd.io/migrated": " TRUE ",
        "policyd.io/converged_at": "nan",
        "policyd.io/last_action_at": "1466179000",
        "weird\nkey": "\u2603" * 3000,
        "a number": 5,
        "a null": None,
        "a list": [1, 2],
    })
    out["aliases"][0] = 'job "x"\n\u00e9'
    return out


def test_hostile_labels_and_names_break_nothing(stack: ExitStack) -> None:
    info = hostile(agent_info())
    name = info["aliases"][0]
    prom = Stub(prometheus=envelope([loss(name, AGENT_NOW),
                                     loss('{nope="1"}\n' + "z" * 500, AGENT_NOW)]))
    host = Stub(docker=[info], machine=load("ddagent_machine_info_1.2.json"))
    urls = [stack.enter_context(serving(s)) for s in (prom, host)]
    extra = {AGENT_ID: Markers(rebalanced=True, last_action_at=1466179500.0)}
    src = source(urls[0], {"w1": urls[1]}, AGENT_NOW, extra_markers=lambda: extra)
    stack.callback(src.close)
    (job,) = src.snapshot([flowcon()]).containers
    assert job.id == name
    assert job.labels["app"] == 'train"}) or vector(1) #\n\\'
    assert job.labels["weird\nkey"] == "\u2603" * 3000
    assert job.labels["a number"] == "5" and "a null" not in job.labels
    assert "a list" not in job.labels
    assert job.markers == Markers(migrated=True, rebalanced=True, converged_at=None,
                                  last_action_at=1466179500.0)
    warned = "\n".join(src.last_warnings)
    assert "policyd.io/converged_at='nan' is not an epoch time" in warned
    assert "1 evaluation series name no Docker container" in warned
    assert all(len(w) < 2000 for w in src.last_warnings)


def _failing_host(stub: Stub | None, stack: ExitStack) -> tuple[CadvisorRestSource, Stub, str]:
    prom = Stub(prometheus=envelope([loss(agent_info()["aliases"][0], AGENT_NOW)]))
    good = Stub(docker=[agent_info()], machine=load("ddagent_machine_info_1.2.json"))
    prom_url, good_url = (stack.enter_context(serving(s)) for s in (prom, good))
    bad_url = free_url() if stub is None else stack.enter_context(serving(stub))
    src = source(prom_url, {"w1": good_url, "w2": bad_url}, AGENT_NOW)
    stack.callback(src.close)
    return src, good, bad_url


MACHINE = load("cadvisor_client_test_machine.json")

HOST_FAULTS = [
    pytest.param(None, "connection", "cannot connect", id="host-down"),
    pytest.param(Stub(machine=MACHINE, fault=Fault(status=404, body="404 page not found",
                                                    path="/api/v1.3/docker/")),
                 "http", "HTTP 404: 404 page not found", id="404"),
    pytest.param(Stub(machine=MACHINE, fault=Fault(status=500, body="failed to get all Docker "
                                                    "containers", path="/api/v1.3/docker/")),
                 "http", "gave up after retries", id="500-until-retries-run-out"),
    pytest.param(Stub(machine=MACHINE, fault=Fault(body="<html>oops</html>",
                                                    path="/api/v1.3/docker/")),
                 "bad_response", "not JSON", id="garbage"),
    pytest.param(Stub(machine=MACHINE, fault=Fault(body="[]", path="/api/v1.3/docker/")),
                 "bad_response", "container name -> ContainerInfo", id="not-a-map"),
    pytest.param(Stub(fault=Fault(body='{"memory_capacity": 1}', path="/api/v1.3/machine")),
                 "bad_response", "num_cores", id="machine-without-cores"),
    pytest.param(Stub(machine=MACHINE, fault=Fault(delay_seconds=1.5,
                                                    path="/api/v1.3/docker/")),
                 "timeout", "no answer in time", id="timeout"),
]


@pytest.mark.parametrize(("stub", "kind", "detail"), HOST_FAULTS)
def test_a_host_that_fails_is_one_clear_error_and_no_snapshot(
        stub: Stub | None, kind: str, detail: str, stack: ExitStack,
        caplog: pytest.LogCaptureFixture) -> None:
    src, good, bad_url = _failing_host(stub, stack)
    with caplog.at_level(logging.ERROR), pytest.raises(SourceError) as info:
        src.snapshot([flowcon()])
    err = info.value
    assert (err.kind, err.url) == (kind, bad_url)
    assert str(err).startswith(f"{bad_url}: cAdvisor of node w2: ")
    assert detail in str(err) and "\n" not in str(err)
    assert src.errors_total == {kind: 1}
    assert [r.getMessage() for r in caplog.records] == [f"cadvisor-rest source: {err}"]
    assert good.requests  # the other host was asked: the failure is the failing host's only


@pytest.mark.parametrize(("workers", "hosts_read"), [
    pytest.param(1, False, id="one-after-the-other"),
    pytest.param(None, True, id="default-together")])
def test_prometheus_failing_is_one_error(workers: int | None, hosts_read: bool,
                                         stack: ExitStack) -> None:
    host = Stub(docker=[agent_info()], machine=load("ddagent_machine_info_1.2.json"))
    host_url = stack.enter_context(serving(host))
    prom_url = free_url()
    bound = {} if workers is None else {"max_concurrent_queries": workers}
    src = source(prom_url, {"w1": host_url}, AGENT_NOW, **bound)
    stack.callback(src.close)
    with pytest.raises(SourceError) as info:
        src.snapshot([flowcon()])
    assert (info.value.kind, info.value.url) == ("connection", prom_url)
    # One after the other, the hosts come after the loss query; together, they are read while
    # it is out (docs/sources.md, "Queries in flight together"): the error is the same.
    assert bool(host.requests) is hosts_read


@pytest.mark.parametrize(("workers", "at_once", "host_asked"), [
    pytest.param(1, 1, (False, 3), id="one-after-the-other"),
    pytest.param(4, 3, (True, 0), id="together")])
def test_the_queries_go_together_up_to_the_bound_and_the_hosts_are_read_meanwhile(
        workers: int, at_once: int, host_asked: tuple[bool, int], stack: ExitStack) -> None:
    # The loss, the steps and the progress ratio, each held 0.3 s.
    agent = agent_info()
    prom = Stub(prometheus=envelope([loss(agent["aliases"][0], AGENT_NOW)]),
                query_delay_seconds=0.3, gather_queries=at_once)
    host = Stub(docker=[agent], machine=load("ddagent_machine_info_1.2.json"))
    prom_url, host_url = (stack.enter_context(serving(s)) for s in (prom, host))
    src = source(prom_url, {"w1": host_url}, AGENT_NOW, max_concurrent_queries=workers)
    stack.callback(src.close)
    seen: list[tuple[bool, int]] = []
    asked = src.clients["w1"].machine

    def machine() -> Any:  # the host's first request of the cycle
        seen.append(prom.seen_beside(3))
        return asked()
    src.clients["w1"].machine = machine  # type: ignore[method-assign]
    snap = src.snapshot([flowcon()])
    assert prom.most_in_flight == at_once and prom.answered == 3
    assert seen == [host_asked]
    assert [c.id for c in snap.containers] == [agent["aliases"][0]]


def test_the_evaluation_querys_failure_wins_though_a_host_fails_first(stack: ExitStack) -> None:
    prom = Stub(prometheus=envelope([]), query_faults={
        "training_loss": refused("the loss, late", delay_seconds=0.3)})
    prom_url = stack.enter_context(serving(prom))
    src = source(prom_url, {"w1": free_url()}, AGENT_NOW, max_concurrent_queries=4)
    stack.callback(src.close)
    with pytest.raises(SourceError) as info:
        src.snapshot([flowcon()])
    assert (info.value.url, info.value.kind) == (prom_url, "bad_data")
    assert "the loss, late" in str(info.value) and src.errors_total == {"bad_data": 1}


def test_client_sends_cadvisors_request_body(stack: ExitStack) -> None:
    stub = Stub(docker=[agent_info()], machine=MACHINE)
    url = stack.enter_context(serving(stub))
    client = CadvisorClient(url, node="w1", timeout_seconds=2)
    stack.callback(client.close)
    since = parse_timestamp("2016-06-17T16:06:30.5Z")
    answer = client.docker_containers(since_seconds=since)
    (info,) = answer.values()
    assert [s["timestamp"] for s in info["stats"]] == [
        "2016-06-17T16:06:34.752028641Z", "2016-06-17T16:06:52.101541457Z",
        "2016-06-17T16:07:05.989800285Z"]
    assert stub.requests == [("POST", "/api/v1.3/docker/",
                              {"num_stats": -1, "start": "2016-06-17T16:06:30.500000Z"})]
    assert client.machine() == {"num_cores": 8, "memory_capacity": 31625871360}


@pytest.mark.parametrize(("urls", "problem"), [
    pytest.param({}, "no cAdvisor given", id="none"),
    pytest.param({"w1": "cadvisor:8080"}, "is not an http:// or https:// URL", id="no-scheme"),
    pytest.param({" ": "http://127.0.0.1:8080"}, "the node name is empty", id="empty-node"),
])
def test_the_factory_lists_every_problem_with_the_map(urls: dict[str, str],
                                                      problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        cadvisor_rest_source("http://127.0.0.1:9090", urls, timeout_seconds=1)


def test_the_factory_builds_a_source() -> None:
    src = cadvisor_rest_source("http://127.0.0.1:9090/", {"w1": "http://127.0.0.1:8080/"},
                               timeout_seconds=3, extra_markers=dict)
    try:
        assert src.url == "http://127.0.0.1:9090"
        assert src.clients["w1"].base_url == "http://127.0.0.1:8080"
        assert src.clients["w1"].timeout_seconds == 3
        assert math.isclose(src.clients["w1"].timeout_seconds, 3)
    finally:
        src.close()
