"""Monitoring objects: the PrometheusRule is deploy/prometheus/policyd-rules.yml, the scrape
objects are picked up by kube-prometheus-stack, and the Grafana dashboard queries only metrics
policyd exports (docs/settings.md, "Metrics")."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.deploy_kubernetes.manifests import (
    ROOT,
    RULES_FILE,
    config_map_data,
    one,
    rendered,
    tool,
)

RELEASE = {"release": "kube-prometheus-stack"}  # kube-prometheus-stack's default selectors
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
                "and", "or", "unless"}


def test_the_prometheus_rule_is_the_rules_file() -> None:
    rule = one(rendered(), "PrometheusRule")
    assert rule["spec"] == yaml.safe_load(RULES_FILE.read_text())


def test_promtool_accepts_the_prometheus_rules_groups(tmp_path: Path) -> None:
    spec = one(rendered(), "PrometheusRule")["spec"]
    extracted = tmp_path / "groups.yml"
    extracted.write_text(yaml.safe_dump(spec))
    result = subprocess.run([tool("promtool"), "check", "rules", str(extracted)],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    count = sum(len(group["rules"]) for group in spec["groups"])
    assert f"SUCCESS: {count} rules found" in result.stdout


def test_prometheus_operator_objects_carry_the_release_label() -> None:
    for kind in ("PrometheusRule", "ServiceMonitor", "PodMonitor"):
        labels = one(rendered(), kind)["metadata"]["labels"]
        assert RELEASE.items() <= labels.items(), kind


def test_the_scrape_job_is_called_policyd_and_covers_both_components() -> None:
    """PolicydDown matches up{job="policyd"}: a ServiceMonitor's job is its Service's name."""
    assert 'up{job="policyd"}' in RULES_FILE.read_text()
    service = one(rendered(), "Service", "policyd")
    monitor = one(rendered(), "ServiceMonitor")
    assert "jobLabel" not in monitor["spec"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= \
        service["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    assert service["spec"]["ports"] == [
        {"name": "metrics", "port": 9097, "targetPort": "metrics", "protocol": "TCP"}]
    for kind, name in (("Deployment", "policyd-manager"), ("DaemonSet", "policyd-node-agent")):
        template = one(rendered(), kind, name)["spec"]["template"]
        assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()
        ports = template["spec"]["containers"][0]["ports"]
        assert {"name": "metrics", "containerPort": 9097, "protocol": "TCP"} in ports


def test_the_training_pods_are_scraped_with_their_own_labels() -> None:
    monitor = one(rendered(), "PodMonitor")
    assert monitor["spec"]["selector"]["matchLabels"] == {"policyd.io/managed": "true"}
    assert monitor["spec"]["namespaceSelector"] == {"any": True}
    assert [e["honorLabels"] for e in monitor["spec"]["podMetricsEndpoints"]] == [True]


# --- the dashboard -----------------------------------------------------------------------------

def exported_metrics() -> set[str]:
    """policyd's metric names as scraped, from the table in docs/settings.md."""
    table = (ROOT / "docs" / "settings.md").read_text()
    found: set[str] = set()
    for name, kind in re.findall(r"^\| `(policyd_\w+)` \| (\w+)", table, flags=re.MULTILINE):
        found |= ({f"{name}_bucket", f"{name}_sum", f"{name}_count"} if kind == "histogram"
                  else {name})
    assert len(found) >= 8, found
    return found


def test_the_metrics_table_is_what_policyd_exports() -> None:
    """docs/settings.md's table (which the dashboard and the rules are held to) names every
    metric of the daemon's registry and nothing else."""
    from prometheus_client import CollectorRegistry  # noqa: PLC0415

    from policyd.daemon import DaemonMetrics  # noqa: PLC0415

    registry = CollectorRegistry()
    DaemonMetrics(registry)
    suffix = {"counter": "_total", "histogram": "", "gauge": ""}
    real = {family.name + suffix[family.type] for family in registry.collect()}
    table = (ROOT / "docs" / "settings.md").read_text()
    documented = set(re.findall(r"^\| `(policyd_\w+)` \|", table, flags=re.MULTILINE))
    assert documented == real, (sorted(real - documented), sorted(documented - real))


def metric_names(expr: str) -> set[str]:
    """The series names a PromQL expression selects (functions and keywords left out)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    expr = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", expr)
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    names = re.findall(r"(?<![\w$.:])([A-Za-z_:][\w:]*)\b(?!\s*\()", expr)
    return {n for n in names if n not in PROMQL_WORDS}


def test_metric_names_finds_series_not_functions_or_labels() -> None:
    expr = ('histogram_quantile(0.9, sum by (policy, le) (rate(a_bucket{x="y"}[$__rate_interval]'
            '))) > on (policy) 0.5 * max by (policy) (b) or c unless d offset 5m')
    assert metric_names(expr) == {"a_bucket", "b", "c", "d"}


def dashboard() -> dict[str, Any]:
    (name, text), = config_map_data("policyd-dashboard").items()
    assert name.endswith(".json")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def test_the_dashboard_is_picked_up_by_the_grafana_sidecar() -> None:
    config_map = one(rendered(), "ConfigMap", "policyd-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"


def test_the_dashboard_queries_only_policyd_metrics() -> None:
    board = dashboard()
    panels = [p for p in board["panels"] if p["type"] != "row"]
    exported, used = exported_metrics(), set()
    for panel in panels:
        assert panel["targets"], panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        for target in panel["targets"]:
            names = metric_names(target["expr"])
            assert names, (panel["title"], target["expr"])
            assert names <= exported, (panel["title"], names - exported)
            used |= names
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            metric = re.fullmatch(r"label_values\((\w+), *\w+\)", variable["definition"])
            assert metric is not None and metric.group(1) in exported
    # Actions by policy/kind/result, migrations, tick duration, source errors, categories over
    # time, the interval: each has a panel.
    assert {"policyd_actions_total", "policyd_migrations_total",
            "policyd_tick_duration_seconds_bucket", "policyd_source_errors_total",
            "policyd_job_category", "policyd_interval_seconds"} <= used
    exprs = " ".join(t["expr"] for p in panels for t in p["targets"])
    assert "by (policy, kind, result" in exprs
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])
    taken: dict[tuple[int, int], str] = {}  # no two panels on one cell of the grid
    for p in board["panels"]:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        for cell in ((y, x) for y in range(g["y"], g["y"] + g["h"])
                     for x in range(g["x"], g["x"] + g["w"])):
            assert cell not in taken, (p["title"], taken[cell])
            taken[cell] = p["title"]
