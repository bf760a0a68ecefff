"""Where the QoE policy's targets go short of the oracle's: the floor, and the speed it measures
(benchmarks/README.md, "qoe.py", twenty-third session; issue 15).

    .venv/bin/python benchmarks/qoe_floor.py [--beta B ...] [--seeds 1-10] [--mode shares|quota]
        [--scenario NAME ...] [--jobs 2] [--json]

The qoe-* oracle (`policyd.sim.qoe_oracle`) knows every job's true speed and keeps no floor.
The policy keeps a floor, capacity / (beta n) per job, and sizes each job from the speed model
it fits to what the job reported. To tell the two apart, every scenario and seed is played by
the QoE policy twice per beta: as shipped ("measured"), and with each job's fitted speed model
replaced by its true one ("true speed": the simulator's profile, serial and parallel seconds
per step and the most cores it can use, i.e. what the oracle knows; the replacement is made
where the policy reads its models, `policyd.engine.qoe._speed`, so nothing else changes).
Printed per beta: targets met summed over the seeds, the oracle's sum, and jobs whose limit
reversed more than twice after their first minute.

Development seeds only by default (1-10: never the scenarios' recorded seeds); qoe-fixed-8
has no random draw, so it is played once. The simulator is deterministic: one run is the
measurement.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from typing import Any

import numpy as np
import repository  # noqa: F401  (the repository on sys.path, after PYTHONPATH's trees)

from policyd.engine import qoe
from policyd.engine.speed import SpeedModel
from policyd.model import Container, Snapshot
from policyd.sim import scenarios
from policyd.sim.qoe_scenarios import qoe_policy
from policyd.sim.report import qoe_summary
from policyd.sim.run import run
from policyd.sim.types import JobSpec

QOE = ("qoe-fixed-8", "qoe-random-12", "qoe-random-32-4w", "qoe-burst-16-2w")
_MEASURED = qoe._speed


Speeds = Callable[..., tuple[dict[str, SpeedModel], dict[str, float]]]


def true_speed(specs: dict[str, JobSpec]) -> Speeds:
    """`qoe._speed` with each job's model replaced by its true one (module docstring)."""
    def speed(snapshot: Snapshot, containers: Sequence[Container], *,
              soft: bool) -> tuple[dict[str, SpeedModel], dict[str, float]]:
        models, grow = _MEASURED(snapshot, containers, soft=soft)
        for c in containers:
            spec = specs[c.id]
            one_core = spec.profile.iteration_seconds_1core * spec.work_scale
            p = spec.profile.parallel_fraction
            most = float(spec.profile.max_parallelism)
            models[c.id] = replace(
                models[c.id], serial_seconds=np.array([one_core * (1 - p)]),
                parallel_seconds=np.array([one_core * p]), cap_cores=np.array([most]),
                spread=np.zeros(1))
            grow[c.id] = most
        return models, grow
    return speed


def play(task: tuple[str, int, float, str, bool]) -> dict[str, Any]:
    name, seed, beta, mode, truth = task
    scenario = scenarios.build(name, seed)
    qoe._speed = true_speed({j.id: j for j in scenario.jobs}) if truth else _MEASURED
    try:
        result = run(scenario, "policy", policies=[qoe_policy(name, {"beta": beta,
                                                                     "mode": mode})])
    finally:
        qoe._speed = _MEASURED
    summary = qoe_summary(result) or {"jobs_over_two_reversals": 0}
    return {"scenario": name, "seed": seed, "beta": beta, "true_speed": truth,
            "met": result.targets_met, "over_two": summary["jobs_over_two_reversals"]}


def oracle(task: tuple[str, int]) -> dict[str, Any]:
    name, seed = task
    return {"scenario": name, "seed": seed,
            "met": run(scenarios.build(name, seed), "oracle").targets_met}


def seeds_of(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--beta", type=float, action="append")
    parser.add_argument("--seeds", default="1-10", help="a seed or a range, e.g. 101-104")
    parser.add_argument("--mode", choices=("shares", "quota"), default="shares")
    parser.add_argument("--scenario", action="append", choices=QOE)
    parser.add_argument("--jobs", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    names = args.scenario or list(QOE)
    betas = args.beta or [4.0, 8.0, 100.0]
    seeds = seeds_of(args.seeds)
    draws = [(n, s) for n in names for s in (seeds[:1] if n == "qoe-fixed-8" else seeds)]
    tasks = [(n, s, b, args.mode, truth) for b in betas for truth in (False, True)
             for n, s in draws]
    with ProcessPoolExecutor(args.jobs) as pool:
        runs = list(pool.map(play, tasks))
        oracles = list(pool.map(oracle, draws))
    if args.json:
        print(json.dumps({"runs": runs, "oracle": oracles}, indent=2))
        return 0
    print(f"seeds {args.seeds}, mode {args.mode}; targets met summed over the seeds "
          f"(jobs over two reversals)")
    header = "| beta | speeds | " + " | ".join(names) + " | all |"
    print(header)
    print("|---:|---|" + "---:|" * (len(names) + 1))
    for b in betas:
        for truth in (False, True):
            cells, total, over = [], 0, 0
            for n in names:
                rows = [r for r in runs if r["scenario"] == n and r["beta"] == b
                        and r["true_speed"] == truth]
                met, two = sum(r["met"] for r in rows), sum(r["over_two"] for r in rows)
                cells.append(f"{met} ({two})")
                total, over = total + met, over + two
            print(f"| {b:g} | {'true' if truth else 'measured'} | " + " | ".join(cells)
                  + f" | {total} ({over}) |")
    cells = [str(sum(r["met"] for r in oracles if r["scenario"] == n)) for n in names]
    print("| - | oracle | " + " | ".join(cells) + f" | {sum(r['met'] for r in oracles)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
