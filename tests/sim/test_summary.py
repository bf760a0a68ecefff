"""The bottom line of `policyd simulate`: the words match the numbers, for each kind of outcome,
and the key explains exactly the terms a report uses."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from typing import Literal

import pytest

from policyd.cli import main
from policyd.sim.report import Outcome
from policyd.sim.summary import bottom_line, outcome_line
from policyd.sim.terms import explain
from policyd.sim.types import JobResult, RunResult
from tests.sim.test_world import scenario, specon

Strategy = Literal["policy", "baseline", "oracle"]


def run_of(strategy: Strategy, jcts: list[float], migrations: int = 0) -> RunResult:
    """A run whose jobs were all submitted at 0 s and took `jcts` seconds."""
    jobs = tuple(JobResult(id=f"job-{n}", model="m", submit=0.0, finish=jct,
                           time_to_quality=jct / 2, nodes=("w1",))
                 for n, jct in enumerate(jcts, 1))
    return RunResult(strategy=strategy, jobs=jobs, migrations=migrations)


def outcome(policy: list[float], baseline: list[float], oracle: list[float] | None = None, *,
            name: str = "exp", kind: Literal["FlowCon", "SpeCon"] = "FlowCon",
            migrations: int = 0) -> Outcome:
    world = scenario(policy=specon() if kind == "SpeCon" else None)
    world = replace(world, name=name, baseline="DS" if kind == "SpeCon" else "NA")
    runs = {"policy": run_of("policy", policy, migrations),
            "baseline": run_of("baseline", baseline)}
    if oracle is not None:
        runs["oracle"] = run_of("oracle", oracle)
    return Outcome(scenario=world, runs=runs)


@pytest.mark.parametrize(("case", "line"), [
    pytest.param(outcome([90, 90], [100, 100], [80, 80]),
                 "FlowCon 10.0% sooner than NA; the oracle 20.0% sooner (FlowCon reached 50% "
                 "of that)", id="sooner"),
    pytest.param(outcome([103], [100], [90], kind="SpeCon"),
                 "SpeCon 3.0% later than DS; the oracle 10.0% sooner", id="later"),
    pytest.param(outcome([100], [100], [100]),
                 "FlowCon no different from NA; the oracle no sooner", id="no-change"),
    pytest.param(outcome([95, 85], [100, 100]), "FlowCon 10.0% sooner than NA",
                 id="no-oracle-run"),
])
def test_one_experiment_in_words(case: Outcome, line: str) -> None:
    assert outcome_line(case) == line


def test_the_verdict_counts_what_each_kind_gained_and_lost() -> None:
    outcomes = [
        outcome([90], [100], [80], name="a"),
        outcome([95], [100], [50], name="b"),
        outcome([102], [100], [90], name="c"),
        outcome([100.5], [100], [99], name="d"),
        outcome([110], [100], [100], name="e", kind="SpeCon", migrations=3),
    ]
    text = bottom_line(outcomes)
    lines = text.splitlines()
    assert lines[1:6] == [
        "  a  FlowCon 10.0% sooner than NA; the oracle 20.0% sooner (FlowCon reached 50% of that)",
        "  b  FlowCon 5.0% sooner than NA; the oracle 50.0% sooner (FlowCon reached 10% of that)",
        "  c  FlowCon 2.0% later than NA; the oracle 10.0% sooner",
        "  d  FlowCon 0.5% later than NA; the oracle 1.0% sooner",
        "  e  SpeCon 10.0% later than DS; the oracle no sooner",
    ]
    paragraphs = " ".join(line.strip() for line in lines[6:])
    assert paragraphs == (
        "FlowCon against NA, 4 experiments: jobs finished sooner on average in 2 of 4 (by 5.0 "
        "to 10.0%); later on average in 1 of 4 (by 2.0%); within 1% of NA's average in 1 of 4. "
        "The oracle: 1.0 to 50.0% sooner, of which FlowCon reached 10% to 50%. Makespan -10.0 "
        "to +2.0%. "
        "SpeCon against DS, 1 experiment: jobs finished later on average (by 10.0%). The "
        "oracle was no sooner. Makespan +10.0%; 3 migrations.")
    assert all(len(line) <= 100 for line in lines[6:])


def simulate(*argv: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    assert main(["simulate", *argv], out=out, err=err) == 0
    return out.getvalue(), err.getvalue()


def test_the_text_report_ends_with_the_bottom_line_of_its_own_numbers() -> None:
    text, err = simulate("--scenario", "flowcon-fixed-3")
    runs = json.loads(simulate("--scenario", "flowcon-fixed-3", "--output", "json")[0])[
        "scenarios"][0]["runs"]
    policy, baseline, oracle = (runs[r]["avg_jct"] for r in ("policy", "baseline", "oracle"))
    change, oracle_change = 100 * (policy / baseline - 1), 100 * (oracle / baseline - 1)
    assert change < 0 and oracle_change < change  # the words below assume so
    said = (f"FlowCon {-change:.1f}% sooner than NA; the oracle {-oracle_change:.1f}% sooner "
            f"(FlowCon reached {(baseline - policy) / (baseline - oracle):.0%} of that)")
    tables, _, rest = text.partition("\nterms\n")
    key, _, bottom = rest.partition("\nbottom line: ")
    assert tables.startswith("flowcon-fixed-3 (seed 1): ") and "average JCT: policy" in tables
    assert bottom.splitlines()[1] == f"  flowcon-fixed-3  {said}"
    assert "FlowCon against NA, 1 experiment: jobs finished sooner on average" in bottom
    assert err.splitlines()[0] == f"policyd simulate: 1/1 flowcon-fixed-3: {said}"
    # The key explains the abbreviations the tables print, and no SpeCon term.
    for term in ("JCT", "TTQ", "NA", "oracle", "CHANGE", "alpha", "beta", "CL"):
        assert f"\n  {term} " in f"\n{key}", term
    for term in ("DS", "PC", "WC", "CC", "weights"):
        assert f"\n  {term} " not in f"\n{key}", term


def test_the_key_lists_used_terms_in_its_order_with_those_their_explanations_use() -> None:
    key = explain("DS placed it; weights 2/1.5/1; JCTs and NAN are not terms").splitlines()
    assert key[0] == "terms"
    assert [line.split()[0] for line in key[1:] if line[2] != " "] == [
        "DS", "alpha", "interval", "weights", "PC", "WC", "CC"]
    assert explain("nothing to explain here") == ""

