"""(g) FlowCon2 on two real Docker engines of unequal cores (e1 one core, e2 two): `policyd
run` moves the converged job off the crowded e2 to e1, where it resumes from its checkpoint,
and starts a new job, submitted held on e1, on e2, where it grows fastest. Every figure from
the engines (events, `docker inspect`, `/proc`) and the trainers' logs
(tests/e2e/flowcon2_placement.py holds the shape and why). The comparison with NA and three
rounds are benchmarks/docker_proof.py's `flowcon2` (benchmarks/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.flowcon2_placement import (
    ENGINE_CPUS,
    PlacementShape,
    all_job_names,
    checks,
    compare,
)
from tests.e2e.harness import lab

pytestmark = pytest.mark.slow

CI_SCALE = 0.6
"""The jobs' steps as a share of the benchmark's: the move comes at 17,000-22,000 steps of
the converged job and the admission a second later, well before the shorter jobs end."""


def test_flowcon2_moves_the_converged_job_and_places_the_new_one_where_it_grows(
        tmp_path: Path) -> None:
    with lab(tmp_path, engines=2, cpus=ENGINE_CPUS, jobs=all_job_names(1)) as world:
        run = compare(world, PlacementShape().scaled(CI_SCALE), tmp_path / "round-0",
                      baseline=False)["FlowCon2"]
    print("\nFlowCon2 on e1 (1 core) and e2 (2 cores):\n" + "\n".join(
        json.dumps(row) for row in run.table()) + "\n" + "\n".join(run.actions))
    assert checks(run) == [], (run.table(), run.actions)
    assert any("migrate" in a and "predicted gain" in a for a in run.actions), run.actions
    assert any("admit" in a and "grows fastest" in a for a in run.actions), run.actions
