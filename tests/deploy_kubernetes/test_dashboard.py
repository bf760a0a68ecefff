"""The Grafana dashboard (deploy/kubernetes/dashboards/policyd.json) asks only for metrics policyd
exports, under the names Prometheus gives them, and its panels neither share an id nor overlap."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import CollectorRegistry

from policyd.daemon import DaemonMetrics

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes" / "dashboards" / \
    "policyd.json"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"),
            "gauge": ("",), "summary": ("_sum", "_count", "")}


def exported() -> set[str]:
    registry = CollectorRegistry()
    DaemonMetrics(registry)
    return {family.name + suffix for family in registry.collect()
            for suffix in SUFFIXES[family.type]}


def panels() -> list[dict]:  # type: ignore[type-arg]
    return json.loads(DASHBOARD.read_text())["panels"]


def test_every_query_names_a_metric_policyd_exports() -> None:
    names = exported()
    asked = {name for p in panels() for t in p.get("targets", [])
             for name in re.findall(r"\bpolicyd_[a-z_]+", t["expr"])}
    assert asked, "no policyd metric in the dashboard"
    assert asked <= names, sorted(asked - names)


def test_panels_have_their_own_ids_and_places() -> None:
    ids = [p["id"] for p in panels()]
    assert len(ids) == len(set(ids))
    taken: dict[tuple[int, int], int] = {}
    for p in panels():
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        for row in range(g["y"], g["y"] + g["h"]):
            for column in range(g["x"], g["x"] + g["w"]):
                assert (row, column) not in taken, (p["title"], taken[(row, column)])
                taken[(row, column)] = p["id"]
