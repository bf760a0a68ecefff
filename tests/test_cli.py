"""`policyd validate | schema | plan` as a user runs them: exit codes, output, and clear errors
(never a traceback) for broken input."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from policyd.cli import main

ROOT = Path(__file__).resolve().parent.parent
POLICIES = sorted((ROOT / "policies").glob("*.yaml"))
FLOWCON_EXAMPLE = ROOT / "examples" / "thesis-flowcon-two-jobs.json"
SPECON_EXAMPLE = ROOT / "examples" / "thesis-specon-worker-score.json"
REBALANCE_EXAMPLE = ROOT / "examples" / "thesis-specon-rebalance.json"
THESIS_FLOWCON = ROOT / "policies" / "thesis-flowcon.yaml"
THESIS_SPECON = ROOT / "policies" / "thesis-specon.yaml"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_validate_shipped_policies() -> None:
    for policy in POLICIES:  # each file alone: valid, nothing to warn about
        code, out, err = run("validate", str(policy))
        assert (code, err) == (0, ""), policy
        assert out.count("\n") == 1 and "valid" in out
    # Together they are still valid, but the examples select the same jobs: each pair that
    # would meet on a container is named, with its owner.
    code, out, err = run("validate", *map(str, POLICIES))
    assert code == 0 and "valid" in out
    assert err and all(": warning: can select the same containers as policy " in line
                       for line in err.splitlines())


def test_validate_reports_every_problem_and_exits_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: policyd.io/v1alpha1\n"
        "kind: SpeCon\n"
        "metadata: {name: s}\n"
        "spec:\n"
        "  alpha: -1\n"
        "  weights: {pc: 1.0, wc: 1.5, cc: 1.0}\n"
        "---\n"
        "apiVersion: policyd.io/v1alpha1\n"
        "kind: FlowCom\n"
        "metadata: {name: f}\n"
    )
    code, out, err = run("validate", str(bad))
    assert code == 1
    assert out == ""
    *problems, last = err.splitlines()
    assert all(line.startswith(f"{bad}:") for line in problems)  # editors link FILE:LINE
    assert any(f"{bad}:5:" in line and "spec.alpha" in line for line in problems)
    assert any(f"{bad}:6:" in line and "pc (1) must be greater than wc (1.5)" in line
               for line in problems)
    assert any(f"{bad}:9:" in line and "FlowCon" in line and "SpeCon" in line
               for line in problems)
    assert any(f"{bad}:8:" in line and "spec: required field is missing" in line
               for line in problems)
    assert last == "policyd validate: 4 problems found; nothing applied"
    assert "Traceback" not in err


def test_validate_missing_file() -> None:
    code, _, err = run("validate", "no/such/policy.yaml")
    assert code == 1
    assert "no/such/policy.yaml" in err
    assert "Traceback" not in err


def test_schema_is_json_with_both_kinds() -> None:
    code, out, _ = run("schema")
    assert code == 0
    text = json.dumps(json.loads(out))
    assert "FlowCon" in text and "SpeCon" in text


def test_plan_reproduces_the_flowcon_thesis_example_as_text() -> None:
    code, out, err = run("plan", "--policy", str(THESIS_FLOWCON), "--snapshot",
                         str(FLOWCON_EXAMPLE))
    assert (code, err) == (0, "")
    assert "FlowCon policy" in out
    assert "-> 0.25" in out
    assert "G (growth eff.)" in out


def test_plan_json_is_the_decision(tmp_path: Path) -> None:
    code, out, _ = run("plan", "--policy", str(THESIS_FLOWCON), "--snapshot",
                       str(FLOWCON_EXAMPLE), "--output", "json")
    assert code == 0
    decision = json.loads(out)
    fractions = sorted(a["fraction"] for a in decision["actions"] if a["kind"] == "set_cpu")
    assert fractions == [0.25]
    assert set(decision) >= {"actions", "categories", "next_interval"}
    assert all(a["reason"] and a["policy"] for a in decision["actions"])


def test_plan_reproduces_the_worker_score_example() -> None:
    code, out, _ = run("plan", "--policy", str(THESIS_SPECON), "--snapshot",
                       str(SPECON_EXAMPLE), "--output", "json")
    assert code == 0
    migrations = [a for a in json.loads(out)["actions"] if a["kind"] == "migrate"]
    assert len(migrations) == 1
    assert (migrations[0]["from"], migrations[0]["to"]) == ("w4", "w2")
    assert migrations[0]["scores"] == {"w1": 6.0, "w2": 3.5, "w3": 4.0, "w4": 11.0}


def test_plan_rebalance_example_moves_a_job_to_the_idle_worker() -> None:
    code, out, _ = run("plan", "--policy", str(THESIS_SPECON), "--snapshot",
                       str(REBALANCE_EXAMPLE), "--output", "json")
    assert code == 0
    moves = [a for a in json.loads(out)["actions"] if a["kind"] == "migrate"]
    assert moves and all(a["rebalance"] for a in moves)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param('{"time": 1,\n "nodes": [}', ":2:12: JSON syntax error: ", id="syntax"),
        pytest.param('{"time": 1, "nodes": []}', ": $.nodes: required non-empty list of nodes",
                     id="no-nodes"),
        pytest.param('{"time": 1, "nodes": [{"name": "w", "cpu_capacity": 1}], "containers":'
                     ' [{"id": "c", "node": "w", "started_at": 0, "cpu_allocation": 2}]}',
                     ": containers[0]: cpu_allocation must be in (0, 1], got 2.0",
                     id="bad-field"),
        pytest.param(b'{"time": "\xff"}', ": not UTF-8 text", id="binary"),
    ],
)
def test_plan_rejects_malformed_snapshots(tmp_path: Path, content: str | bytes,
                                          expected: str) -> None:
    snap = tmp_path / "s.json"
    if isinstance(content, bytes):
        snap.write_bytes(content)
    else:
        snap.write_text(content)
    code, out, err = run("plan", "--policy", str(THESIS_FLOWCON), "--snapshot", str(snap))
    assert code == 1
    assert out == ""
    assert err.startswith(f"{snap}")
    assert expected in err
    assert "Traceback" not in err


def test_plan_nan_series_gives_no_action_and_says_why(tmp_path: Path) -> None:
    raw = json.loads(FLOWCON_EXAMPLE.read_text())
    for c in raw["containers"]:
        c["evaluation"][-1][1] = float("nan")
    snap = tmp_path / "nan.json"
    snap.write_text(json.dumps(raw))
    code, out, _ = run("plan", "--policy", str(THESIS_FLOWCON), "--snapshot", str(snap),
                       "--output", "json")
    assert code == 0
    decision = json.loads(out)
    assert decision["actions"] == []
    assert all("nan" in why for why in decision["skipped"].values())
    assert len(decision["skipped"]) == len(raw["containers"])


def test_plan_decides_every_policy_of_the_file_or_the_one_named(tmp_path: Path) -> None:
    both = tmp_path / "both.yaml"
    both.write_text(THESIS_FLOWCON.read_text() + "\n---\n" + THESIS_SPECON.read_text())
    code, out, _ = run("plan", "--policy", str(both), "--snapshot", str(FLOWCON_EXAMPLE),
                       "--output", "json")
    assert code == 0
    assert [d["policy"] for d in json.loads(out)["decisions"]] == [
        "thesis-flowcon", "thesis-specon"]
    code, out, _ = run("plan", "--policy", str(both), "--snapshot", str(FLOWCON_EXAMPLE))
    assert code == 0 and "FlowCon policy 'thesis-flowcon'" in out and "SpeCon policy" in out
    name = json.loads(run("plan", "--policy", str(both), "--name", "thesis-specon",
                          "--snapshot", str(SPECON_EXAMPLE), "--output", "json")[1])["policy"]
    assert name == "thesis-specon"
    code, _, err = run("plan", "--policy", str(both), "--name", "nope",
                       "--snapshot", str(SPECON_EXAMPLE))
    assert code == 1 and "no policy named 'nope'" in err


def test_plan_leaves_a_container_to_the_policy_that_owns_it(tmp_path: Path) -> None:
    boss = THESIS_FLOWCON.read_text().replace("name: thesis-flowcon", "name: boss")
    boss = boss.replace("mode: shares", "mode: shares\n  priority: 5")
    both = tmp_path / "both.yaml"
    both.write_text(THESIS_FLOWCON.read_text() + "\n---\n" + boss)
    code, _, err = run("validate", str(both))
    assert code == 0
    assert 'policy "boss": spec.selector: warning: can select the same containers as policy ' \
           "thesis-flowcon" in err
    assert "policy boss owns them (priority 5)" in err
    code, out, _ = run("plan", "--policy", str(both), "--snapshot", str(FLOWCON_EXAMPLE),
                       "--output", "json")
    decisions = {d["policy"]: d for d in json.loads(out)["decisions"]}
    alone = json.loads(run("plan", "--policy", str(THESIS_FLOWCON), "--snapshot",
                           str(FLOWCON_EXAMPLE), "--output", "json")[1])
    assert alone["actions"], "the thesis example must act, or this test proves nothing"
    assert [a["container"] for a in decisions["boss"]["actions"]] == [
        a["container"] for a in alone["actions"]]
    assert decisions["thesis-flowcon"]["actions"] == []
    assert all(why.startswith("cpu owned by policy boss")
               for why in (c["note"] for c in
                           decisions["thesis-flowcon"]["containers"].values()))


def test_usage_errors_exit_2() -> None:
    assert run("plan", "--policy", "x.yaml")[0] == 2
    assert run("frobnicate")[0] == 2


@pytest.mark.parametrize(("value", "message"), [
    pytest.param("0", "0 is not allowed: must be 1 to 16", id="zero"),
    pytest.param("17", "17 is not allowed: must be 1 to 16", id="too-many"),
    pytest.param("two", "'two' is not a whole number", id="not-a-number")])
def test_plan_max_concurrent_queries_outside_1_to_16_is_a_usage_error(
        value: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run("plan", "--policy", str(THESIS_FLOWCON), "--prometheus",
                       "http://127.0.0.1:9", "--max-concurrent-queries", value)
    assert (code, out) == (2, "")
    assert capsys.readouterr().err.endswith(
        f"policyd plan: error: argument --max-concurrent-queries: {message}\n")


def test_console_entry_point_runs() -> None:
    done = subprocess.run([sys.executable, "-m", "policyd", "--version"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0
    assert done.stdout.startswith("policyd ")


@pytest.mark.parametrize(("policy", "snapshot", "why"), [
    pytest.param("specon.yaml", SPECON_EXAMPLE, "13 containers (namespace ml)", id="namespace"),
    pytest.param("specon.yaml", FLOWCON_EXAMPLE, "2 containers (no namespace)", id="docker"),
])
def test_plan_says_why_a_policy_manages_nothing(policy: str, snapshot: Path, why: str) -> None:
    code, out, _ = run("plan", "--policy", str(ROOT / "policies" / policy), "--snapshot",
                       str(snapshot), "--no-color")
    assert code == 0
    assert (f"note: policy 'specon-default' selects none of the snapshot's {why}: its "
            "spec.selector (namespaces, labels) decides which it manages") in out.splitlines()


def test_plan_of_a_policy_that_selects_containers_has_no_such_note() -> None:
    code, out, _ = run("plan", "--policy", str(THESIS_SPECON), "--snapshot",
                       str(SPECON_EXAMPLE), "--no-color")
    assert code == 0 and "selects none" not in out


def test_plan_shows_each_jobs_forecast_and_eta() -> None:
    example = ROOT / "examples" / "sim-five-jobs-one-node.json"
    code, out, _ = run("plan", "--policy", str(ROOT / "policies" / "predictive.yaml"),
                       "--snapshot", str(example), "--output", "json")
    assert code == 0
    decision = json.loads(out)
    forecasts = {cid: c["forecast"] for cid, c in decision["containers"].items()}
    assert all(f is not None and f["total_steps"] == 2000 for f in forecasts.values())
    assert all(f["low_seconds"] <= f["remaining_seconds"] <= f["high_seconds"]
               for f in forecasts.values())
    # the job nearest its end is first in line and keeps its CPU
    first = min(forecasts, key=lambda cid: forecasts[cid]["remaining_steps"])
    assert decision["containers"][first]["category"] == "SERVED"
    code, text, _ = run("plan", "--policy", str(ROOT / "policies" / "predictive.yaml"),
                        "--snapshot", str(example))
    assert "ETA (RANGE)" in text
    row = next(line for line in text.splitlines() if line.startswith("  job-1-gru "))
    eta = forecasts["job-1"]["remaining_seconds"]
    assert f"{int(eta // 60)}m{round(eta) % 60:02d}s" in row
