"""The kubernetes() profile on real Prometheus answers for a cluster: the snapshot and the
warnings are the recorded ones, field for field (payloads/kubernetes_cluster/, README.md there).

The answers are Prometheus 2.42's own to the eight queries of a cycle over the series of
tests/integration/cluster_series.py (the kubelet's and kube-state-metrics' whole label sets),
cut to two nodes; `snapshot.json` is what the parser built from them before it was made faster.
A change to the parser that alters any container, series, label, marker or warning fails here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import responses

from policyd.model.codec import snapshot_to_dict
from policyd.policy import load_policies
from policyd.sources import kubernetes
from policyd.sources.prometheus import PrometheusSource
from policyd.sources.promql import build_queries

CLUSTER = Path(__file__).parent / "payloads" / "kubernetes_cluster"
URL = "http://prometheus.test:9090"


def test_recorded_answers_give_the_recorded_snapshot() -> None:
    now = json.loads((CLUSTER / "queries.json").read_text())["now"]
    policies = load_policies(CLUSTER / "policy.yaml")
    queries = build_queries(policies, kubernetes(), now_seconds=now)
    bodies = {query: (CLUSTER / f"{name.replace(':', '_')}.json").read_text()
              for name, query in queries.labelled()}

    def answer(request: Any) -> tuple[int, dict[str, str], str]:
        (query,) = parse_qs(urlparse(request.url).query)["query"]
        return 200, {}, bodies[query]

    with responses.RequestsMock() as rsps:
        for endpoint in ("query", "query_range"):
            rsps.add_callback(responses.GET, f"{URL}/api/v1/{endpoint}", callback=answer)
        parsed = PrometheusSource(URL, kubernetes(), clock=lambda: now).observe(policies)
        assert len(rsps.calls) == queries.count == 8
    got = {"snapshot": snapshot_to_dict(parsed.snapshot), "warnings": list(parsed.warnings)}
    assert len(got["snapshot"]["containers"]) == 20
    assert json.dumps(got, sort_keys=True, indent=1) + "\n" == (
        CLUSTER / "snapshot.json").read_text()
