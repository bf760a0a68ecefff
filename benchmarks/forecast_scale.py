"""How the forecast scales with the number of containers (issue 13: decide() with forecasts for
10,000 containers on 1,000 nodes in <= 0.5 s, linear in containers).

Usage: python benchmarks/forecast_scale.py [--sizes 1000 10000 100000] [--repeat 5]

For each size: the synthetic snapshot of `engine_scale.py` (10 containers per node, 60 samples
per series, exponential loss curves with 1 % noise), each container's history given steps (a
job-specific rate times its age) and the same samples; then, `--repeat` times each, the median
seconds of: packing the histories (`Histories.of`), `forecast()` with no job declaring its total
steps (every curve fitted and searched: the worst case), `forecast()` with every job declaring
them (no curve needed), and FlowCon's `decide()` on the same snapshot, so that the sum of
decide() and the worst-case forecast can be read against the 0.5 s target (wall seconds, and
the same sum in process CPU seconds, which other processes on a shared machine disturb less).
The machine is shared and noisy: read the ratios between sizes, not single figures.

Then `decide()` as policyd runs it, forecasts included (`policyd.engine.decide` attaches one to
every assessment) and the cyclic garbage collector paused (`policyd.tick` pauses it while the
engine decides): the same snapshot with every container's steps series (and, in "totals", its
total steps) in the snapshot itself, for FlowCon (its plan, then the shared forecast step) and
for Predictive (which forecasts inside its plan); each as the median wall and the median CPU
seconds of this process. Then the collector's own CPU seconds per decide (timed by
`gc.callbacks`, median of `--repeat`), FlowCon and Predictive without totals, with the
collector on (as policyd decided before it paused it, and as the first table's decide() runs)
and paused (counting the collection the pause defers, which the next 20,000 allocations after
it trigger), and how many full passes each decide made.

The process's allocator keeps the memory it frees (`policyd.allocator`), as `policyd run` has
it, where the engine measured has that module (the header says whether); `--allocator default`
leaves glibc's own settings.

To measure another commit's engine with the same benchmark (old against new in one sitting):
`git archive <commit> | tar -x -C /tmp/old` and run this file with `PYTHONPATH=/tmp/old`.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dataclasses import replace

from synthetic import make_snapshot
from timing import (
    host_speed_text,
    median_cpu_seconds,
    median_seconds,
    median_wall_and_cpu_seconds,
)

from policyd.engine import decide
from policyd.engine.forecast import forecast
from policyd.engine.forecast_input import Histories, History, Settings
from policyd.engine.spec import PolicyDocument
from policyd.fastjson import paused_gc
from policyd.model import Series, Snapshot
from policyd.policy import load_policies

ROOT = Path(__file__).resolve().parent.parent


def histories(snapshot: Snapshot, *, totals: bool, seed: int = 11) -> list[History]:
    """Each container's samples as a forecast history: steps = rate x (t - start)."""
    rng = np.random.default_rng(seed)
    built = []
    for container in snapshot.containers:
        t = container.evaluation.times_seconds
        rate = float(rng.uniform(2.0, 40.0))
        steps = np.floor(rate * (t - container.started_at))
        cpu = np.interp(t, container.cpu_usage.times_seconds, container.cpu_usage.values)
        built.append(History(times_seconds=t, losses=container.evaluation.values, steps=steps,
                             cores=cpu, allocation_cores=1.0, max_cores=16.0,
                             total_steps=float(steps[-1] * 3 + 100) if totals else None))
    return built


