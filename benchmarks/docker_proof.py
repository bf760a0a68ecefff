"""The end-to-end figures on real Docker engines (benchmarks/README.md, "Docker proof").

    .venv/bin/python benchmarks/docker_proof.py [flowcon|specon|listener|all] [--json]
        [--work-core-seconds S] [--stagger-seconds T]    (FlowCon's job length and spacing)

Drives the code of tests/e2e/ (tests/e2e/harness.py): real dockerd engines as hosts, the
trainer image, a real Prometheus (and Alertmanager), and `policyd run` as a child process.
Needs root (dockerd). Prints the figures; `--json` prints them as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.e2e.harness import (
    FLOWCON_JOBS,
    SPECON_JOBS,
    FlowConShape,
    SpeConShape,
    flowcon_policy,
    lab,
    measure_listener,
    policyd_run,
    run_flowcon_jobs,
    run_specon,
    specon_policy,
    trainer_steps_per_second,
)


def flowcon(root: Path, *, work_core_seconds: float | None = None,
            stagger_seconds: float | None = None) -> dict[str, Any]:
    with lab(root, engines=1, jobs=FLOWCON_JOBS) as world:
        shape = FlowConShape(steps_per_second=trainer_steps_per_second(world))
        shape = replace(shape, **{k: v for k, v in (
            ("work_core_seconds", work_core_seconds), ("stagger_seconds", stagger_seconds))
            if v is not None})
        with policyd_run(root / "policyd", flowcon_policy(), engines=world.engines,
                         prometheus_url=world.prometheus.url):
            policy = run_flowcon_jobs(world, shape, "FlowCon")
        baseline = run_flowcon_jobs(world, shape, "NA")
    return {"shape": {"stagger_seconds": shape.stagger_seconds, "steps": shape.steps,
                      "steps_per_second": round(shape.steps_per_second),
                      "work_core_seconds": shape.work_core_seconds,
                      "lr": shape.lr, "quality_loss": shape.quality},
            "flowcon": {"jobs": policy.table(), "makespan": round(policy.makespan, 1)},
            "na": {"jobs": baseline.table(), "makespan": round(baseline.makespan, 1)}}


def specon(root: Path) -> dict[str, Any]:
    with lab(root, engines=2, jobs=SPECON_JOBS, with_alertmanager=True) as world:
        assert world.alertmanager is not None
        with policyd_run(root / "policyd", specon_policy(), engines=world.engines,
                         prometheus_url=world.prometheus.url,
                         alertmanager_url=world.alertmanager.url) as policyd:
            move = run_specon(world, SpeConShape(), policyd)
    return {"from": move.from_node, "to": move.to_node,
            "moved_after_seconds": round(move.old_died - move.converged_started, 1),
            "checkpoint_step": move.checkpoint_step, "resume_step": move.resume_step,
            "pause_seconds": round(move.pause_seconds, 2),
            "loss_first": round(move.loss_first, 4), "loss_before": round(move.loss_before, 4),
            "loss_after": round(move.loss_after, 4),
            "finished_after_move_seconds": round(move.finished - move.new_started, 1),
            "alert_labels": move.alerts[0]["labels"] if move.alerts else None}


def listener(root: Path) -> dict[str, Any]:
    jobs = ("lat-base", "lat-new-1", "lat-new-2", "lat-new-3", "lat-new-4", "lat-new-5")
    with lab(root, engines=1, jobs=jobs) as world, \
            policyd_run(root / "policyd", flowcon_policy(), engines=world.engines,
                        prometheus_url=world.prometheus.url) as policyd:
        found = measure_listener(world, policyd, rounds=5)
    own = [x.own_seconds for x in found]
    other = [x.neighbour_seconds for x in found]
    return {"own_seconds": [round(v, 2) for v in own],
            "own_median": round(statistics.median(own), 2), "own_max": round(max(own), 2),
            "neighbour_seconds": [round(v, 2) for v in other],
            "neighbour_median": round(statistics.median(other), 2),
            "neighbour_max": round(max(other), 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("which", nargs="?", default="all",
                        choices=("flowcon", "specon", "listener", "all"))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--work-core-seconds", type=float, default=None,
                        help="FlowCon: each job's work in seconds of one core (default 40)")
    parser.add_argument("--stagger-seconds", type=float, default=None,
                        help="FlowCon: seconds between job starts (default 22)")
    args = parser.parse_args()
    runs: dict[str, Callable[[Path], dict[str, Any]]] = {
        "flowcon": partial(flowcon, work_core_seconds=args.work_core_seconds,
                           stagger_seconds=args.stagger_seconds),
        "specon": specon, "listener": listener}
    chosen = list(runs) if args.which == "all" else [args.which]
    out: dict[str, Any] = {}
    for name in chosen:
        with tempfile.TemporaryDirectory(prefix=f"pd-proof-{name}-") as tmp:
            out[name] = runs[name](Path(tmp))
        if not args.json:
            print(f"== {name}")
            print(json.dumps(out[name], indent=2))
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
