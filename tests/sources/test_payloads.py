"""The recorded (hand-written, documented-shape) payloads through the real clients."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import requests
import responses

from policyd.sources import SourceError, cadvisor_docker
from policyd.sources import cadvisor as cad
from policyd.sources.prometheus import PrometheusSource
from tests.sources.builders import NOW, flowcon

PAYLOADS = Path(__file__).parent / "payloads"
CADVISOR = "http://cadvisor.test:8080"
ID = "3f2a1b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708"


def load(name: str) -> Any:
    return json.loads((PAYLOADS / name).read_text())


@responses.activate
def test_docker_profile_on_recorded_prometheus_answers() -> None:
    url = "http://prometheus.test:9090"
    for name in ("evaluation", "cpu"):
        responses.add(responses.GET, f"{url}/api/v1/query_range",
                      json=load(f"prometheus_docker_{name}.json"))
    responses.add(responses.GET, f"{url}/api/v1/query", json=load("prometheus_docker_facts.json"))
    src = PrometheusSource(url, cadvisor_docker(node_names={"10.0.0.5:8080": "w1"}),
                           clock=lambda: NOW)
    snap = src.snapshot([flowcon(mode="quota")])
    by_id = {c.id: c for c in snap.containers}
    assert set(by_id) == {"vae-1", "resnet-1"}  # resnet's exporter names it by short id
    vae, resnet = by_id["vae-1"], by_id["resnet-1"]
    assert (vae.node, vae.markers.migrated, vae.markers.converged_at) == ("w1", True, 1.7e9 + 100)
    assert vae.cpu_allocation == 1.0  # quota mode, no quota set
    assert resnet.cpu_allocation == 4 / 16 and resnet.node == "10.0.0.6"
    assert {n.name: (n.cpu_capacity, n.cpu_usage) for n in snap.nodes} == {
        "w1": (8.0, 1.4973), "10.0.0.6": (16.0, pytest.approx(0.35))}
    assert any("resnet-1: evaluation has 1 NaN/Inf" in w for w in src.last_warnings)
    assert any("cache" in w for w in src.last_warnings)


def test_timestamps_with_nanoseconds() -> None:
    assert cad.parse_timestamp("2026-11-02T10:00:01.123456789Z") == pytest.approx(
        1793613601.123456789)
    assert cad.parse_timestamp("2026-11-02T11:00:01+01:00") == 1793613601.0
    with pytest.raises(ValueError):
        cad.parse_timestamp("yesterday")


@responses.activate
def test_v2_stats_give_cores_per_sample_across_a_restart() -> None:
    responses.add(responses.GET, f"{CADVISOR}/api/v2.0/stats/{ID}",
                  json=load("cadvisor_v2_stats_docker.json"))
    client = cad.CadvisorClient(CADVISOR, 5, retry_backoff_seconds=0)
    (series,) = cad.cpu_series_v2(client, [ID], count=8).values()
    assert responses.calls[0].request.params == {"type": "docker", "count": "8"}
    # 5 intervals at 1.5 cores; the restart pair is dropped; then 0.5 cores.
    assert series.values == pytest.approx([1.5] * 5 + [0.5], rel=1e-6)


def test_cores_over_intervals_interpolate_the_counter() -> None:
    stats = load("cadvisor_v2_stats_docker.json")["vae-1"]
    t0 = cad.parse_timestamp(stats[0]["timestamp"])
    series = cad.cores_over_intervals(stats, [t0 + 0.5, t0 + 2.5, t0 + 4.5, t0 + 6.5])
    assert series.values == pytest.approx([1.5, 1.5])  # the last one spans the restart


@responses.activate
def test_v13_docker_and_container_endpoints() -> None:
    responses.add(responses.GET, f"{CADVISOR}/api/v1.3/docker/{ID}",
                  json=load("cadvisor_v13_docker.json"))
    responses.add(responses.GET, f"{CADVISOR}/api/v1.3/containers/docker/{ID}",
                  json=load("cadvisor_v13_container.json"))
    client = cad.CadvisorClient(CADVISOR, 5)
    (series,) = cad.cpu_series_v13(client, [ID]).values()
    assert series.values == pytest.approx([1.5] * 5, rel=1e-6)
    info = client.container_v13(f"/docker/{ID}")
    assert cad.names_of_info(info) == (f"/docker/{ID}", "vae-1", ID)


CADVISOR_ERRORS = [
    pytest.param(requests.exceptions.ConnectionError("refused"), 200, "connection",
                 id="connection"),
    pytest.param(requests.exceptions.ConnectTimeout("slow"), 200, "timeout", id="timeout"),
    pytest.param("unknown container", 500, "http", id="500-until-retries-run-out"),
    pytest.param("not found", 404, "http", id="404"),
    pytest.param("<html>", 200, "bad_response", id="garbage"),
    pytest.param(json.dumps({"vae-1": {"not": "a list"}}), 200, "bad_response", id="shape"),
]


@pytest.mark.parametrize(("body", "status", "kind"), CADVISOR_ERRORS)
def test_cadvisor_errors_are_one_source_error(body: Any, status: int, kind: str) -> None:
    with responses.RequestsMock() as rsps:
        rsps.add(responses.GET, f"{CADVISOR}/api/v2.0/stats/{ID}", body=body, status=status)
        with pytest.raises(SourceError) as info:
            cad.CadvisorClient(CADVISOR, 5, retry_backoff_seconds=0).stats_v2(ID, 3)
    assert info.value.kind == kind and CADVISOR in str(info.value)


def test_cadvisor_500_then_success() -> None:
    with responses.RequestsMock(registry=responses.registries.OrderedRegistry) as rsps:
        url = f"{CADVISOR}/api/v2.0/stats/{ID}"
        rsps.add(responses.GET, url, status=500, body="busy")
        rsps.add(responses.GET, url, json=load("cadvisor_v2_stats_docker.json"))
        stats = cad.CadvisorClient(CADVISOR, 5, retry_backoff_seconds=0).stats_v2(ID, 8)
    assert list(stats) == ["vae-1"]


def test_empty_stats_give_an_empty_series() -> None:
    assert len(cad.cores_per_sample([])) == 0
    assert len(cad.cores_over_intervals([], [0.0, 1.0])) == 0
