"""(e) Deadline on a real Docker engine: an urgent and two long PyTorch jobs with deadlines on a
one-core engine (`tests/e2e/deadlines.py`: the shape and why), once without policyd (NA:
equal shares) and once under `policyd run` with the Deadline policy. Equal shares miss the
urgent job's deadline; Deadline meets all three. Creation, start and end of every job are the
engine's (`docker inspect`: Created, StartedAt, FinishedAt), its deadline the label it was
created with, its CPU weight what the engine says (`HostConfig.CpuShares`).

What hangs on the machine, and what does not. The jobs and deadlines are sized from a probe's
speed right before each run; a deadline is wall-clock time, so whether it is met depends on
the machine keeping that speed through the run, which this shared machine does not always do
(benchmarks/README.md, "Deadline vs NA": two probes minutes apart have differed by a third).
The shape holds while the run's core goes at `FAIR` times its probe's speed: NA would meet the
urgent deadline at about 1.5 times it, and no allocation meets it below about 0.6. So:

* always claimed, whatever the machine did: every job exits 0; NA touches no weight and its
  urgent job does a third of the core's work (equal shares); Deadline lowers the long jobs'
  weights while the urgent job runs;
* claimed on a run whose speed stayed within `FAIR` of its probe's, both while the urgent
  job stepped and over the whole run (the long jobs' deadlines come after the urgent one: a
  core that slowed down once the urgent job was done missed them in a CI run on a loaded
  machine, at 0.97 of its probe in the urgent window and about 0.6 over the run): NA misses
  the urgent deadline; Deadline gives the urgent job most of the core's work and meets all
  three deadlines. A Deadline run outside it is run again (a fresh probe, fresh names), up to
  `ATTEMPTS` times; each run's speed is printed, and one that never comes within `FAIR` is
  said, not hidden.

The repeats are in `benchmarks/docker_proof.py deadline` (benchmarks/README.md): this test is
the short CI version (the urgent job 15 s alone)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.deadlines import (
    CI_ATTEMPTS,
    DeadlineRun,
    DeadlineShape,
    run_deadlines,
    under_deadline,
)
from tests.e2e.harness import Lab, round_prefix

pytestmark = pytest.mark.slow

FAIR = (0.7, 1.3)
"""The run's core speed over its probe's within which the shape tests the policy (above)."""
ATTEMPTS = CI_ATTEMPTS
EQUAL_SHARE = 1 / 3


def _fair(run: DeadlineRun) -> bool:
    """The core kept within `FAIR` of its probe's speed both while the urgent job stepped
    (the urgent deadline's window) and over the whole run (the long jobs')."""
    return all(FAIR[0] <= ratio <= FAIR[1]
               for ratio in (run.speed_over_probe, run.run_speed_over_probe))


def _show(run: DeadlineRun) -> None:
    print(f"\n{run.label}: probe {run.steps_per_second:.0f} steps/s, the core "
          f"{run.urgent_core_steps_per_second:.0f} while the urgent job stepped "
          f"({run.speed_over_probe:.2f} of the probe) and {run.run_core_steps_per_second:.0f} "
          f"over the whole run ({run.run_speed_over_probe:.2f}): "
          f"{'fair' if _fair(run) else 'NOT fair'}; the urgent job did "
          f"{run.urgent_work_share:.2f} of the core's work")
    for row in run.table():
        print(f"  {row}")


def test_deadline_meets_the_deadlines_equal_shares_miss(one_core_lab: Lab,
                                                        tmp_path: Path) -> None:
    shape = DeadlineShape()
    na = run_deadlines(one_core_lab, shape, round_prefix("na", 0), "NA-dl-0")
    _show(na)
    assert all(j.exit_code == 0 for j in na.jobs.values()), na.table()
    assert all(set(limits) <= {(0, 0), (1024, 0)} for limits in na.limits.values()), na.limits
    assert abs(na.urgent_work_share - EQUAL_SHARE) < 0.08, na.table()
    if _fair(na):
        assert not na.role("urgent").met, na.table()

    runs = []
    for attempt in range(ATTEMPTS):
        dl = under_deadline(one_core_lab, shape, tmp_path, round_=attempt)
        _show(dl)
        runs.append(dl)
        assert all(j.exit_code == 0 for j in dl.jobs.values()), dl.table()
        # the long jobs' weights went below the default while the urgent job ran
        urgent_end = dl.role("urgent").finished
        assert any(0 < shares < 1024 and at < urgent_end
                   for role in ("long-1", "long-2")
                   for (shares, _), at in zip(dl.limits[dl.role(role).name],
                                              dl.limit_times[dl.role(role).name],
                                              strict=True)), dl.table()
        if _fair(dl):
            break
    else:
        speeds = [(round(r.speed_over_probe, 2), round(r.run_speed_over_probe, 2))
                  for r in runs]
        print(f"\nno Deadline run of {ATTEMPTS} kept within {FAIR} of its probe's speed "
              f"(urgent window, whole run: {speeds}): the machine, not the policy, decided "
              "the deadlines; only the claims above were checked")
        return
    assert dl.urgent_work_share > 0.5, dl.table()
    assert dl.missed() == [], dl.table()
