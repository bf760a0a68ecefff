"""The Prometheus payloads of payloads/ (documented shape) through the real client.

cAdvisor's REST payloads (real ones) are in payloads/cadvisor/: test_cadvisor_info.py and
test_cadvisor_rest.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import responses

from policyd.sources import cadvisor_docker
from policyd.sources.prometheus import PrometheusSource
from tests.sources.builders import NOW, flowcon

PAYLOADS = Path(__file__).parent / "payloads"


def load(name: str) -> Any:
    return json.loads((PAYLOADS / name).read_text())


@responses.activate
def test_docker_profile_on_recorded_prometheus_answers() -> None:
    url = "http://prometheus.test:9090"
    # one answer per query (mode quota: the limit, not the shares), whatever the order the
    # source asks in (the cycle's queries are in flight together)
    answers = {"query_range": {"policyd_training_loss": "evaluation",
                               "container_cpu_usage_seconds_total": "cpu"},
               "query": {"machine_cpu_cores": "capacity",
                         "container_start_time_seconds": "started_at",
                         "container_spec_cpu_quota": "limit_cores"}}

    def answer(request: Any) -> tuple[int, dict[str, str], str]:
        (query,) = parse_qs(urlparse(request.url).query)["query"]
        endpoint = urlparse(request.url).path.rsplit("/", 1)[1]
        (name,) = [f for metric, f in answers[endpoint].items() if metric in query]
        return 200, {}, json.dumps(load(f"prometheus_docker_{name}.json"))

    for endpoint in answers:
        responses.add_callback(responses.GET, f"{url}/api/v1/{endpoint}", callback=answer)
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
