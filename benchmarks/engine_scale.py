"""How decide() scales with the number of containers (issue 2's targets).

Usage: python benchmarks/engine_scale.py [--sizes 1000 10000 100000] [--repeat 5]

For each size: a synthetic snapshot (10 containers per node, 60 samples per series), then
decide() with the FlowCon and the SpeCon example policies, `--repeat` times each; prints the
median seconds, containers per second and the peak memory decide() allocated (tracemalloc, in a
separate run so that tracing does not slow the timed ones). Then `policyd plan` as a subprocess
on a 10,000-container snapshot file, start-up and JSON parsing included (median of 3).
The machine is shared and noisy: read the ratios between sizes, not single figures.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthetic import make_snapshot
from timing import median_seconds

from policyd.engine import decide
from policyd.model.codec import snapshot_to_dict
from policyd.policy import load_policies

ROOT = Path(__file__).resolve().parent.parent
POLICIES = {
    "FlowCon": ROOT / "policies" / "flowcon.yaml",
    "SpeCon": ROOT / "policies" / "specon.yaml",
}


def _peak_mib(func) -> float:
    tracemalloc.start()
    func()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 2**20


def bench_engine(sizes: list[int], repeat: int) -> list[dict[str, object]]:
    policies = {kind: load_policies(path)[0] for kind, path in POLICIES.items()}
    rows = []
    for size in sizes:
        snapshot = make_snapshot(size)
        for kind, policy in policies.items():
            decision = decide(policy, snapshot)  # warm-up, and a sanity check
            seconds = median_seconds(lambda p=policy, s=snapshot: decide(p, s), repeat)
            peak = _peak_mib(lambda p=policy, s=snapshot: decide(p, s))
            rows.append({"kind": kind, "containers": size, "nodes": len(snapshot.nodes),
                         "median_s": seconds, "containers_per_s": size / seconds,
                         "peak_mib": peak, "actions": len(decision.actions)})
            print(f"{kind:8} {size:>7} containers  {seconds:8.4f} s  "
                  f"{size / seconds:>10,.0f} containers/s  peak {peak:7.1f} MiB  "
                  f"{len(decision.actions)} actions", flush=True)
    return rows


def bench_plan_cli(size: int, repeat: int = 3) -> float:
    snapshot = make_snapshot(size)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "snapshot.json"
        path.write_text(json.dumps(snapshot_to_dict(snapshot)))
        megabytes = path.stat().st_size / 2**20
        cmd = [sys.executable, "-m", "policyd", "plan", "--policy", str(POLICIES["FlowCon"]),
               "--snapshot", str(path), "--output", "json"]
        seconds = median_seconds(
            lambda: subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL), repeat)
    print(f"policyd plan on {size} containers ({megabytes:.0f} MiB JSON): {seconds:.2f} s "
          f"(median of {repeat}, start-up and parsing included)", flush=True)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--plan-size", type=int, default=10_000)
    args = parser.parse_args()
    bench_engine(args.sizes, args.repeat)
    if args.plan_size:
        bench_plan_cli(args.plan_size)


if __name__ == "__main__":
    main()
