"""Every shipped policy decides on the odd snapshots real sources produce, never raising: NaN,
infinite, negative or next-to-nothing CPU figures (a rate read across a restart or a counter
reset), losses that are NaN, zero or negative, steps that stall or go back, declarations that
cannot be read, tiny allocations, held jobs. A tick that raised would leave the whole policy
undecided for the cycle (found once, by a full CI run after an engine restart: a forecast's
NaN refused by the decision).

The snapshots are drawn from a seeded generator, so the test is deterministic. On the code
before that fix every shipped policy failed on some of these 400 (9 for most, 2 to 4 for the
policies that select one namespace).
"""

from __future__ import annotations

import collections
from pathlib import Path

import numpy as np
import pytest

from policyd.engine import decide
from policyd.engine.spec import PolicyDocument
from policyd.model import Container, Markers, Node, PendingJob, Series, Snapshot
from policyd.policy import load_policies

ROOT = Path(__file__).resolve().parents[2]
NOW = 1_700_000_000.0
SNAPSHOTS = 400
ODD_CORES = [np.nan, np.inf, -1.0, 0.0, 1e-9, 1e-4, 0.1, 0.5, 1.0, 3.0]


def shipped() -> list[PolicyDocument]:
    return [p for path in sorted((ROOT / "policies").glob("*.yaml")) for p in load_policies(path)]


def odd_series(rng: np.random.Generator, k: int, what: str) -> Series:
    times = NOW - np.cumsum(rng.choice([1.0, 5.0, 20.0, 30.0], size=k))[::-1]
    if what == "loss":
        values = 0.1 + 2.0 * np.exp(-np.arange(k) * rng.choice([0.0, 0.01, 0.3]))
        odd = [np.nan, np.inf, -1.0, 0.0]
    elif what == "cpu":
        values = (rng.choice(ODD_CORES, size=k) if rng.random() < 0.5
                  else np.full(k, rng.choice([0.2, 1.0, 1.9])))
        odd = ODD_CORES
    else:  # steps: a counter that stalls, may start anywhere, now and then a bad figure
        values = np.cumsum(rng.choice([0.0, 0.0, 1.0, 100.0], size=k)) + rng.choice([0, 1000])
        odd = [np.nan, -5.0, 0.0]
    if k and rng.random() < 0.2:
        values[rng.integers(k)] = rng.choice(odd)
    return Series.of(times, values)


def odd_container(rng: np.random.Generator, i: int, nodes: list[str]) -> Container:
    k = int(rng.integers(0, 9))
    declared = {
        "policyd.io/deadline": ["600s", "10s", "-5s", "bogus", "1h"],
        "policyd.io/target-loss": ["0.5", "0", "-1", "x", "nan"],
        "policyd.io/qoe-target": ["steps_per_second>=40", "p95_latency_ms<=80",
                                  "steps_per_second>=0", "bogus"],
        "policyd.io/min-cpu": ["0.5", "8", "-1"],
    }
    annotations = {key: str(rng.choice(values)) for key, values in declared.items()
                   if rng.random() < 0.3}
    markers = Markers(
        migrated=bool(rng.random() < 0.3), rebalanced=bool(rng.random() < 0.2),
        converged_at=float(NOW - rng.choice([10, 1000])) if rng.random() < 0.3 else None,
        last_action_at=float(NOW - rng.choice([0, 5, 100])) if rng.random() < 0.4 else None)
    metrics = ({"steps_per_second": odd_series(rng, k, "cpu"),
                "p95_latency_ms": odd_series(rng, k, "cpu")} if rng.random() < 0.3 else {})
    return Container(
        id=f"training/p{i}/c", name=f"p{i}", node=str(rng.choice(nodes)),
        started_at=float(NOW - rng.choice([5, 60, 3600])),
        namespace=str(rng.choice(["training", "research", "batch", ""])),
        evaluation=odd_series(rng, k, "loss"), cpu_usage=odd_series(rng, max(k - 1, 0), "cpu"),
        cpu_allocation=float(rng.choice([1e-3, 0.1, 0.5, 1.0])), labels={"app": "train"},
        annotations=annotations, markers=markers,
        steps=odd_series(rng, k, "steps") if rng.random() < 0.7 else Series.empty(),
        total_steps=float(rng.choice([1000.0, 5.0, 1e9])) if rng.random() < 0.4 else None,
        metrics=metrics)


def odd_snapshot(rng: np.random.Generator) -> Snapshot:
    names = [f"w{j}" for j in range(int(rng.integers(1, 4)))]
    nodes = tuple(Node(name=n, cpu_capacity=float(rng.choice([0.5, 1.0, 2.0, 4.0])),
                       speed=float(rng.choice([0.5, 1.0, 2.0])) if rng.random() < 0.3 else None)
                  for n in names)
    containers = tuple(odd_container(rng, i, names) for i in range(int(rng.integers(0, 7))))
    pending = tuple(
        PendingJob(id=f"q{i}", name=f"q{i}", submitted_at=float(NOW - rng.choice([1, 100])),
                   labels={"app": "train"} | ({"policyd.io/deadline": "300s"}
                                              if rng.random() < 0.5 else {}))
        for i in range(int(rng.integers(0, 3))))
    return Snapshot(time=NOW, nodes=nodes, containers=containers, pending=pending)


@pytest.fixture(scope="module")
def snapshots() -> list[Snapshot]:
    rng = np.random.default_rng(1)
    return [odd_snapshot(rng) for _ in range(SNAPSHOTS)]


@pytest.mark.parametrize("policy", shipped(), ids=lambda p: p.name)
def test_every_shipped_policy_decides_on_odd_snapshots(policy: PolicyDocument,
                                                       snapshots: list[Snapshot]) -> None:
    failures: collections.Counter[str] = collections.Counter()
    assessed = 0
    for snapshot in snapshots:
        try:
            assessed += len(decide(policy, snapshot).assessments)
        except Exception as exc:  # counted, and reported below
            failures[f"{type(exc).__name__}: {exc}"] += 1
    assert not failures, failures.most_common(5)
    assert assessed > 100  # the policy selected the jobs: the snapshots were read, not skipped
