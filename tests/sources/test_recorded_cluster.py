"""The kubernetes() profile on real Prometheus answers for a cluster: the snapshot and the
warnings are the recorded ones, field for field (payloads/kubernetes_cluster/, README.md there).

The answers are Prometheus 2.42's own to the eight queries of a cycle over the series of
tests/integration/cluster_series.py (the kubelet's and kube-state-metrics' whole label sets),
cut to two nodes; `snapshot.json` is what the parser built from them before it was made faster.
A change to the parser that alters any container, series, label, marker or warning fails here."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import responses

from policyd.engine.spec import PolicyDocument
from policyd.model.codec import snapshot_to_dict
from policyd.policy import load_policies
from policyd.sources import kubernetes
from policyd.sources.parse import Parsed
from policyd.sources.prometheus import PrometheusSource
from policyd.sources.promql import build_queries

CLUSTER = Path(__file__).parent / "payloads" / "kubernetes_cluster"
URL = "http://prometheus.test:9090"


NOW: float = json.loads((CLUSTER / "queries.json").read_text())["now"]


def recorded_bodies() -> dict[str, str]:
    """The recorded answers by the query they answer."""
    queries = build_queries(load_policies(CLUSTER / "policy.yaml"), kubernetes(), now_seconds=NOW)
    return {query: (CLUSTER / f"{name.replace(':', '_')}.json").read_text()
            for name, query in queries.labelled()}


def observed(policies: Sequence[PolicyDocument], bodies: Mapping[str, str]) -> tuple[Parsed, int]:
    """A `PrometheusSource` cycle for `policies` at the recording's time, each query answered
    from `bodies`; and how many requests it made."""
    def answer(request: Any) -> tuple[int, dict[str, str], str]:
        (query,) = parse_qs(urlparse(request.url).query)["query"]
        return 200, {}, bodies[query]

    with responses.RequestsMock() as rsps:
        for endpoint in ("query", "query_range"):
            rsps.add_callback(responses.GET, f"{URL}/api/v1/{endpoint}", callback=answer)
        parsed = PrometheusSource(URL, kubernetes(), clock=lambda: NOW).observe(policies)
        return parsed, len(rsps.calls)


def test_recorded_answers_give_the_recorded_snapshot() -> None:
    policies = load_policies(CLUSTER / "policy.yaml")
    queries = build_queries(policies, kubernetes(), now_seconds=NOW)
    parsed, calls = observed(policies, recorded_bodies())
    assert calls == queries.count == 8
    got = {"snapshot": snapshot_to_dict(parsed.snapshot), "warnings": list(parsed.warnings)}
    assert len(got["snapshot"]["containers"]) == 20
    assert json.dumps(got, sort_keys=True, indent=1) + "\n" == (
        CLUSTER / "snapshot.json").read_text()
