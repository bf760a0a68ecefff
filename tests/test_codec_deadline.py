"""Held jobs, admissions, the queue and deadlines in the JSON codec: added keys only, a
snapshot with held jobs read back as it was written, and a held job's bad field named."""

from __future__ import annotations

import pytest

from policyd.model import Admit, Decision, JobDeadline, Node, PendingJob, QueuedJob, Snapshot
from policyd.model.codec import (
    SnapshotError,
    action_to_dict,
    decision_to_dict,
    snapshot_from_dict,
    snapshot_to_dict,
)


def test_a_snapshot_with_held_jobs_round_trips() -> None:
    snap = Snapshot(time=100.0, nodes=(Node(name="w1", cpu_capacity=4.0),), containers=(),
                    pending=(
        PendingJob(id="ns/train", name="train", namespace="ns", submitted_at=90.0,
                   labels={"policyd.io/deadline": "1h"}, annotations={"a": "b"}),
        PendingJob(id="held", name="held", submitted_at=95.0, node="w1")))
    again = snapshot_from_dict(snapshot_to_dict(snap))
    assert [(p.id, p.name, p.namespace, p.node, p.submitted_at, dict(p.labels),
             dict(p.annotations)) for p in again.pending] == [
        ("ns/train", "train", "ns", None, 90.0, {"policyd.io/deadline": "1h"}, {"a": "b"}),
        ("held", "held", "", "w1", 95.0, {}, {})]


def test_a_held_job_without_its_submission_is_named() -> None:
    with pytest.raises(SnapshotError, match=r"pending\[0\]"):
        snapshot_from_dict({"time": 1.0, "nodes": [{"name": "w1", "cpu_capacity": 4}],
                            "containers": [],
                            "pending": [{"id": "x", "name": "x"}]})


def test_an_admission_and_the_queue_in_a_decision() -> None:
    admit = Admit(policy="dl", container="a", node="w1", held_on="w2", fraction=0.25,
                  mode="quota", reason="earliest deadline first")
    assert action_to_dict(admit) == {
        "kind": "admit", "policy": "dl", "container": "a", "node": "w1", "held_on": "w2",
        "fraction": 0.25, "mode": "quota", "reason": "earliest deadline first"}
    queued = QueuedJob(container="b", position=1, why="no_fit", reason="needs 2.00 cores",
                       deadline=JobDeadline(state="unknown", deadline_at=500.0))
    d = Decision(policy="dl", kind="Deadline", time=1.0, actions=(admit,), assessments=(),
                 next_interval=20.0, queue=(queued,))
    assert decision_to_dict(d)["queue"] == [{
        "container": "b", "position": 1, "why": "no_fit", "reason": "needs 2.00 cores",
        "deadline": {"state": "unknown", "deadline_at": 500.0, "eta_at": None,
                     "slack_seconds": None, "needed_cores": None, "note": ""}}]


@pytest.mark.parametrize("fraction", [0.0, 1.5])
def test_an_admission_limit_outside_zero_to_one_is_refused(fraction: float) -> None:
    with pytest.raises(ValueError, match="fraction must be in"):
        Admit(policy="dl", container="a", node="w1", fraction=fraction, reason="r")
