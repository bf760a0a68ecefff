"""(g) FlowCon2 on two real Docker engines of unequal cores (e1 one core, e2 two): `policyd
run` moves the converged job off the crowded e2 to e1, where it resumes from its checkpoint,
and starts a new job, submitted held on e1, on e2, where it grows fastest. Every figure from
the engines (events, `docker inspect`, `/proc`) and the trainers' logs
(tests/e2e/flowcon2_placement.py holds the shape and why). The comparison with NA and three
rounds are benchmarks/docker_proof.py's `flowcon2` (benchmarks/README.md).

The move is sized to be made on any host. Its predicted gain is, for the most part, how long
the growing jobs would keep the converged job at the floor on e2 (after that it would have a
core there too): the growing jobs' remaining seconds when it turns converged. So the jobs are
sized in seconds of this host's core, not in steps (a probe job measures the core's steps/s
first: fixed steps give a faster host a smaller gain), the growing jobs get enough work to keep
that gain well above the move's price, and the move is costed at 5 s (the pause a move costs
here: its checkpoint, a new container, torch's import), margin 1: a 10 s bar. The eighteenth
session's version (growing jobs of 25 s, cost 10 s: a 20 s bar) passed twice on a busy host,
where the jobs ran slower than the probe and their remaining seconds were larger, and failed
twice on a quiet one, the gain under the bar (benchmarks/README.md, docker_proof.py).

Once the moved job has ended on e1 and the new job has started on e2, the proof is made: the
harness stops policyd and then the jobs still running (SIGTERM: each checkpoints and exits 0)
rather than wait for their last steps (`run_placement(cut_short=True)`).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tests.e2e.flowcon2_placement import (
    ENGINE_CPUS,
    SMALL,
    PlacementShape,
    all_job_names,
    checks,
    compare,
    flowcon2_policy,
)
from tests.e2e.harness import JobSpec, Lab, lab, probe_steps_per_second

pytestmark = pytest.mark.slow

PROBE = "fc2-probe"
PROBE_STEPS = 4000
CORE_SECONDS = {"converged": 30.0, "grow": 45.0, "new": 17.0}
"""Each job's work in seconds of one core alone (the probe's speed). Three jobs on e2's two
cores: the converged job turns converged after roughly 10-15 s; the growing jobs then have
about 30 s of work left at nearly a core each, which is the gain's order (module docstring)."""
COST_SECONDS = 5.0
"""The move's price in this proof's policy: the bar is COST_SECONDS x (1 + margin 1)."""


def probe_speed(world: Lab, shape: PlacementShape) -> float:
    """Steps/s of one job alone on e1's core (the shape's model), from its log, the start-up
    left out."""
    spec = JobSpec(PROBE, steps=PROBE_STEPS, lr=shape.grow_lr, smoothing=shape.smoothing,
                   print_every=500)
    return probe_steps_per_second(world.engine(SMALL), spec, world.ports[PROBE],
                                  world.ckpt / "probe")


def sized(shape: PlacementShape, steps_per_second: float) -> PlacementShape:
    return replace(shape, **{f"{role}_steps": round(seconds * steps_per_second)
                             for role, seconds in CORE_SECONDS.items()})


def test_flowcon2_moves_the_converged_job_and_places_the_new_one_where_it_grows(
        tmp_path: Path) -> None:
    with lab(tmp_path, engines=2, cpus=ENGINE_CPUS, jobs=[*all_job_names(1), PROBE]) as world:
        speed = probe_speed(world, PlacementShape())
        shape = sized(PlacementShape(), speed)
        run = compare(world, shape, tmp_path / "round-0", baseline=False,
                      policy=flowcon2_policy(cost=COST_SECONDS), cut_short=True)["FlowCon2"]
    print(f"\nFlowCon2 on e1 (1 core) and e2 (2 cores); probe {speed:.0f} steps/s; jobs of "
          f"{shape.converged_steps}, {shape.grow_steps} and {shape.new_steps} steps:\n"
          + "\n".join(json.dumps(row) for row in run.table()) + "\n" + "\n".join(run.actions))
    assert checks(run) == [], (speed, run.table(), run.actions)
    assert any("migrate" in a and "predicted gain" in a for a in run.actions), run.actions
    assert any("admit" in a and "grows fastest" in a for a in run.actions), run.actions
    assert not [a for a in run.actions if "action failed" in a]
    assert run.role("converged").name not in run.stopped  # it ended at its last step, on e1
