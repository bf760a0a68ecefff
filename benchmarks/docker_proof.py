"""The end-to-end figures on real Docker engines (benchmarks/README.md, "Docker proof").

    .venv/bin/python benchmarks/docker_proof.py [flowcon|specon|listener|all] [--json]
        [--steps N] [--stagger-steps K]    (FlowCon: steps a job; job 2 when job 1 is at K)

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
    listener_latencies,
    policyd_run,
    run_flowcon_jobs,
    run_specon,
    specon_policy,
)


def flowcon(root: Path, *, steps: int | None = None,
            stagger_steps: int | None = None) -> dict[str, Any]:
    shape = replace(FlowConShape(), **{k: v for k, v in (
        ("steps", steps), ("stagger_steps", stagger_steps)) if v is not None})
    with lab(root, engines=1, jobs=FLOWCON_JOBS) as world:
        with policyd_run(root / "policyd", flowcon_policy(), engines=world.engines,
                         prometheus_url=world.prometheus.url) as policyd:
            policy = run_flowcon_jobs(world, shape, "FlowCon",
                                      converged=lambda n: policyd.category(n) == "CL")
        baseline = run_flowcon_jobs(world, shape, "NA", stagger_seconds=policy.stagger_seconds)
    return {"shape": {"steps": shape.steps, "stagger_steps": shape.stagger_steps,
                      "lr": shape.lr, "quality_loss": shape.quality},
            "t_seconds": {"flowcon": round(policy.stagger_seconds, 1),
                          "na": round(baseline.stagger_seconds, 1)},
            "job1_step_at_t": {"flowcon": policy.step_at_stagger, "na": baseline.step_at_stagger},
            "alone_steps_per_second": {"flowcon": round(policy.alone_steps_per_second),
                                       "na": round(baseline.alone_steps_per_second)},
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
    found = listener_latencies(root, rounds=5)
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
    parser.add_argument("--steps", type=int, default=None,
                        help="FlowCon: steps a job (default 150000)")
    parser.add_argument("--stagger-steps", type=int, default=None,
                        help="FlowCon: job 2 starts when job 1 is at this step, job 3 at 2t "
                             "(default 75000)")
    args = parser.parse_args()
    runs: dict[str, Callable[[Path], dict[str, Any]]] = {
        "flowcon": partial(flowcon, steps=args.steps, stagger_steps=args.stagger_steps),
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
