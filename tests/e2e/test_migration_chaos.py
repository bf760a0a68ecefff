"""Chaos on a real migration (issue 11): policyd SIGKILLed after each step of a move, the
trainer killed during its checkpoint, the target engine stopped mid-move. After each, within a
bounded time: exactly one trainer runs, resumed from its newest checkpoint, the intent is
cleared; never two at once, and never none for longer than the policy's grace plus one cycle
(plus policyd's own downtime where it was killed). The machinery is tests/e2e/chaos.py; more
runs of each case: benchmarks/migration_chaos.py."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.chaos import CASES, Case, chaos_lab, job_name, run_case
from tests.e2e.harness import Lab

pytestmark = [
    pytest.mark.slow,
    # docker-py's UnixHTTPConnection.connect leaves its socket open when the engine's socket
    # file is gone, which is what stopping the target engine on purpose does to every client
    # of this test process that asks it meanwhile (the harness's pollers leave an engine alone
    # while it is `down`; a request already under way can still meet the closing socket).
    # They are collected before each test ends, so the filter covers them.
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning"),
]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """One lab for every case: engines, Prometheus and the trainer image are shared."""
    with chaos_lab(tmp_path_factory.mktemp("chaos"), [job_name(c) for c in CASES]) as lab:
        yield lab
    gc.collect()  # any socket left from the outage, under the last test's filter


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_disrupted_move_leaves_one_trainer_resumed_from_its_newest_checkpoint(
        world: Lab, case: Case, tmp_path: Path) -> None:
    began = time.monotonic()
    outcome = run_case(world, case, tmp_path)
    gc.collect()  # those sockets (see pytestmark), while this test's warning filter holds
    print(f"\n{case.name}: {time.monotonic() - began:.1f} s; on {outcome.running_on}, "
          f"restarts {outcome.restarts}, resumed/newest {outcome.resumed}, at most "
          f"{outcome.most_running} running, longest with none {outcome.longest_none_seconds} s "
          f"(allowed {outcome.allowed_none_seconds} s)")
    assert outcome.ok, (outcome.problems, outcome.policyd_log)
    if case.crash_at != "intent":
        assert outcome.resumed, "the job was stopped and started again"
