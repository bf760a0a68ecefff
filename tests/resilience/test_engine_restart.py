"""A Docker engine restarts under a running policyd (dockerd stopped, started again with the
same data root): policyd stays up, acts on no wrong container, keeps managing the other
engine meanwhile, reconnects its event listener, and acts on the restarted engine again, all
without being restarted itself.

The trainer containers run with the restart policy `unless-stopped` (see conftest): when e1
stops, its trainer is sent SIGTERM (it checkpoints and exits 0); when e1 comes back, the engine
starts the same container (same id, same HostConfig) and the job resumes from its checkpoint.

How the event listener is observed: the policy's interval is 2 s, backing off to 8 s while every
job is in CL (the tests' constant evaluation makes them so). A container started on e1 after the
restart (`rs-other`: managed, so the listener hears it, but `app=other`, so the policy's selector
never takes it) can only bring the interval back from 8 s through Algorithm 2's listener (reset
to the base, tick now): no snapshot the policy decides on ever holds it. The test sees the
listener's log line, the interval gauge leaving 8 s, and a tick, within a few seconds, against a
scheduled interval of 8 s; and rs-other's CPU shares stay as they were (not the policy's job).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

import docker
import pytest

from tests.integration.docker_engines import Engine
from tests.resilience.conftest import DECOY, TRAINERS, World, run_sleeper
from tests.resilience.harness import Policyd, Samples, label_values, total, wait_for

pytestmark = pytest.mark.slow

POLICY = "resil-engine"
BACKED_OFF = 8.0
OTHER = "rs-other"
OTHER_LABELS = {"policyd.io/managed": "true", "app": "other"}


def ticks(m: Samples, result: str | None = None) -> float:
    return total(m, "policyd_ticks_total", policy=POLICY,
                 **({"result": result} if result else {}))


def interval(m: Samples) -> float:
    return total(m, "policyd_interval_seconds", policy=POLICY)


def nodes_categorised(m: Samples) -> dict[str, set[str]]:
    """Node -> containers that have a category series (what the last tick assessed)."""
    out: dict[str, set[str]] = {}
    for (name, labels), _ in m.items():
        if name == "policyd_job_category":
            ls = dict(labels)
            out.setdefault(ls["node"], set()).add(ls["container"])
    return out


def test_engine_restart_mid_run(world: World,
                                start_policyd: Callable[..., tuple[Policyd, Path]]) -> None:
    e1 = world.engines["e1"]
    pd, _ = start_policyd(world, POLICY, interval=2, max_interval=BACKED_OFF)
    pid = pd.process.pid
    try:
        _run(world, pd, e1)
    finally:
        if e1.process is None or e1.process.poll() is not None:
            e1.start()  # leave the world as we found it
        with contextlib.suppress(docker.errors.NotFound):
            world.api("e1").remove_container(OTHER, force=True)
    assert pd.alive() and pd.process.pid == pid
    assert not pd.unhealthy(), pd.unhealthy()[:5]
    assert pd.stop() == 0, pd.log_text()


def _run(world: World, pd: Policyd, e1: Engine) -> None:
    wait_for(lambda: all(world.shares(n, c) == 1024 for c, n in TRAINERS.items()),
             timeout_seconds=60, what="policyd to set both trainers to 1024 shares")
    wait_for(lambda: interval(pd.metrics()) == BACKED_OFF, timeout_seconds=40,
             what=f"the interval to back off to {BACKED_OFF:g} s (every job in CL)")
    trainer_id = world.inspect("e1", "rs-a")["Id"]
    decoy_id = world.inspect("e1", DECOY)["Id"]
    assert world.shares("e1", DECOY) == 512
    before = pd.metrics()

    # --- e1 goes down --------------------------------------------------------------------
    stopping = time.monotonic()
    e1.stop()
    down_at = time.monotonic()
    print(f"e1 stopped in {down_at - stopping:.1f} s")
    # The next tick leaves e1 out (no category series on e1) and still succeeds (e2 answers).
    wait_for(lambda: "e1" not in nodes_categorised(m := pd.metrics())
             and ticks(m, "ok") > ticks(before, "ok"),
             timeout_seconds=3 * BACKED_OFF, what="an ok tick that leaves e1's containers out")
    # policyd keeps managing e2 meanwhile: rs-b knocked to 512 goes back to 1024.
    world.set_shares("e2", "rs-b", 512)
    wait_for(lambda: world.shares("e2", "rs-b") == 1024, timeout_seconds=3 * BACKED_OFF,
             what="policyd to act on e2 while e1 is down")
    assert pd.alive()
    down = pd.metrics()
    print(f"e1 down for {time.monotonic() - down_at:.1f} s")

    # --- e1 comes back with the same data root -------------------------------------------
    e1.start()
    up_at = time.monotonic()
    wait_for(lambda: world.running("e1", "rs-a") and world.running("e1", DECOY),
             timeout_seconds=30, what="the engine to restart rs-a and the decoy itself")
    assert world.inspect("e1", "rs-a")["Id"] == trainer_id  # the same container, restarted
    assert world.inspect("e1", DECOY)["Id"] == decoy_id
    wait_for(lambda: "rs-a" in world.exported(), timeout_seconds=60,
             what="rs-a's loss in Prometheus again")
    logs = world.api("e1").logs("rs-a").decode(errors="replace")
    assert "checkpoint: step=" in logs and logs.count("resumed: step=") >= 1, logs[-2000:]
    wait_for(lambda: "rs-a" in nodes_categorised(pd.metrics()).get("e1", set()),
             timeout_seconds=60, what="a tick that assesses rs-a on e1 again")
    seen_again = time.monotonic() - up_at

    # --- the event listener reconnected: a container started now resets FlowCon at once ----
    wait_for(lambda: interval(pd.metrics()) == BACKED_OFF, timeout_seconds=60,
             what=f"the interval to back off to {BACKED_OFF:g} s again")
    quiet = pd.metrics()
    started = time.monotonic()
    run_sleeper(e1, OTHER, labels=OTHER_LABELS, shares=512)
    wait_for(lambda: any(f"container {OTHER} started on e1" in line.text
                         for line in pd.log_since(started)),
             timeout_seconds=BACKED_OFF, what=f"policyd's listener to report {OTHER} starting")
    heard = max(line.at for line in pd.log_since(started)
                if f"container {OTHER} started on e1" in line.text) - started
    wait_for(lambda: interval(m := pd.metrics()) < BACKED_OFF and ticks(m) > ticks(quiet),
             timeout_seconds=BACKED_OFF, what="the event to reset the interval and run a tick")
    reset = time.monotonic() - started

    # --- ticks act on e1 again, on the right containers only -----------------------------
    world.set_shares("e1", "rs-a", 512)
    wait_for(lambda: world.shares("e1", "rs-a") == 1024, timeout_seconds=3 * BACKED_OFF,
             what="policyd to act on the restarted engine (rs-a back to 1024)")
    # (the metrics count a tick's actions when the tick ends, just after docker sees them)
    wait_for(lambda: total(pd.metrics(), "policyd_actions_total", policy=POLICY,
                           result="applied")
             >= total(down, "policyd_actions_total", policy=POLICY, result="applied") + 1,
             timeout_seconds=10, what="the applied action on e1 in the metrics")
    end = pd.metrics()
    assert world.shares("e1", DECOY) == 512, "the unmanaged decoy was touched"
    assert world.cpu("e1", OTHER) == {"CpuShares": 512, "CpuQuota": 0, "CpuPeriod": 0}, \
        "a container the policy does not select was touched:\n" + "\n".join(
            line.text for line in pd.log_since(started))
    assert OTHER not in {c for cs in nodes_categorised(end).values() for c in cs}
    failed = total(end, "policyd_actions_total", result="failed")
    failed_lines = [line.text for line in pd.log_since() if "action failed" in line.text]
    assert failed == len(failed_lines), failed_lines  # every failure counted, none crashed
    assert ticks(end, "error") == 0, pd.log_text()
    assert label_values(end, "policyd_source_errors_total", "kind") <= {"connection"}
    print(f"e1 back: rs-a assessed again after {seen_again:.1f} s; {OTHER}'s start heard after "
          f"{heard:.1f} s, interval reset + tick after {reset:.1f} s; "
          f"{failed:g} failed actions; ticks {ticks(end, 'ok'):g} ok")
