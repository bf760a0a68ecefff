"""The end-to-end figures on real Docker engines (benchmarks/README.md, "Docker proof").

    .venv/bin/python benchmarks/docker_proof.py
        [flowcon|specon|listener|predictive|deadline|qoe|flowcon2|all]
        [--json] [--steps N] [--stagger-steps K]    (FlowCon: steps a job; job 2 when job 1 is at K)
        [--scale F] [--rounds R]    (predictive: the remaining-work shape times F, R rounds;
                                     deadline: the urgent job's 15 s alone times F, R rounds;
                                     qoe: the jobs' lengths times F, R rounds)
        [--no-stop]                 (qoe: without the stop at a target loss)
        [--no-baseline]             (flowcon2: without the NA run beside each FlowCon2 run)
        [--keep DIR]                (keep each proof's files, policyd's log among them, in DIR)

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

import repository  # noqa: F401  (the repository on sys.path, after PYTHONPATH's trees)

from tests.e2e import deadlines, flowcon2_placement, qoe_targets, target_stop
from tests.e2e.harness import (
    FLOWCON_JOBS,
    SPECON_JOBS,
    FlowConShape,
    SpeConShape,
    StaggeredRun,
    flowcon_policy,
    lab,
    listener_latencies,
    policyd_run,
    run_flowcon_jobs,
    run_specon,
    specon_policy,
)
from tests.e2e.remaining_work import (
    POLICIES,
    Compared,
    RemainingWorkShape,
    all_job_names,
    average_jct_steps,
    compare,
    eta_checks,
    favoured,
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


def predictive(root: Path, *, scale: float = 2.0, rounds: int = 3) -> dict[str, Any]:
    """The remaining-work shape (tests/e2e/remaining_work.py) times `scale`, `rounds` times on
    one one-core engine: NA, FlowCon and Predictive each round, the order rotated from round to
    round (so that a drift of the shared machine's load does not always fall on one policy)."""
    shape = RemainingWorkShape().scaled(scale)
    keys = list(POLICIES)
    found: list[dict[str, Any]] = []
    with lab(root, engines=1, cpus="0", jobs=all_job_names(rounds)) as world:
        for r in range(rounds):
            order = keys[r % len(keys):] + keys[:r % len(keys)]

            def progress(label: str, run: StaggeredRun, r: int = r) -> None:
                print(f"round {r} {label}: average JCT {run.average_jct:.1f} s "
                      f"({average_jct_steps(run):.0f} steps), makespan {run.makespan:.1f} s, "
                      f"job 1 alone {run.alone_steps_per_second:.0f} steps/s",
                      file=sys.stderr, flush=True)
            done = compare(world, shape, root / f"round-{r}", round_=r, order=order,
                           on_run=progress)
            found.append(round_figures(done, shape, [POLICIES[k] for k in order]))
            print(json.dumps(found[-1]), file=sys.stderr, flush=True)  # kept if a later round fails
    return {"shape": {"medium_steps": shape.medium_steps, "long_steps": shape.long_steps,
                      "short_steps": shape.short_steps, "stagger_steps": shape.stagger_steps,
                      "lr": shape.lr, "quality_loss": shape.quality},
            "rounds": found, "summary": summary(found)}


def deadline(root: Path, *, scale: float = 1.0, rounds: int = 3) -> dict[str, Any]:
    """The deadline shape (tests/e2e/deadlines.py), the urgent job's time alone times `scale`,
    `rounds` times on one one-core engine: NA, then Deadline under `policyd run`."""
    shape = replace(deadlines.DeadlineShape(),
                    urgent_seconds=deadlines.DeadlineShape().urgent_seconds * scale)
    found: list[dict[str, Any]] = []
    with lab(root, engines=1, cpus="0", jobs=deadlines.NAMES.every(rounds)) as world:
        for r in range(rounds):
            runs = deadlines.compare(world, shape, root / f"round-{r}", round_=r)
            found.append({label: {"probe_steps_per_second": round(run.steps_per_second),
                                  "run_steps_per_second": round(run.core_steps_per_second),
                                  "missed": run.missed(), "jobs": run.table()}
                          for label, run in runs.items()})
            print(json.dumps(found[-1]), file=sys.stderr, flush=True)  # kept if a later round fails
    return {"shape": {"urgent_seconds": shape.urgent_seconds, "long_factor": shape.long_factor,
                      "urgent_deadline_t": shape.urgent_deadline,
                      "long_deadline_work": shape.long_deadline,
                      "startup_seconds": shape.startup_seconds},
            "rounds": found,
            "summary": {label: {
                "rounds_all_met": sum(not r[label]["missed"] for r in found),
                "urgent_slack_seconds": [next(j["slack_s"] for j in r[label]["jobs"]
                                              if j["job"].endswith("-urgent")) for r in found]}
                for label in deadlines.RUNS.values()}}


def qoe(root: Path, *, scale: float = 1.0, rounds: int = 3, stop: bool = True
        ) -> dict[str, Any]:
    """The QoE shape (tests/e2e/qoe_targets.py), the jobs' lengths times `scale`, `rounds` times
    on one one-core engine: NA, then QoE under `policyd run`; then, unless `stop` is False, one
    job stopped at its target loss (tests/e2e/target_stop.py) each round."""
    base = qoe_targets.QoeShape()
    shape = replace(base, heavy_seconds=base.heavy_seconds * scale,
                    light_work_seconds=base.light_work_seconds * scale)
    found: list[dict[str, Any]] = []
    jobs = [*qoe_targets.NAMES.every(rounds), *target_stop.all_job_names(rounds)]
    with lab(root, engines=1, cpus="0", jobs=jobs) as world:
        for r in range(rounds):
            runs = qoe_targets.compare(world, shape, root / f"round-{r}", round_=r)
            figures: dict[str, Any] = {label: {
                "probe_steps_per_second": round(run.steps_per_second),
                "run_steps_per_second": round(run.core_steps_per_second),
                "run_over_probe": round(run.core_steps_per_second / run.steps_per_second, 3),
                "together_seconds": round(run.together_seconds, 1),
                "feasible": run.feasible, "missed": run.missed(), "jobs": run.table()}
                for label, run in runs.items()}
            if stop:
                figures["stop"] = target_stop.run_stop(
                    world, target_stop.StopShape(), root / f"round-{r}", round_=r).table()
            found.append(figures)
            print(json.dumps(found[-1]), file=sys.stderr, flush=True)  # kept if a later round fails
    return {"shape": {"heavy_fraction": shape.heavy_fraction,
                      "light_fraction": shape.light_fraction,
                      "heavy_seconds": shape.heavy_seconds,
                      "light_work_seconds": shape.light_work_seconds},
            "rounds": found,
            "summary": {label: {"rounds_both_met": sum(not r[label]["missed"] for r in found),
                                "heavy_ratio": [next(j["ratio"] for j in r[label]["jobs"]
                                                     if j["job"].endswith("-heavy"))
                                                for r in found]}
                        for label in qoe_targets.RUNS.values()}}


def flowcon2(root: Path, *, scale: float = 1.0, rounds: int = 3, baseline: bool = True
             ) -> dict[str, Any]:
    """The placement shape (tests/e2e/flowcon2_placement.py), the jobs' steps times `scale`,
    `rounds` times on two engines of unequal cores (e1 on CPU 0, e2 on CPUs 0-1): FlowCon2
    under `policyd run`, then (`baseline`) NA; each round's checks (the placement, the move,
    every exit) and figures."""
    shape = flowcon2_placement.PlacementShape().scaled(scale)
    found: list[dict[str, Any]] = []
    kept: list[dict[str, flowcon2_placement.PlacementRun]] = []
    with lab(root, engines=2, cpus=flowcon2_placement.ENGINE_CPUS,
             jobs=flowcon2_placement.all_job_names(rounds)) as world:
        for r in range(rounds):
            runs = flowcon2_placement.compare(world, shape, root / f"round-{r}", round_=r,
                                              baseline=baseline)
            kept.append(runs)
            found.append({label: {
                "engine_ncpu": run.engine_cpus,
                "submitted_at": round(run.submitted_at, 1),
                "average_jct": round(run.average_jct, 1), "makespan": round(run.makespan, 1),
                "jobs": run.table(),
                **({"checks_failed": flowcon2_placement.checks(run), "actions": run.actions}
                   if label == "FlowCon2" else {})}
                for label, run in runs.items()})
            print(json.dumps(found[-1]), file=sys.stderr, flush=True)  # kept if a later round fails
    return {"shape": {"converged_steps": shape.converged_steps, "grow_steps": shape.grow_steps,
                      "new_steps": shape.new_steps, "converged_lr": shape.converged_lr,
                      "grow_lr": shape.grow_lr, "engine_cpus": flowcon2_placement.ENGINE_CPUS},
            "rounds": found, "summary": flowcon2_placement.summary(kept)}


def round_figures(done: Compared, shape: RemainingWorkShape, order: list[str]
                  ) -> dict[str, Any]:
    """One round: per policy its jobs, average JCT (in seconds, and in the core's work:
    `average_jct_steps`), makespan and how often the job with the least remaining work had the
    core's highest weight; Predictive's ETAs against the engine."""
    out: dict[str, Any] = {"order": order}
    for label, run in done.runs.items():
        top = favoured(run, shape)
        out[label] = {"jobs": run.table(), "average_jct": round(run.average_jct, 1),
                      "average_jct_steps": round(average_jct_steps(run)),
                      "makespan": round(run.makespan, 1),
                      "t_seconds": round(run.stagger_seconds, 1),
                      "alone_steps_per_second": round(run.alone_steps_per_second),
                      "shortest_on_top": round(top.shortest_alone_on_top, 3),
                      "decision_errors": done.decision_errors[label][:3]}
    checks = eta_checks(done.runs["Predictive"], done.decisions["Predictive"])
    errors = sorted(c.error for c in checks)
    out["predictive_eta"] = {
        "forecasts": len(checks),
        "median_error": round(statistics.median(errors), 3) if errors else None,
        "p90_error": round(errors[int(0.9 * (len(errors) - 1))], 3) if errors else None,
        "inside_range": round(sum(c.inside for c in checks) / len(checks), 3) if checks else None,
    }
    return out


def summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians and spreads over the rounds; per round Predictive's change against NA and
    FlowCon and the rounds in which its average JCT was below both, in seconds and in the
    core's work."""
    out: dict[str, Any] = {}
    for label in POLICIES.values():
        values = [r[label]["average_jct"] for r in rounds]
        steps = [r[label]["average_jct_steps"] for r in rounds]
        out[label] = {"average_jct_median": round(statistics.median(values), 1),
                      "average_jct_min": min(values), "average_jct_max": max(values),
                      "average_jct_steps_median": round(statistics.median(steps)),
                      "makespan_median": round(statistics.median(
                          r[label]["makespan"] for r in rounds), 1)}
    for unit in ("average_jct", "average_jct_steps"):
        for other in ("NA", "FlowCon"):
            change = [100 * (r["Predictive"][unit] / r[other][unit] - 1) for r in rounds]
            out[f"predictive_vs_{other.lower()}_percent_{unit}"] = [round(c, 1) for c in change]
        out[f"predictive_below_both_{unit}"] = sum(
            r["Predictive"][unit] < min(r["NA"][unit], r["FlowCon"][unit]) for r in rounds)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("which", nargs="?", default="all",
                        choices=("flowcon", "specon", "listener", "predictive", "deadline", "qoe",
                                 "flowcon2", "all"))
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--steps", type=int, default=None,
                        help="FlowCon: steps a job (default 150000)")
    parser.add_argument("--stagger-steps", type=int, default=None,
                        help="FlowCon: job 2 starts when job 1 is at this step, job 3 at 2t "
                             "(default 75000)")
    parser.add_argument("--scale", type=float, default=None,
                        help="predictive: the remaining-work shape times this (default 2; the "
                             "CI test runs 1); deadline: the jobs' lengths times this "
                             "(default 1, as the CI test); qoe, flowcon2: the jobs' lengths "
                             "times this (default 1)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="predictive: rounds of NA, FlowCon and Predictive; deadline: "
                             "rounds of NA and Deadline; qoe: rounds of NA and QoE; flowcon2: "
                             "rounds of FlowCon2 and NA (default 3)")
    parser.add_argument("--no-stop", action="store_true",
                        help="qoe: leave out the job stopped at its target loss")
    parser.add_argument("--no-baseline", action="store_true",
                        help="flowcon2: leave out the NA run beside each FlowCon2 run")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR",
                        help="work in DIR/<proof> (made, must not exist) and keep it: "
                             "policyd's log with every action and its reason, the jobs' "
                             "checkpoints, Prometheus' data (default: a temporary directory, "
                             "removed)")
    args = parser.parse_args()
    runs: dict[str, Callable[[Path], dict[str, Any]]] = {
        "flowcon": partial(flowcon, steps=args.steps, stagger_steps=args.stagger_steps),
        "specon": specon, "listener": listener,
        "predictive": partial(predictive, scale=2.0 if args.scale is None else args.scale,
                              rounds=args.rounds),
        "deadline": partial(deadline, scale=1.0 if args.scale is None else args.scale,
                            rounds=args.rounds),
        "qoe": partial(qoe, scale=1.0 if args.scale is None else args.scale,
                       rounds=args.rounds, stop=not args.no_stop),
        "flowcon2": partial(flowcon2, scale=1.0 if args.scale is None else args.scale,
                            rounds=args.rounds, baseline=not args.no_baseline)}
    chosen = list(runs) if args.which == "all" else [args.which]
    out: dict[str, Any] = {}
    for name in chosen:
        if args.keep is not None:
            kept = args.keep / name
            kept.mkdir(parents=True)  # an earlier proof's files are never mixed in
            out[name] = runs[name](kept)
            print(f"{name}: kept in {kept}", file=sys.stderr)
        else:
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
