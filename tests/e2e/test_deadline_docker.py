"""(e) Deadline on a real Docker engine: an urgent and two long PyTorch jobs with deadlines on a
one-core engine (`tests/e2e/deadlines.py`: the shape and why), once without policyd (NA:
equal shares) and once under `policyd run` with the Deadline policy. Equal shares miss the
urgent job's deadline; Deadline meets all three. Creation, start and end of every job are the
engine's (`docker inspect`: Created, StartedAt, FinishedAt), and its deadline the label it was
created with.

The repeats are in `benchmarks/docker_proof.py deadline` (benchmarks/README.md): this test is
the short CI version (one NA and one Deadline run, the urgent job 15 s alone)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.deadlines import DeadlineShape, compare
from tests.e2e.harness import Lab

pytestmark = pytest.mark.slow


def test_deadline_meets_the_deadlines_equal_shares_miss(one_core_lab: Lab,
                                                        tmp_path: Path) -> None:
    runs = compare(one_core_lab, DeadlineShape(), tmp_path)
    na, dl = runs["NA"], runs["Deadline"]
    for run in (na, dl):
        print(f"\n{run.label}: probe {run.steps_per_second:.0f} steps/s, the run "
              f"{run.core_steps_per_second:.0f}; "
              + "; ".join(str(row) for row in run.table()))
    for run in (na, dl):
        assert all(j.exit_code == 0 for j in run.jobs.values()), run.table()
    # NA: nobody capped a job, and equal shares missed the urgent job's deadline
    assert all(q in ([], [0]) for q in na.quotas.values()), na.quotas
    assert not na.role("urgent").met, na.table()
    # Deadline: policyd capped the long jobs below the core while the urgent one ran ...
    assert any(0 < q < 100_000 for role in ("long-1", "long-2")
               for q in dl.quotas[dl.role(role).name]), dl.quotas
    # ... and every job met its deadline
    assert dl.missed() == [], dl.table()
