"""Small builders for SpeCon tests: jobs whose loss series produce a chosen gain sequence.

`job(..., gains=(0.05, 0.008, 0.006))` samples the loss exactly at the last len(gains) + 1
interval boundaries before NOW, each value (1 - g) times the previous one, so relative gains
read back as the given g (up to rounding). With alpha = 0.01 the named sequences below produce
the categories their names say.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policyd.engine.specon import SpeConPolicy
from policyd.model import Container, Markers, Node, Series, Snapshot

NOW = 1_700_000_000.0
ITVAL = 30.0

PC_GAINS = (0.05, 0.04, 0.03)  # every gain above alpha: stays PC
WC_GAINS = (0.05, 0.008)  # one fall below alpha: PC -> WC
CC_GAINS = (0.05, 0.008, 0.006)  # two falls: PC -> WC -> CC (the last step began in WC)
REQUEST_GAINS = (0.05, 0.008, 0.006, 0.004)  # CC and falling again: requests reallocation


def losses(gains: Sequence[float], start: float = 2.0) -> list[float]:
    values = [start]
    for g in gains:
        values.append(values[-1] * (1.0 - g))
    return values


def job(cid: str, node: str, gains: Sequence[float] = PC_GAINS, *, migrated: bool = False,
        rebalanced: bool = False, converged_at: float | None = None,
        last_action_at: float | None = None, labels: Mapping[str, str] | None = None,
        started_at: float | None = None, evaluation: Series | None = None) -> Container:
    """A job on `node` whose readings at the last boundaries give `gains`."""
    k = len(gains)
    times = [NOW - (k - m) * ITVAL for m in range(k + 1)]
    return Container(
        id=cid, name=f"train-{cid}", node=node,
        started_at=times[0] - 60.0 if started_at is None else started_at,
        evaluation=evaluation if evaluation is not None else Series.of(times, losses(gains)),
        cpu_usage=Series.of(times, [1.0] * len(times)),
        labels={"app": "train"} if labels is None else labels,
        markers=Markers(migrated=migrated, rebalanced=rebalanced, converged_at=converged_at,
                        last_action_at=last_action_at),
    )


def cluster(*containers: Container, nodes: Sequence[str] = ("w1", "w2", "w3", "w4"),
            usage: Mapping[str, float] | None = None, time: float = NOW) -> Snapshot:
    usage = usage or {}
    return Snapshot(
        time=time,
        nodes=tuple(Node(name=n, cpu_capacity=16.0, cpu_usage=usage.get(n, 4.0)) for n in nodes),
        containers=containers,
    )


def policy(**spec: Any) -> SpeConPolicy:
    """A SpeCon policy (alpha 0.01, interval 30 s) with `spec` merged over those defaults."""
    body: dict[str, Any] = {"alpha": 0.01, "interval_seconds": ITVAL, **spec}
    return SpeConPolicy.model_validate({
        "apiVersion": "policyd.io/v1alpha1", "kind": "SpeCon",
        "metadata": {"name": "specon-test"}, "spec": body,
    })


def thesis_jobs() -> list[Container]:
    """Thesis section 6.2.3: w1 3 PC (6), w2 1 PC + 1 WC (3.5), w3 2 PC (4), w4 5 PC + cc (11)."""
    placement = {"w1": ["PC"] * 3, "w2": ["PC", "WC"], "w3": ["PC"] * 2, "w4": ["PC"] * 5}
    patterns = {"PC": PC_GAINS, "WC": WC_GAINS}
    jobs = [job(f"{node}-{i}", node, patterns[kind])
            for node, kinds in placement.items() for i, kind in enumerate(kinds)]
    return [*jobs, job("cc", "w4", REQUEST_GAINS)]
