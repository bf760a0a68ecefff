"""deploy/prometheus: the alerting rules are valid and their promtool unit tests pass.

promtool comes with Debian's prometheus (scripts/install-test-deps): missing is a failure.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "policyd-rules.yml"
TESTS = ROOT / "deploy" / "prometheus" / "policyd-rules.test.yml"
METRICS = {
    "policyd_actions_total", "policyd_migrations_total", "policyd_tick_duration_seconds_bucket",
    "policyd_source_errors_total", "policyd_ticks_total", "policyd_job_category",
    "policyd_interval_seconds", "policyd_policy_reload_errors_total", "policyd_qoe_alerting",
    "policyd_deadline_jobs", "policyd_admission_waiting_jobs", "policyd_node_report_stop_request",
}


def promtool(*args: str) -> str:
    binary = shutil.which("promtool")
    assert binary is not None, "promtool is missing: run scripts/install-test-deps as root"
    result = subprocess.run([binary, *args], capture_output=True, text=True, timeout=120,
                            cwd=RULES.parent, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def rules() -> list[dict[str, object]]:
    document = yaml.safe_load(RULES.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def test_promtool_check_rules() -> None:
    assert f"SUCCESS: {len(rules())} rules found" in promtool("check", "rules", RULES.name)


def test_promtool_test_rules() -> None:
    assert "SUCCESS" in promtool("test", "rules", TESTS.name)


def test_every_rule_is_documented_and_unit_tested() -> None:
    tested = {case["alertname"] for test in yaml.safe_load(TESTS.read_text())["tests"]
              for case in test["alert_rule_test"] if case["exp_alerts"]}
    for rule in rules():
        annotations = rule["annotations"]
        assert isinstance(annotations, dict)
        assert {"summary", "description", "runbook"} <= set(annotations), rule["alert"]
        assert rule["alert"] in tested, f"{rule['alert']} has no test where it fires"
        assert isinstance(rule["labels"], dict)
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}


def test_rules_use_only_policyd_metric_names() -> None:
    used = set(re.findall(r"\bpolicyd_[a-z_]+", RULES.read_text()))
    histogram = "policyd_tick_duration_seconds"  # named by the runbook text
    assert used - {histogram} <= METRICS, used - METRICS
