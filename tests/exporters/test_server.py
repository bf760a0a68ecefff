"""serve(): a real HTTP GET of /metrics on 127.0.0.1 with an ephemeral port."""

from __future__ import annotations

import urllib.error

import pytest
from policyd_exporters import Identity, TrainingMetrics, serve
from prometheus_client.registry import CollectorRegistry

from tests.exporters.scrape import get, parse, value


def test_metrics_over_http() -> None:
    registry = CollectorRegistry()
    m = TrainingMetrics(Identity(job_name="vae-1"), registry=registry, smoothing_steps=2)
    with serve(0, addr="127.0.0.1", registry=registry) as server:
        assert server.port > 0
        assert server.url == f"http://127.0.0.1:{server.port}/metrics"
        m.observe(3.0)
        m.observe(1.0)
        samples = parse(get(server.url))
        assert value(samples, "policyd_training_loss") == 2.0
        assert samples["policyd_training_steps_total"] == [({"job_name": "vae-1"}, 2.0)]
        m.observe(0.0)
        assert value(parse(get(server.url)), "policyd_training_loss") == 0.5
    with pytest.raises(urllib.error.URLError):
        get(server.url)  # closed: the port is released


def test_addr_is_required() -> None:
    with pytest.raises(TypeError):
        serve(0)  # type: ignore[call-arg]
