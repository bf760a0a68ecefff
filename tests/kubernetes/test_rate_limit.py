"""Writes go through a token bucket: 100 resizes in one cycle are spread, none lost."""

from __future__ import annotations

from typing import Any

from policyd.actuators.kubernetes.calls import TokenBucket
from tests.kubernetes.builders import FakeClock, actuator, answer, apis, decision, node, pod, raw
from tests.kubernetes.builders import set_cpu as set_cpu_action


def test_bucket_allows_the_burst_then_the_rate() -> None:
    clock = FakeClock(0.0)
    bucket = TokenBucket(qps=2.0, burst=3, clock=clock, sleep=clock.sleep)
    at = []
    for _ in range(7):
        bucket.acquire()
        at.append(clock.now)
    assert at == [0.0, 0.0, 0.0, 0.5, 1.0, 1.5, 2.0]


def test_hundred_resizes_are_spread_and_none_lost() -> None:
    core, batch, events = apis()
    clock = FakeClock(0.0)
    writes: list[float] = []
    resized: list[str] = []
    answer(core.read_node, lambda *a, **k: raw(node()))
    answer(core.read_namespaced_pod, lambda name, ns, **k: raw(
        pod(name, status_request="2" if name in resized else None)))

    def resize(name: str, ns: str, body: Any, **k: Any) -> Any:
        writes.append(clock.now)
        resized.append(name)
        return raw({})

    def other_write(*a: Any, **k: Any) -> Any:
        writes.append(clock.now)
        return raw({})
    answer(core.patch_namespaced_pod_resize, resize)
    answer(core.patch_namespaced_pod, other_write)
    answer(events.create_namespaced_event, other_write)
    act = actuator(core, batch, events, clock, qps=10.0, burst=5)
    for i in range(100):
        act.apply(set_cpu_action(0.25, container=f"ml/train-{i}/trainer"), decision())
    assert sorted(resized) == sorted(f"train-{i}" for i in range(100))
    assert len(writes) == 300  # resize, annotation and Event per action
    assert writes[-1] >= (300 - 5) / 10 - 1e-6  # the rate held over the whole run
    for i, t in enumerate(writes):  # never more than burst + qps * elapsed
        assert i + 1 <= 5 + 10 * t + 1e-6
