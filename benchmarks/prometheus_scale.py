"""Live manager cycles against a real Prometheus holding N training containers (issue 18).

Usage: flock /tmp/policyd-slow.lock python benchmarks/prometheus_scale.py
           [--containers 1000 10000] [--runs 3] [--cycles 3] [--baseline DIR ...] [--work DIR]
           [--plain-gc] [--bounds N ...]

For each N: the series of `tests/integration/cluster_series.py` (N containers, 10 a node, the
kubelet's whole label sets, 20 min at 15 s ending now) are backfilled with `promtool tsdb
create-blocks-from openmetrics` (benchmarks/backfill.py) and served by Debian's Prometheus on
127.0.0.1. Then `--runs` processes of benchmarks/prometheus_cycle.py each time `--cycles` warm
cycles (queries, parse, decide for `POLICY`, the clock at the data's end; the source's default
`max_concurrent_queries`, so its queries may be out together). With `--baseline DIR` (another
checkout, e.g. `git archive` of main) its processes run interleaved with ours, run for run,
against the same server, so both see the same load: compare the ratios of one run, not figures
across runs (the machine is shared). Several DIRs run in the same interleaving, each named by
its directory; the ratios are against the first. Figures are medians over every cycle of every
run: the whole cycle, the time any query was out, each query group (the evaluation range, the
CPU range, the facts, the progress queries: its queries' own times, which overlap when they are
out together) with its answer's bytes, parse (the rest of observe), of it `parse_cycle`, decide,
and the peak RSS of a run. Every process runs its cycles as `policyd run` does (start-up frozen
out of the collector's passes, decide with the collector paused: prometheus_cycle.py);
`--plain-gc` runs them all as this benchmark did before 2026-11-29.
A node agent's cycles (ours, node w0: its 10 containers) run beside them. With `--bounds 1 2`
ours also runs with those `max_concurrent_queries` (1: its queries one after the other), in the
same interleaving.
With `--work DIR` the backfilled data is kept and a later run with the same DIR serves it
again instead of backfilling (the clock is then the kept data's end).
Heavy (10,000 containers: ~6 GB of text written and deleted in chunks, ~1 GB of TSDB): never
in CI, always under the lock.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import repository  # noqa: F401  (the repository on sys.path, after PYTHONPATH's trees)

sys.path.insert(0, str(Path(__file__).resolve().parent))

from backfill import backfill, serving
from timing import host_speed_text

from tests.integration.cluster_series import Cluster

ROOT = Path(__file__).resolve().parents[1]
HISTORY_SECONDS = 20 * 60
POLICY = """\
apiVersion: policyd.io/v1alpha1
kind: FlowCon
metadata: {name: scale}
spec: {interval_seconds: 20, window_intervals: 20, mode: shares}
"""
"""policies/flowcon.yaml without its `app: train` selector: FlowCon manages every job."""


def group(query: str) -> str:
    """The query group a labelled query belongs to (`CycleQueries.labelled` names)."""
    if query.startswith("facts"):
        return "facts"
    return {"steps": "progress", "progress": "progress"}.get(query, query)


def one_run(tree: Path, url: str, now: float, *, cycles: int, policy: Path,
            node: str | None = None, plain_gc: bool = False,
            bound: int | None = None) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "prometheus_cycle.py"),
                           "--url", url, "--now", str(now), "--cycles", str(cycles),
                           "--policy", str(policy),
                           *(["--node", node] if node else []),
                           *(["--plain-gc"] if plain_gc else []),
                           *(["--max-concurrent-queries", str(bound)] if bound else [])],
                          env=env, cwd=tree, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: the cycle failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def baselines(dirs: list[Path]) -> dict[str, tuple[Path, int | None]]:
    """The baseline trees by name: "baseline" for one, "baseline DIRNAME" for several."""
    if len(dirs) == 1:
        return {"baseline": (dirs[0], None)}
    return {f"baseline {tree.name}": (tree, None) for tree in dirs}


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over every cycle of every run (seconds, bytes), and of the runs' peak RSS."""
    cycles = [c for r in runs for c in r["cycles"]]
    groups: dict[str, list[tuple[float, int, int]]] = {}
    for c in cycles:
        per: dict[str, list[float]] = {}
        for q in c["queries"]:
            seconds, size, count = per.setdefault(group(q["query"]), [0.0, 0, 0])
            per[group(q["query"])] = [seconds + q["seconds"], size + q["bytes"], count + 1]
        for name, (seconds, size, count) in per.items():
            groups.setdefault(name, []).append((seconds, int(size), int(count)))
    med = statistics.median
    return {
        "cycle": med(c["cycle"] for c in cycles), "parse": med(c["parse"] for c in cycles),
        "in_flight": med(c["in_flight"] for c in cycles),
        "parse_cycle": med(c["parse_cycle"] for c in cycles),
        "decide": med(c["decide"] for c in cycles),
        "queries": med(len(c["queries"]) for c in cycles),
        "bytes": med(sum(q["bytes"] for q in c["queries"]) for c in cycles),
        "containers": med(c["containers"] for c in cycles),
        "actions": med(c["actions"] for c in cycles),
        "rss_mib": med(r["rss_mib"] for r in runs),
        "cpu_observe": med(c["cpu_observe"] for c in cycles),
        "cpu_decide": med(c["cpu_decide"] for c in cycles),
        "server_cpu": med(c["server_cpu"] for c in cycles),
        "groups": {name: {"seconds": med(v[0] for v in vals), "bytes": med(v[1] for v in vals),
                          "queries": med(v[2] for v in vals)}
                   for name, vals in groups.items()},
    }