def with_steps(snapshot: Snapshot, *, totals: bool) -> Snapshot:
    """The snapshot with each container's steps (and total) as a source would fill them."""
    built = histories(snapshot, totals=totals)
    return replace(snapshot, containers=tuple(
        replace(c, steps=Series.of(h.times_seconds, h.steps), total_steps=h.total_steps)
        for c, h in zip(snapshot.containers, built, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--allocator", choices=("policyd", "default"), default="policyd")
    args = parser.parse_args()
    kept = args.allocator == "policyd" and _keep_freed_memory()
    flowcon = load_policies(ROOT / "policies" / "flowcon.yaml")[0]
    predictive = load_policies(ROOT / "policies" / "predictive.yaml")[0]
    predictive = predictive.model_copy(update={"spec": predictive.spec.model_copy(
        update={"selector": flowcon.spec.selector})})  # the synthetic jobs' labels
    rows: list[tuple[int, Snapshot, Snapshot]] = []
    print(host_speed_text(), flush=True)
    print(f"allocator keeps freed memory: {'yes' if kept else 'no'}", flush=True)
    print(f"{'containers':>10}  {'pack':>8}  {'forecast (no totals)':>20}  "
          f"{'forecast (totals)':>17}  {'FlowCon decide()':>16}  {'decide + forecast':>17}  "
          f"{'same, CPU s':>11}  judged")
    for size in args.sizes:
        snapshot = make_snapshot(size)
        settings = Settings(now_seconds=snapshot.time, alpha=0.05, interval_seconds=20.0)
        unknown = histories(snapshot, totals=False)
        known = histories(snapshot, totals=True)
        packed_unknown, packed_known = Histories.of(unknown), Histories.of(known)
        result = forecast(packed_unknown, settings)  # warm-up, and what it judged
        pack = median_seconds(lambda h=unknown: Histories.of(h), args.repeat)
        worst = median_seconds(lambda p=packed_unknown, s=settings: forecast(p, s), args.repeat)
        best = median_seconds(lambda p=packed_known, s=settings: forecast(p, s), args.repeat)
        flow = median_seconds(lambda s=snapshot: decide(flowcon, s), args.repeat)
        cpu = (median_cpu_seconds(lambda p=packed_unknown, s=settings: forecast(p, s), args.repeat)
               + median_cpu_seconds(lambda s=snapshot: decide(flowcon, s), args.repeat))
        print(f"{size:>10,}  {pack:7.3f}s  {worst:19.3f}s  {best:16.3f}s  {flow:15.3f}s  "
              f"{flow + worst:16.3f}s  {cpu:10.3f}s  {result.judged.mean():5.0%}", flush=True)
        rows.append((size, with_steps(snapshot, totals=True),
                     with_steps(snapshot, totals=False)))
    print(f"\ndecide() with forecasts, as policyd runs it, the collector paused (median of "
          f"{args.repeat}; wall s / CPU s)")
    print(f"{'containers':>10}  {'FlowCon, totals':>16}  {'FlowCon, no totals':>18}  "
          f"{'Predictive, totals':>18}  {'Predictive, no totals':>21}")
    for size, known_snap, unknown_snap in rows:
        cells = []
        for policy, snap in ((flowcon, known_snap), (flowcon, unknown_snap),
                             (predictive, known_snap), (predictive, unknown_snap)):
            wall, cpu = median_wall_and_cpu_seconds(
                lambda p=policy, s=snap: _decided(p, s, paused=True), args.repeat)
            cells.append(f"{wall:.3f} / {cpu:.3f}")
        print(f"{size:>10,}  {cells[0]:>16}  {cells[1]:>18}  {cells[2]:>18}  {cells[3]:>21}",
              flush=True)
    print(f"\nthe collector's own CPU s per decide, no totals (median of {args.repeat}; full "
          "passes per decide in brackets)")
    print(f"{'containers':>10}  {'FlowCon, on':>16}  {'FlowCon, paused':>16}  "
          f"{'Predictive, on':>16}  {'Predictive, paused':>18}")
    for size, _, unknown_snap in rows:
        cells = []
        for policy, paused in ((flowcon, False), (flowcon, True), (predictive, False),
                               (predictive, True)):
            seconds, full = _collector_seconds(policy, unknown_snap, paused=paused,
                                               repeat=args.repeat)
            cells.append(f"{seconds:.3f} ({full})")
        print(f"{size:>10,}  {cells[0]:>16}  {cells[1]:>16}  {cells[2]:>16}  {cells[3]:>18}",
              flush=True)


def _keep_freed_memory() -> bool:
    """`policyd.allocator.keep_freed_memory()`, False with an engine from before it."""
    try:
        from policyd.allocator import keep_freed_memory  # noqa: PLC0415
    except ImportError:
        return False
    return keep_freed_memory()


def _decided(policy: PolicyDocument, snapshot: Snapshot, *, paused: bool) -> object:
    """`decide()`, under a collector pause as `policyd.tick` runs it, or with it on."""
    if not paused:
        return decide(policy, snapshot)
    with paused_gc():
        return decide(policy, snapshot)


def _collector_seconds(policy: PolicyDocument, snapshot: Snapshot, *, paused: bool,
                       repeat: int) -> tuple[float, str]:
    """The median CPU seconds the collector spent per decide (and in the collection a pause
    defers to the next allocations), and the full passes of each decide."""
    spent: list[float] = []
    full: list[int] = []
    began = [0.0]

    def timed(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            began[0] = time.process_time()
        else:
            spent.append(time.process_time() - began[0])
            full.append(int(info["generation"] == 2))

    per_decide, passes = [], []
    gc.callbacks.append(timed)
    try:
        for _ in range(repeat):
            spent.clear()
            full.clear()
            _decided(policy, snapshot, paused=paused)
            after = [object() for _ in range(20_000)]  # what the next tick's work allocates
            del after
            per_decide.append(sum(spent))
            passes.append(sum(full))
    finally:
        gc.callbacks.remove(timed)
    return float(np.median(per_decide)), ",".join(str(n) for n in passes)


if __name__ == "__main__":
    main()
