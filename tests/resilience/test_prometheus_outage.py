"""Prometheus stops for a while under a running policyd, then comes back on the same port and
data directory: the ticks in between are source errors, nothing is acted on, and policyd
recovers by itself.

The outage lasts OUTAGE_SECONDS (25 s rather than the issue's minute, to keep the resilience
run under four minutes): with a 2 s policy interval that is about ten failed ticks, plenty to
show that every one of them is counted and none acts, and the same code path runs for a minute.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.resilience.conftest import TRAINERS, World
from tests.resilience.harness import Policyd, Samples, label_values, total, wait_for

pytestmark = pytest.mark.slow

POLICY = "resil-prom"
OUTAGE_SECONDS = 25.0


def actions(m: Samples) -> dict[str, float]:
    return {result: total(m, "policyd_actions_total", policy=POLICY, result=result)
            for result in ("applied", "failed")}


def ticks(m: Samples, result: str) -> float:
    return total(m, "policyd_ticks_total", policy=POLICY, result=result)


def test_prometheus_outage_acts_on_nothing_and_recovers(
        world: World, start_policyd: Callable[..., tuple[Policyd, Path]]) -> None:
    pd, _ = start_policyd(world, POLICY, interval=2)
    pid = pd.process.pid

    # Baseline: policyd reads Prometheus and acts (both trainers back to 1024 shares).
    wait_for(lambda: all(world.shares(n, c) == 1024 for c, n in TRAINERS.items()),
             timeout_seconds=60, what="policyd to set both trainers to 1024 shares")
    # The counters are written when the tick ends, just after docker shows its effect.
    wait_for(lambda: actions(pd.metrics())["applied"] >= 2, timeout_seconds=15,
             what="the two actions counted in /metrics")
    assert pd.get("/readyz") == (200, "ok\n")

    # Outage. Wait for the first failed tick: from then on no tick holds an older snapshot.
    world.prometheus.stop()
    stopped = time.monotonic()
    wait_for(lambda: total(pd.metrics(), "policyd_source_errors_total") >= 1,
             timeout_seconds=15, what="the first source error")
    before = pd.metrics()
    world.set_shares("e2", "rs-b", 512)  # policyd would put it back to 1024 if it acted
    checks = 0
    while time.monotonic() < stopped + OUTAGE_SECONDS:
        now = pd.metrics()
        assert actions(now) == actions(before), "an action during the outage"
        assert world.shares("e2", "rs-b") == 512 and world.shares("e1", "rs-a") == 1024
        assert pd.alive()
        checks += 1
        time.sleep(1.0)
    during = pd.metrics()
    errors = total(during, "policyd_source_errors_total", policy=POLICY) \
        - total(before, "policyd_source_errors_total", policy=POLICY)
    assert errors >= 5, f"only {errors} source errors in {OUTAGE_SECONDS} s of outage"
    assert ticks(during, "source_error") - ticks(before, "source_error") == errors
    assert ticks(during, "ok") == ticks(before, "ok")
    assert ticks(during, "error") == 0
    assert label_values(during, "policyd_source_errors_total", "kind") == {"connection"}
    assert actions(during) == actions(before)
    assert pd.get("/readyz")[0] == 200  # ready once a snapshot succeeded; still working
    print(f"outage {time.monotonic() - stopped:.1f} s: {errors:g} source errors, "
          f"{checks} checks, no action")

    # Prometheus back on the same port and data directory: policyd recovers by itself.
    world.prometheus.start()
    back = time.monotonic()
    wait_for(lambda: ticks(pd.metrics(), "ok") > ticks(during, "ok"), timeout_seconds=30,
             what="a successful tick after Prometheus came back")
    first_ok = time.monotonic() - back
    wait_for(lambda: world.shares("e2", "rs-b") == 1024, timeout_seconds=40,
             what="policyd to act again (rs-b back to 1024 shares)")
    acted = time.monotonic() - back
    # (the metrics count a tick's actions when the tick ends, just after docker sees them)
    wait_for(lambda: actions(pd.metrics())["applied"] >= actions(during)["applied"] + 1,
             timeout_seconds=10, what="the applied action in the metrics")
    # Source errors stop: two more ticks, both ok.
    settled = pd.metrics()
    wait_for(lambda: ticks(pd.metrics(), "ok") >= ticks(settled, "ok") + 2, timeout_seconds=20,
             what="two more ticks")
    final = pd.metrics()
    assert total(final, "policyd_source_errors_total") == \
        total(settled, "policyd_source_errors_total")
    assert ticks(final, "error") == 0
    assert pd.alive() and pd.process.pid == pid
    assert not pd.unhealthy(), pd.unhealthy()[:5]
    assert len(pd.health) > 4 * OUTAGE_SECONDS / 2
    assert pd.stop() == 0, pd.log_text()
    print(f"after Prometheus came back: first ok tick in {first_ok:.1f} s, "
          f"acting again in {acted:.1f} s")
