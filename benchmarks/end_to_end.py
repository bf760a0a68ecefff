"""policyd's main commands end to end, as a user runs them (issue 10's "Fast" targets).

Usage: python benchmarks/end_to_end.py [--repeat 5] [--baseline DIR] [--containers 10000]
                                        [--only "plan 10k" ...]

Times, as child processes of this interpreter (start-up, imports and output included):

* `policyd simulate`: what `scripts/run` runs with no arguments (target <= 5 s);
* `policyd simulate --scenario specon-random-50-8w` (target <= 2 s);
* `policyd plan --output json` of `policies/flowcon.yaml` on a 10,000-container snapshot file
  made by `synthetic.py` (target <= 1.5 s).

Each figure is the median of `--repeat` runs, wall seconds and CPU seconds (user + system of
the child). With `--baseline DIR` (another checkout of policyd, e.g. `git worktree add` or `git
archive` of main) the same commands also run from DIR, through this interpreter with
PYTHONPATH=DIR, interleaved with ours run for run, so both see the same load; the table then
gives the ratio baseline / ours. The machine is shared: compare ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthetic import make_snapshot
from timing import host_speed_text

from policyd.model.codec import snapshot_to_dict

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {"simulate": 5.0, "simulate specon-random-50-8w": 2.0, "plan 10k": 1.5}


def _commands(snapshot: Path) -> dict[str, list[str]]:
    policy = str(ROOT / "policies" / "flowcon.yaml")
    return {
        "simulate": ["simulate"],
        "simulate specon-random-50-8w": ["simulate", "--scenario", "specon-random-50-8w"],
        "plan 10k": ["plan", "--policy", policy, "--snapshot", str(snapshot), "--output",
                     "json"],
    }


def _run(args: list[str], tree: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of `python -m policyd ARGS` importing policyd from `tree`."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "policyd", *args], check=False, env=env,
                          cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:  # its progress lines are not shown; its error is
        sys.exit(f"policyd {' '.join(args)} (from {tree}) exited {done.returncode}:\n"
                 f"{done.stderr}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another checkout of policyd to compare with")
    parser.add_argument("--containers", type=int, default=10_000)
    parser.add_argument("--only", action="append", choices=sorted(TARGETS), default=None,
                        help="time only this command (repeatable; default: all)")
    args = parser.parse_args()
    trees = {"ours": ROOT} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    print(f"load average at start: {os.getloadavg()[0]:.2f}; {host_speed_text()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        snapshot = Path(tmp) / "snapshot.json"
        snapshot.write_text(json.dumps(snapshot_to_dict(make_snapshot(args.containers))))
        commands = {name: command for name, command in _commands(snapshot).items()
                    if args.only is None or name in args.only}
        runs: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for name, command in commands.items():
            for tree in trees.values():  # warm-up: byte-compiled modules, file cache
                _run(command, tree)
            for _ in range(args.repeat):
                for label, tree in trees.items():
                    runs.setdefault((name, label), []).append(_run(command, tree))
    print(f"load average at end: {os.getloadavg()[0]:.2f}\n")
    print("| command | target | ours: wall / CPU s | " + (
        "baseline: wall / CPU s | ratio baseline/ours (wall, CPU) |" if args.baseline else ""))
    print("|---|---|---|" + ("---|---|" if args.baseline else ""))
    for name in commands:
        line = f"| {name} | <= {TARGETS[name]:g} s |"
        medians = {}
        for label in trees:
            walls, cpus = zip(*runs[name, label], strict=True)
            medians[label] = (statistics.median(walls), statistics.median(cpus))
            line += f" {medians[label][0]:.2f} / {medians[label][1]:.2f} |"
        if args.baseline:
            ours, base = medians["ours"], medians["baseline"]
            line += f" {base[0] / ours[0]:.1f}x, {base[1] / ours[1]:.1f}x |"
        print(line, flush=True)
    print(f"\nmedians of {args.repeat} runs each, interleaved; python {sys.version.split()[0]}")


if __name__ == "__main__":
    main()
