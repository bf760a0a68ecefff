"""`policyd simulate` as a user runs it."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from policyd.cli import main

ROOT = Path(__file__).resolve().parents[2]


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_json_has_policy_baseline_and_oracle_runs() -> None:
    code, out, _ = run("simulate", "--scenario", "flowcon-fixed-3", "--output", "json")
    assert code == 0
    (scenario,) = json.loads(out)["scenarios"]
    assert scenario["name"] == "flowcon-fixed-3"
    assert scenario["seed"] == 1
    assert scenario["thesis"]["baseline_makespan"] == 394.0
    assert set(scenario["runs"]) == {"policy", "baseline", "baseline_fewest", "oracle"}
    for r in scenario["runs"].values():
        assert set(r) >= {"avg_jct", "makespan", "migrations", "jobs"}
        assert [j["id"] for j in r["jobs"]] == ["job-1", "job-2", "job-3"]
        for j in r["jobs"]:
            assert set(j) >= {"id", "submit", "finish", "jct", "time_to_quality"}
            assert j["finish"] > j["submit"]
            assert 0 < j["time_to_quality"] <= j["jct"] + 1e-6


def test_same_seed_gives_byte_identical_json() -> None:
    args = ("simulate", "--scenario", "flowcon-random-5", "--seed", "3", "--output", "json")
    assert run(*args)[1] == run(*args)[1]


def test_text_report_puts_the_thesis_beside_ours() -> None:
    code, out, _ = run("simulate", "--scenario", "flowcon-fixed-3")
    assert code == 0
    assert "thesis (section 6.1.3" in out
    assert "ours: avg JCT" in out
    assert "average JCT: policy" in out


def test_list_names_every_scenario_and_sweep() -> None:
    code, out, _ = run("simulate", "--list")
    assert code == 0
    for name in ("flowcon-fixed-3", "specon-random-50-8w", "sweep-flowcon-alpha"):
        assert name in out


def test_unknown_scenario_is_a_clear_error() -> None:
    code, out, err = run("simulate", "--scenario", "nope")
    assert code == 1 and out == ""
    assert "unknown scenario 'nope'; known: flowcon-fixed-3" in err


def test_a_policy_of_another_kind_runs_on_any_scenario() -> None:
    # SpeCon on FlowCon's one-node scenario: nowhere to migrate to, so the run equals NA's.
    code, out, _ = run("simulate", "--scenario", "flowcon-fixed-3", "--policy",
                       str(ROOT / "policies" / "thesis-specon.yaml"), "--output", "json")
    assert code == 0
    (scenario,) = json.loads(out)["scenarios"]
    assert scenario["policy"]["kind"] == "SpeCon"
    runs = scenario["runs"]
    assert runs["policy"]["migrations"] == 0
    assert runs["policy"]["jobs"] == runs["baseline"]["jobs"]


def test_a_policy_file_replaces_the_scenarios_policy() -> None:
    code, out, _ = run("simulate", "--scenario", "flowcon-fixed-3", "--policy",
                       str(ROOT / "policies" / "flowcon.yaml"), "--output", "json")
    assert code == 0
    assert json.loads(out)["scenarios"][0]["policy"]["name"] == "flowcon-default"


def test_plot_writes_pictures(tmp_path: Path) -> None:
    code, _, err = run("simulate", "--scenario", "flowcon-fixed-3", "--scenario",
                       "specon-fixed-20", "--plot", str(tmp_path))
    assert code == 0
    written = sorted(p.name for p in tmp_path.iterdir())
    assert written == ["flowcon-fixed-3-cpu.png", "flowcon-fixed-3-jct.png",
                       "specon-fixed-20-jct.png", "specon-fixed-20-worker-cpu.png",
                       "specon-fixed-20-workers.png"]
    for name in written:
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert err.count("wrote ") == 5


@pytest.mark.parametrize(("where", "problem"), [
    pytest.param("file", "{}: not a directory (--plot DIR writes PNG files into DIR)",
                 id="a-file"),
    pytest.param("file/pictures", "{}: cannot create the --plot directory: Not a directory",
                 id="under-a-file"),
    pytest.param("/proc", "{}: cannot write into the --plot directory: No such file or directory",
                 id="not-writable"),
])
def test_a_plot_directory_that_cannot_be_written_is_refused_before_simulating(
        tmp_path: Path, where: str, problem: str) -> None:
    (tmp_path / "file").write_text("not a directory")
    target = tmp_path / where
    code, out, err = run("simulate", "--scenario", "specon-random-50-8w", "--plot", str(target))
    assert (code, out) == (1, "")  # no report: nothing was simulated
    assert err == problem.format(target) + "\n"


def test_workers_file_plays_a_scenario_on_unequal_machines(tmp_path: Path) -> None:
    workers = tmp_path / "workers.yaml"
    workers.write_text("workers:\n  - {name: fast, cores: 2, speed: 2}\n"
                       "  - {name: slow, cores: 2, speed: 0.5}\n", encoding="utf-8")
    code, out, _ = run("simulate", "--scenario", "specon-fixed-20", "--workers", str(workers),
                       "--output", "json")
    assert code == 0
    (scenario,) = json.loads(out)["scenarios"]
    nodes = {n for j in scenario["runs"]["baseline"]["jobs"] for n in j["nodes"]}
    assert nodes <= {"fast", "slow"}


def test_a_bad_workers_file_names_the_file_the_entry_and_the_reason(tmp_path: Path) -> None:
    workers = tmp_path / "workers.yaml"
    workers.write_text("workers:\n  - {name: a, cores: 2}\n  - {name: b, cores: 2, speed: 0}\n",
                       encoding="utf-8")
    code, out, err = run("simulate", "--scenario", "specon-fixed-20", "--workers", str(workers))
    assert (code, out) == (1, "")
    assert f"{workers}: workers[1] (b): speed must be a positive number, got 0" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(("value", "why"), [("0", "0 is not at least 1"),
                                            ("two", "'two' is not a whole number")])
def test_jobs_must_be_a_positive_whole_number(value: str, why: str,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run("simulate", "--jobs", value)
    assert code == 2 and out == ""
    assert f"argument --jobs: {why}" in capsys.readouterr().err  # argparse writes to sys.stderr


def test_progress_is_told_per_scenario_in_order_whatever_the_processes() -> None:
    args = ("simulate", "--scenario", "flowcon-fixed-3", "--scenario", "qoe-fixed-8")
    one, two = run(*args, "--jobs", "1"), run(*args, "--jobs", "2")
    assert one[1] == two[1] and one[0] == two[0] == 0
    for _, _, err in (one, two):
        lines = err.splitlines()
        assert [line.split(" ")[2] for line in lines] == ["1/2", "2/2"]
        assert "flowcon-fixed-3:" in lines[0] and "qoe-fixed-8:" in lines[1]
