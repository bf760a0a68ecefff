"""FlowCon2's manager from node reports against the one-snapshot FlowCon2: decide time by workers
(issue 18; benchmarks/README.md, "flowcon2_reports.py").

    flock /tmp/policyd-slow.lock .venv/bin/python benchmarks/flowcon2_reports.py
        [--nodes 5 10 20] [--repeat 3] [--order remaining|growth] [--no-moves] [--manager-only]

Per size: the synthetic cluster of engine_scale.py (10 jobs a worker, 60 samples a series), each
job's steps and declared total added as forecast_scale.py adds them, half the workers crowded
(4 cores) and half roomy (32 cores), as node_reports.py's Predictive and Deadline runs, and one
held job per 10 workers; the shipped policies/flowcon2.yaml (its `order` as given; with
`--no-moves`, `migrate: false`: admissions only) selecting the synthetic jobs. Timed, CPU
seconds, median of `--repeat`, all in one process so that the ratios are of one run:

* "one snapshot": `decide` on the whole snapshot (forecasts, the per-worker limits, the speeds
  judged, the model, the moves and admissions);
* "agents": every worker's report (`Kind.node_reports` on the whole snapshot: the sum of what
  the agents do for their reports, each on its own node; their node part's limits, which they
  also apply, not counted);
* "manager": `decide` on the manager's snapshot of those reports (the moves and admissions
  alone, the model rebuilt from the reports);

and the actions of each (the same when "same" says so), the jobs flagged movable, and the
series the agents publish a worker (`NodeReportCollector`). `--manager-only` leaves out the
one-snapshot decision (minutes at 10,000 workers), and "same" with it, and times the manager
with the whole snapshot dropped, as a manager holds only the reports (the cyclic garbage
collector's full passes walk whatever the process holds). No Prometheus:
node_reports.py carries reports through one; this one compares the decisions' own cost.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from dataclasses import replace

import repository  # the repository on sys.path, after PYTHONPATH's trees
from forecast_scale import with_steps
from synthetic import make_snapshot
from timing import host_speed_text

from policyd.daemon.node_report_metrics import NodeReportCollector
from policyd.engine import decide
from policyd.engine.registry import KINDS
from policyd.engine.spec import PolicyDocument
from policyd.model import Admit, Decision, Migrate, PendingJob, Snapshot
from policyd.policy import load_policies

ROOT = repository.ROOT
PER_NODE = 10
CROWDED_CORES, ROOMY_CORES = 4.0, 32.0
HELD_EVERY = 10


def shipped(order: str, moves: bool) -> PolicyDocument:
    """policies/flowcon2.yaml selecting the synthetic jobs, at `order`, moves on or off."""
    policy = load_policies(ROOT / "policies" / "flowcon2.yaml")[0]
    spec = policy.spec.model_copy(update={
        "selector": policy.spec.selector.model_copy(update={"labels": {"app": "train"}}),
        "order": order, "migrate": moves})
    return policy.model_copy(update={"spec": spec})


def cluster(nodes: int) -> Snapshot:
    """The synthetic cluster of `nodes` workers (module docstring)."""
    snapshot = make_snapshot(nodes * PER_NODE, per_node=PER_NODE)
    snapshot = replace(with_steps(snapshot, totals=True), nodes=tuple(
        replace(n, cpu_capacity=CROWDED_CORES if i % 2 == 0 else ROOMY_CORES)
        for i, n in enumerate(snapshot.nodes)))
    held = tuple(PendingJob(id=f"held-{i}", name=f"held-{i}", submitted_at=snapshot.time - 5,
                            labels={"app": "train"}) for i in range(max(nodes // HELD_EVERY, 1)))
    return replace(snapshot, pending=held)


def placements(decision: Decision) -> list[tuple[str, str]]:
    return sorted([(a.container, a.to_node) for a in decision.actions
                   if isinstance(a, Migrate)]
                  + [(a.container, a.node) for a in decision.actions if isinstance(a, Admit)])


def cpu(func: object, repeat: int) -> tuple[float, object]:
    """The median CPU seconds of `repeat` calls of `func` and its last result."""
    runs, result = [], None
    for _ in range(repeat):
        started = time.process_time()
        result = func()  # type: ignore[operator]
        runs.append(time.process_time() - started)
    return statistics.median(runs), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[5, 10, 20])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--order", choices=("remaining", "growth"), default="remaining")
    parser.add_argument("--no-moves", action="store_true")
    parser.add_argument("--manager-only", action="store_true",
                        help="leave out the one-snapshot decision")
    args = parser.parse_args()
    policy = shipped(args.order, not args.no_moves)
    make = KINDS.of(policy).node_reports
    assert make is not None
    print(f"{host_speed_text()}; order {args.order}, moves {'off' if args.no_moves else 'on'}",
          flush=True)
    print(f"{'workers':>8} {'jobs':>7} {'one snapshot':>12} {'agents':>8} {'manager':>8} "
          f"{'ratio':>7} {'movable':>7} {'series/worker':>13} {'actions':>7} same", flush=True)
    for nodes in args.nodes:
        snapshot = cluster(nodes)
        whole_s, whole = (0.0, None) if args.manager_only else cpu(
            lambda s=snapshot: decide(policy, s, forecasts=False), args.repeat)
        agents_s, reports = cpu(lambda s=snapshot: make(policy, s), args.repeat)
        manager_snapshot = replace(snapshot, containers=(), node_reports=reports)
        if args.manager_only:  # the manager holds the reports, not every container's series:
            del snapshot  # the collector would walk them all
            gc.collect()
        manager_s, manager = cpu(lambda s=manager_snapshot: decide(policy, s, forecasts=False),
                                 args.repeat)
        collector = NodeReportCollector()
        collector.publish(policy.name, reports)  # type: ignore[arg-type]
        series = sum(len(f.samples) for f in collector.collect())
        flagged = sum(j.movable for r in reports for j in r.residents)  # type: ignore[union-attr]
        ours = placements(manager)  # type: ignore[arg-type]
        theirs = ours if whole is None else placements(whole)  # type: ignore[arg-type]
        whole_text, ratio_text = (("-", "-") if whole is None else
                                  (f"{whole_s:.3f}s", f"{whole_s / manager_s:.1f}x"))
        print(f"{nodes:>8,} {nodes * PER_NODE:>7,} {whole_text:>12} {agents_s:>7.3f}s "
              f"{manager_s:>7.3f}s {ratio_text:>7} {flagged:>7,} "
              f"{series / nodes:>13.1f} {len(ours):>7} "
              f"{'-' if whole is None else ours == theirs}", flush=True)


if __name__ == "__main__":
    main()
