"""A broken policy file pushed under a running policyd (hot reload): it keeps the last good
policy, counts and explains the rejection, acts on nothing from the broken file, and picks up
the fixed file by itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.resilience.conftest import TRAINERS, World
from tests.resilience.harness import (
    Policyd,
    Samples,
    label_values,
    policy_yaml,
    total,
    wait_for,
    write_atomically,
)

pytestmark = pytest.mark.slow

GOOD = "resil-reload"
BROKEN = "resil-broken"
FIXED = "resil-reload-v2"

NOT_YAML = ("apiVersion: policyd.io/v1alpha1\nkind: FlowCon\n"
            f"metadata: {{name: {BROKEN}\nspec: [alpha: 0.05\n")
"""Broken YAML (an unclosed flow mapping and sequence)."""

INVALID = policy_yaml(BROKEN, interval=1, alpha=7, mode="quota")
"""Well-formed YAML, invalid policy: alpha 7 (relative gains need alpha < 1). Applied, it
would cap the trainers with CPU quotas (mode quota) under another name."""


def reload_errors(m: Samples) -> float:
    return total(m, "policyd_policy_reload_errors_total")


def ticks(m: Samples, policy: str) -> float:
    return total(m, "policyd_ticks_total", policy=policy)


def policies_named(m: Samples) -> set[str]:
    names: set[str] = set()
    for metric in ("policyd_ticks_total", "policyd_actions_total", "policyd_interval_seconds",
                   "policyd_source_errors_total", "policyd_tick_duration_seconds_count",
                   "policyd_job_category"):
        names |= label_values(m, metric, "policy")
    return names - {""}


def test_broken_policy_file_keeps_the_last_good_policy(
        world: World, start_policyd: Callable[..., tuple[Policyd, Path]]) -> None:
    pd, policy = start_policyd(world, GOOD, interval=2)
    pid = pd.process.pid
    wait_for(lambda: all(world.shares(n, c) == 1024 for c, n in TRAINERS.items()),
             timeout_seconds=60, what="policyd to set both trainers to 1024 shares")
    assert pd.get("/readyz") == (200, "ok\n")
    start = pd.metrics()
    assert reload_errors(start) == 0

    # 1. Not YAML at all.
    write_atomically(policy, NOT_YAML)
    pushed = time.monotonic()
    wait_for(lambda: reload_errors(pd.metrics()) == 1, timeout_seconds=10,
             what="the first rejected reload")
    rejected_in = time.monotonic() - pushed
    status, body = pd.get("/readyz")
    assert status == 200, body  # still ready: it works with the last good policy
    assert "policy reload: rejected (1 problems); running the last good policies" in body, body

    # 2. YAML, but an invalid policy under another name that would set CPU quotas.
    write_atomically(policy, INVALID)
    wait_for(lambda: reload_errors(pd.metrics()) == 2, timeout_seconds=10,
             what="the second rejected reload")
    status, body = pd.get("/readyz")
    assert status == 200 and "policy reload: rejected (1 problems)" in body, body
    problems = [line.text for line in pd.log_since() if "policy reload:" in line.text]
    assert any("YAML syntax error" in line for line in problems), problems
    assert any("alpha" in line for line in problems), problems

    # The last good policy keeps ticking and acting: rs-a knocked to 512 goes back to 1024.
    broken = pd.metrics()
    world.set_shares("e1", "rs-a", 512)
    wait_for(lambda: world.shares("e1", "rs-a") == 1024, timeout_seconds=20,
             what=f"{GOOD} (the last good policy) to put rs-a back to 1024")
    wait_for(lambda: ticks(pd.metrics(), GOOD) >= ticks(broken, GOOD) + 2, timeout_seconds=20,
             what=f"ticks of {GOOD} while the file is broken")
    during = pd.metrics()
    assert total(during, "policyd_actions_total", policy=GOOD, result="applied") >= \
        total(broken, "policyd_actions_total", policy=GOOD, result="applied") + 1
    # Nothing from the broken file: no series under its name, no CPU quota on any trainer.
    assert policies_named(during) == {GOOD}, policies_named(during)
    for name, node in TRAINERS.items():
        assert world.cpu(node, name)["CpuQuota"] in (0, -1), world.cpu(node, name)
    assert total(during, "policyd_ticks_total", result="ok") == \
        total(during, "policyd_ticks_total")
    assert reload_errors(during) == 2  # counted once per change, not once per poll

    # 3. The fixed file: a renamed policy with another alpha is picked up by itself.
    write_atomically(policy, policy_yaml(FIXED, interval=2, alpha=0.02))
    fixed_at = time.monotonic()
    wait_for(lambda: total(pd.metrics(), "policyd_ticks_total", policy=FIXED, result="ok") >= 1,
             timeout_seconds=15, what=f"ticks of {FIXED}")
    picked_in = time.monotonic() - fixed_at
    wait_for(lambda: pd.get("/readyz") == (200, "ok\n"), timeout_seconds=5,
             what="the /readyz note to go")
    swapped = pd.metrics()
    wait_for(lambda: ticks(pd.metrics(), FIXED) >= ticks(swapped, FIXED) + 2, timeout_seconds=20,
             what=f"two more ticks of {FIXED}")
    after = pd.metrics()
    assert ticks(after, GOOD) == ticks(swapped, GOOD), f"{GOOD} still ticks after the swap"
    assert label_values(after, "policyd_interval_seconds", "policy") == {FIXED}
    assert BROKEN not in policies_named(after)
    world.set_shares("e2", "rs-b", 512)
    wait_for(lambda: world.shares("e2", "rs-b") == 1024, timeout_seconds=20,
             what=f"{FIXED} to act (rs-b back to 1024)")
    # (the metrics count a tick's actions when the tick ends, just after docker sees them)
    wait_for(lambda: total(pd.metrics(), "policyd_actions_total", policy=FIXED,
                           result="applied") >= 1, timeout_seconds=10,
             what=f"{FIXED}'s applied action in the metrics")
    assert reload_errors(pd.metrics()) == 2
    assert total(pd.metrics(), "policyd_ticks_total", result="error") == 0
    assert pd.alive() and pd.process.pid == pid
    assert not pd.unhealthy(), pd.unhealthy()[:5]
    assert pd.stop() == 0, pd.log_text()
    print(f"broken file rejected in {rejected_in:.1f} s; fixed file ticking in {picked_in:.1f} s")
