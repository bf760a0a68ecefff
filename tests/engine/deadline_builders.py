"""Snapshots for the Deadline kind's tests: jobs with a steps history (so a forecast), a
deadline label, and held jobs."""

from __future__ import annotations

from typing import Any

import numpy as np

from policyd.engine.deadline import DeadlinePolicy
from policyd.engine.spec import API_VERSION
from policyd.model import Container, Markers, Node, PendingJob, Series, Snapshot

NOW = 1_700_001_000.0
SCRAPE = 5.0


def policy(**spec: Any) -> DeadlinePolicy:
    return DeadlinePolicy.model_validate({
        "apiVersion": API_VERSION, "kind": "Deadline", "metadata": {"name": "dl"},
        "spec": {"interval_seconds": 20, **spec}})


def job(cid: str, *, left: float, rate: float, deadline: str | None = None,
        node: str = "w1", cores: float = 1.0, allocation: float = 0.25, samples: int = 12,
        submitted_at: float = NOW - 600.0, annotations: dict[str, str] | None = None,
        markers: Markers | None = None) -> Container:
    """A job that made `rate` steps a second using `cores` cores (a quota of `allocation` of
    its node) over its last `samples` scrapes, with `left` of 10,000 steps to go."""
    t = NOW - SCRAPE * np.arange(samples - 1, -1, -1)
    done = 10_000.0 - left
    steps = done - rate * (NOW - t)
    loss = 2.0 * np.exp(-steps / 5000.0) + 0.1
    labels = {"app": "train"} | ({"policyd.io/deadline": deadline} if deadline else {})
    return Container(
        id=cid, name=cid, node=node, started_at=submitted_at, submitted_at=submitted_at,
        evaluation=Series.of(t, loss), cpu_usage=Series.of(t[1:], [cores] * (samples - 1)),
        cpu_allocation=allocation, labels=labels, annotations=annotations or {},
        markers=markers or Markers(), steps=Series.of(t, steps), total_steps=10_000.0)


def held(jid: str, *, deadline: str | None = None, submitted_at: float = NOW - 10.0,
         labels: dict[str, str] | None = None) -> PendingJob:
    extra = {"policyd.io/deadline": deadline} if deadline else {}
    return PendingJob(id=jid, name=jid, submitted_at=submitted_at,
                      labels={"app": "train"} | extra | (labels or {}))


def cluster(*containers: Container, pending: tuple[PendingJob, ...] = (),
            nodes: dict[str, float] | None = None) -> Snapshot:
    nodes = nodes or {"w1": 4.0}
    return Snapshot(time=NOW, nodes=tuple(Node(name=n, cpu_capacity=c) for n, c in nodes.items()),
                    containers=containers, pending=pending)


def scaling(cid: str, *, parallel_fraction: float, cores: float = 2.0,
            allocation: float = 0.5, samples: int = 12) -> Container:
    """A job without a deadline whose step takes 0.1 (1 - p + p / c) seconds on c cores
    (Amdahl's law, p = `parallel_fraction`), seen on one core and on `cores` cores in turn,
    ending on `cores`, all of its quota (`allocation` of its node)."""
    t = NOW - SCRAPE * np.arange(samples - 1, -1, -1)
    used = np.where(np.arange(1, samples) % 2 == (samples - 1) % 2, cores, 1.0)
    seconds_per_step = 0.1 * (1 - parallel_fraction + parallel_fraction / used)
    steps = np.concatenate([[1000.0], 1000.0 + np.cumsum(SCRAPE / seconds_per_step)])
    loss = 2.0 * np.exp(-steps / 5000.0) + 0.1
    return Container(
        id=cid, name=cid, node="w1", started_at=NOW - 600.0, submitted_at=NOW - 600.0,
        evaluation=Series.of(t, loss), cpu_usage=Series.of(t[1:], used),
        cpu_allocation=allocation, labels={"app": "train"}, steps=Series.of(t, steps),
        total_steps=100_000.0)