def show(label: str, s: dict[str, Any]) -> str:
    parts = [f"{name} {g['seconds']:.3f} s / {g['bytes'] / 1e6:.2f} MB ({g['queries']:g} q)"
             for name, g in sorted(s["groups"].items())]
    queried = sum(g["seconds"] for g in s["groups"].values())
    return (f"  {label}: cycle {s['cycle']:.3f} s = queries out {s['in_flight']:.3f}"
            f" + parse {s['parse']:.3f} (parse_cycle {s['parse_cycle']:.3f}) + decide "
            f"{s['decide']:.3f}; the queries' own times add up to {queried:.3f} s; "
            f"{s['queries']:g} queries, "
            f"{s['bytes'] / 1e6:.2f} MB; {s['containers']:g} containers, {s['actions']:g} "
            f"actions; RSS {s['rss_mib']:.0f} MiB\n    CPU seconds: ours observe "
            f"{s['cpu_observe']:.3f} + decide {s['cpu_decide']:.3f}, the server "
            f"{s['server_cpu']:.2f}\n    " + "; ".join(parts))


def measure(n: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    data, ended = work / f"prometheus-{n}", work / f"prometheus-{n}.end"
    if ended.exists():  # a kept --work directory: the same series, no second backfill
        end, backfill_seconds = float(ended.read_text()), 0.0
        print(f"{n} containers: the series backfilled earlier in {data}", flush=True)
    else:
        end = math.floor(time.time() / 15) * 15.0
        cluster = Cluster(containers=n, start_seconds=end - HISTORY_SECONDS, end_seconds=end)
        print(f"{n} containers: backfilling {cluster.nodes} nodes ...", flush=True)
        backfill_seconds = backfill(cluster, data, log=work / f"promtool-{n}.log")
        ended.write_text(str(end))
    trees: dict[str, tuple[Path, int | None]] = {
        "ours": (ROOT, None), **{f"ours, {b} at once": (ROOT, b) for b in args.bounds},
        **baselines(args.baseline)}
    policy = work / "policy.yaml"
    policy.write_text(POLICY)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in (*trees, "node agent")}
    with serving(data) as url:
        for _ in range(args.runs):
            for name, (tree, bound) in trees.items():
                runs[name].append(one_run(tree, url, end, cycles=args.cycles, policy=policy,
                                          plain_gc=args.plain_gc, bound=bound))
            runs["node agent"].append(one_run(ROOT, url, end, cycles=args.cycles,
                                              policy=policy, node="w0",
                                              plain_gc=args.plain_gc))
    result: dict[str, Any] = {"containers": n, "backfill_seconds": backfill_seconds,
                              **{name: summary(r) for name, r in runs.items()}}
    print(f"{n} containers (backfill {backfill_seconds:.0f} s), medians of "
          f"{args.runs} runs x {args.cycles} cycles; load average now "
          + " / ".join(f"{x:.1f}" for x in os.getloadavg()) + ":")
    for name in runs:
        print(show(name, result[name]))
    if args.baseline:
        first = next(iter(baselines(args.baseline)))
        base = result[first]
        for name in trees:
            if name == first:
                continue
            ours = result[name]
            print(f"  {name} / {first}: cycle {ours['cycle'] / base['cycle']:.2f}x, queries "
                  f"out {ours['in_flight'] / base['in_flight']:.2f}x, parse "
                  f"{ours['parse'] / base['parse']:.2f}x, bytes "
                  f"{ours['bytes'] / base['bytes']:.2f}x, RSS "
                  f"{ours['rss_mib'] / base['rss_mib']:.2f}x")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--containers", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--baseline", type=Path, nargs="+", default=[],
                        help="other checkouts run in the same interleaving (ratios against "
                             "the first)")
    parser.add_argument("--work", type=Path, default=None,
                        help="keep the data here (and use what an earlier run kept)")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    parser.add_argument("--bounds", type=int, nargs="*", default=[],
                        help="also run ours with these max_concurrent_queries (1: the queries "
                             "one after the other), interleaved with the others")
    parser.add_argument("--plain-gc", action="store_true",
                        help="every process with the collector on through decide and nothing "
                             "frozen (as this benchmark ran before 2026-11-29), not as "
                             "`policyd run` runs its cycles")
    args = parser.parse_args()
    print(host_speed_text() + "; load average " + " / ".join(
        f"{x:.1f}" for x in os.getloadavg()), flush=True)
    with tempfile.TemporaryDirectory(prefix="policyd-scale-") as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        results = [measure(n, args, work) for n in args.containers]
    if len(results) > 1:
        small, big = results[0], results[-1]
        growth = big["ours"]["cycle"] / small["ours"]["cycle"]
        scale = big["containers"] / small["containers"]
        print(f"ours: {small['containers']} -> {big['containers']} containers ({scale:g}x): "
              f"cycle {growth:.2f}x ({growth / scale:.2f} of linear)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
