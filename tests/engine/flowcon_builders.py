"""Small builders for FlowCon's tests: loss curves from gains, containers sampled at interval
spacing, snapshots and FlowCon policies.

With the default interval (20 s, the policy's base interval) and 1 core of CPU use, a job's growth
efficiency G equals the relative gain of each interval, so a test reads `losses(0.2, 0.01)` as
"G = 0.2, then G = 0.01".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policyd.engine.flowcon import FlowConPolicy
from policyd.engine.spec import API_VERSION
from policyd.model import Container, Markers, Node, Series, Snapshot

NOW = 1_700_000_400.0
NODE = "w1"
POLICY = "fc"
INTERVAL = 20.0


def losses(*gains: float, start: float = 2.0) -> list[float]:
    """A loss curve whose relative gain in each interval is each of `gains` in turn."""
    curve = [start]
    for g in gains:
        curve.append(curve[-1] * (1.0 - g))
    return curve


def job(
    cid: str,
    loss: Sequence[float],
    *,
    node: str = NODE,
    now: float = NOW,
    interval: float = INTERVAL,
    cpu: float | Sequence[float] = 1.0,
    allocation: float = 1.0,
    started_at: float | None = None,
    times: Sequence[float] | None = None,
    labels: Mapping[str, str] | None = None,
    last_action_at: float | None = None,
) -> Container:
    """A container whose loss is sampled every `interval` seconds up to `now` (or at `times`).

    CPU use is reported at the same instants from the second sample on (each sample covers the
    interval before it): `cpu` cores throughout, or one figure per interval.
    """
    t = list(times) if times is not None else [
        now - interval * (len(loss) - 1 - k) for k in range(len(loss))
    ]
    usage = list(cpu) if isinstance(cpu, Sequence) else [cpu] * max(len(t) - 1, 0)
    return Container(
        id=cid, name=cid, node=node,
        started_at=started_at if started_at is not None else (t[0] if t else now),
        evaluation=Series.of(t, list(loss)),
        cpu_usage=Series.of(t[1:1 + len(usage)], usage),
        cpu_allocation=allocation,
        labels=dict(labels or {"app": "train"}),
        markers=Markers(last_action_at=last_action_at),
    )


def snapshot(
    *containers: Container,
    now: float = NOW,
    intervals: Mapping[str, float] | None = None,
    nodes: Sequence[str] = (),
) -> Snapshot:
    """A snapshot at `now` holding `containers`, with every node they name (4 cores each)."""
    names = sorted({c.node for c in containers} | set(nodes)) or [NODE]
    return Snapshot(
        time=now,
        nodes=tuple(Node(name=n, cpu_capacity=4.0) for n in names),
        containers=containers,
        intervals=dict(intervals or {}),
    )


def flowcon(*, name: str = POLICY, **spec: Any) -> FlowConPolicy:
    """A FlowCon policy: alpha 0.05, interval 20 s, beta 2 unless `spec` says otherwise."""
    return FlowConPolicy.model_validate({
        "apiVersion": API_VERSION,
        "kind": "FlowCon",
        "metadata": {"name": name},
        "spec": {"alpha": 0.05, "interval_seconds": INTERVAL, "beta": 2.0, **spec},
    })
