"""`policyd plan` shows each job against its declared targets: a TARGET column with its QoE
state (short by how much, for how long, alerting) and its delivery, only when a job has one."""

from __future__ import annotations

from policyd.cli.render import render_decision
from policyd.model import Assessment, Decision, Node, Snapshot
from policyd.model.qoe import Delivery, QoeStatus

T = 1_700_000_000.0


def decision(*assessments: Assessment) -> str:
    return render_decision(
        Decision(policy="qoe", kind="QoE", time=T, actions=(), assessments=assessments,
                 next_interval=15.0),
        Snapshot(time=T, nodes=(Node(name="w1", cpu_capacity=8.0),), containers=()))


def row(text: str, container: str) -> str:
    return next(line for line in text.splitlines() if line.strip().startswith(container))


def test_each_job_shows_where_it_stands() -> None:
    short = QoeStatus(target="steps_per_second>=40", metric="steps_per_second",
                      comparison=">=", target_value=40.0, measured=30.0, state="short",
                      shortfall=0.25, short_seconds=300.0, alerting=True)
    met = QoeStatus(target="steps_per_second>=10", metric="steps_per_second",
                    comparison=">=", target_value=10.0, measured=12.0, state="satisfied")
    text = decision(
        Assessment(container="job-a", node="w1", category="SHORT", qoe=short, note="n1"),
        Assessment(container="job-b", node="w1", category="SATISFIED", qoe=met),
        Assessment(container="job-c", node="w1", category="FREE",
                   delivery=Delivery(event="converged", response="stop", reason="r")))
    assert "TARGET" in text.splitlines()[2]
    assert "short 25% 5m00s ALERT" in row(text, "job-a") and row(text, "job-a").endswith("n1")
    assert "satisfied" in row(text, "job-b")
    assert "delivered: converged (stop)" in row(text, "job-c")


def test_no_target_column_without_targets() -> None:
    text = decision(Assessment(container="job-a", node="w1", category="CL", note="n1"))
    assert "TARGET" not in text
