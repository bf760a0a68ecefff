"""policyd.sim.experiment: runs spread over forked workers give exactly the outcomes of the runs
made one after another, in the same order, and progress is told in that order."""

from __future__ import annotations

import json
import multiprocessing.context
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from policyd.sim import experiment, scenarios
from policyd.sim.experiment import run_outcome, run_outcomes
from policyd.sim.report import STRATEGIES, Outcome, to_json

# A child with no other thread, so that the forked path is the one taken; it records the process
# of every run, and prints the outcomes' JSON and those processes.
CHILD = """
import json, os, sys
from policyd.sim import experiment, scenarios
from policyd.sim.report import to_json
real = experiment.run
def traced(scenario, strategy, **kwargs):
    with open(sys.argv[2], "a") as log:
        log.write(f"{os.getpid()}\\n")
    return real(scenario, strategy, **kwargs)
experiment.run = traced
work = [("", scenarios.build(n)) for n in ("flowcon-fixed-3", "specon-fixed-20", "qoe-fixed-8")]
order = []
outcomes = experiment.run_outcomes(work, processes=int(sys.argv[1]),
                                   done=lambda i, o: order.append(i))
print(json.dumps({"report": to_json(outcomes), "order": order, "parent": os.getpid()}))
"""


def _child(processes: int, log: str) -> dict[str, object]:
    answer = subprocess.run([sys.executable, "-c", CHILD, str(processes), log], check=True,
                            capture_output=True, text=True)
    return json.loads(answer.stdout)  # type: ignore[no-any-return]


def test_forked_workers_give_the_outcomes_of_one_process(tmp_path: Path) -> None:
    one_log, two_log = f"{tmp_path}/one", f"{tmp_path}/two"
    alone, spread = _child(1, one_log), _child(2, two_log)
    assert spread["report"] == alone["report"]
    assert alone["order"] == spread["order"] == [0, 1, 2]
    with open(one_log) as log:
        assert {int(p) for p in log.read().split()} == {alone["parent"]}
    with open(two_log) as log:
        workers = [int(p) for p in log.read().split()]
    assert len(workers) == 3 * len(STRATEGIES)
    assert spread["parent"] not in workers and len(set(workers)) == 2


def test_another_thread_keeps_the_runs_in_this_process() -> None:
    """Forking beside a running thread could copy a lock it holds: the runs stay here."""
    work = [("", scenarios.build("flowcon-fixed-3"))]
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        seen: list[tuple[int, Outcome]] = []
        outcomes = run_outcomes(work, processes=2, done=lambda i, o: seen.append((i, o)))
    finally:
        stop.set()
        other.join()
    assert [i for i, _ in seen] == [0] and seen[0][1] is outcomes[0]
    assert to_json(outcomes) == to_json([run_outcome(work[0][1])])


def test_no_work_is_no_outcome() -> None:
    assert run_outcomes([], processes=4) == []


def test_no_pool_to_be_had_keeps_the_runs_in_this_process(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A process limit or no shared memory for the pool's locks: the runs are made here."""
    def refuse(self: object, processes: int) -> None:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(multiprocessing.context.ForkContext, "Pool", refuse)
    monkeypatch.setattr(threading, "active_count", lambda: 1)  # as in the command-line process
    work = [("", scenarios.build("flowcon-fixed-3"))]
    assert to_json(run_outcomes(work, processes=2)) == to_json([run_outcome(work[0][1])])
    assert experiment._FORKED_WORK is None
