"""`policyd plan`'s text for deadlines: DEADLINE and SLACK columns when the decision has
deadlines (and not otherwise), and the held jobs that wait, in order, with why."""

from __future__ import annotations

import io
from pathlib import Path

from policyd.cli import main
from policyd.cli.render import render_decision
from policyd.engine import decide
from tests.engine.deadline_builders import cluster, held, job, policy
from tests.engine.test_predictive import policy as predictive


def test_plan_shows_deadline_slack_and_the_waiting_queue() -> None:
    snap = cluster(job("urgent", left=2000, rate=10, deadline="900s", cores=2, allocation=0.5),
                   job("free", left=2000, rate=10, cores=1, allocation=0.25),
                   pending=(held("later", deadline="2h"),
                            held("big", deadline="1h", labels={"policyd.io/min-cpu": "8"})))
    text = render_decision(decide(policy(), snap), snap)
    lines = text.splitlines()
    (header,) = [line for line in lines if "CONTAINER" in line]
    assert header.split() == ["CONTAINER", "CATEGORY", "NEED", "cores", "CPU", "NOW", "->",
                              "NEXT", "ETA", "(RANGE)", "DEADLINE", "SLACK", "NOTE"]
    (urgent,) = [line for line in lines if line.lstrip().startswith("urgent")]
    # slack at the 2.00 cores it keeps next (the node's fourth core goes to "later", admitted)
    assert "ON_TRACK" in urgent and "in 5m00s" in urgent and "+1m40s" in urgent
    (free,) = [line for line in lines if line.lstrip().startswith("free ")]
    assert "NO_DEADLINE" in free
    assert "admit          later on w1 -> 0.25 (quota)" in text
    start = lines.index("waiting for admission (1)")
    assert lines[start + 1].split() == ["1.", "big", "no_fit", "deadline", "in", "59m50s"]
    assert "needs 8.00 free cores, no node has them" in lines[start + 2]


def test_a_decision_without_deadlines_has_no_deadline_columns() -> None:
    snap = cluster(job("free", left=2000, rate=10, cores=1, allocation=0.25))
    text = render_decision(decide(predictive(), snap), snap)
    assert "CONTAINER" in text and "DEADLINE" not in text and "waiting" not in text


def test_plan_on_the_shipped_deadline_example() -> None:
    root = Path(__file__).resolve().parents[1]
    out, err = io.StringIO(), io.StringIO()
    code = main(["plan", "--policy", str(root / "policies" / "deadline.yaml"), "--snapshot",
                 str(root / "examples" / "sim-deadline-insufficient-200s.json")],
                out=out, err=err)
    assert (code, err.getvalue()) == (0, "")
    text = out.getvalue()
    assert text.startswith("Deadline policy 'deadline'")
    assert "waiting for admission (7)" in text
    assert text.count("ON_TRACK") == 26
