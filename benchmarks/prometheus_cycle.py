"""One process's live manager cycles against a real Prometheus, as JSON on stdout (the child of
benchmarks/prometheus_scale.py, which runs it once per tree and size).

Usage: python benchmarks/prometheus_cycle.py --url URL --now SECONDS [--cycles 3]
       [--policy policies/flowcon.yaml] [--node NODE] [--max-concurrent-queries N] [--plain-gc]

Imports policyd from PYTHONPATH, so the same file times the checkout under test and a baseline
(another checkout of policyd). Each cycle is what the daemon does every interval: the source's
queries (`PrometheusSource.observe`: HTTP, decoding, `parse_cycle`) and `engine.decide` for the
policy, with the clock fixed at `--now` (the end of the backfilled data). Per cycle it reports
the wall seconds of the whole cycle, of each query (as the client waited for it) with the bytes
of its answer, of the time any query was out (`in_flight`: their sum when they go one after
the other, less when the source sends them together), of the parse (observe minus
`in_flight`: decoding the answers while no query is out, `parse_cycle` and the rest), of
`parse_cycle` alone (which runs once every answer is in) and of decide; per process the peak
RSS. The queries are timed in every thread (`requests.Session.request` wrapped for all
sessions: a source may send them from threads of its own, each on its own session).
It also reports the CPU seconds of each cycle, this process's and the server's (its
`process_cpu_seconds_total`, read from `/metrics` before and after the cycle): on a shared
machine they move less than the wall times.
The first cycle warms the connection and the imports' caches and is reported apart. With
`--node` the cycles are a node agent's: every query narrowed to that node (the exporter's series
carry `node`, as deploy/kubernetes/podmonitor-training.yaml makes them).

The cycles run as `policyd run` runs them: what start-up loaded is frozen out of the garbage
collector's passes first (`gc.freeze()`, `policyd.cli.run`), and decide runs with the collector
paused where the tree's tick pauses it (`policyd.tick`, which imports `paused_gc` for it; the
source pauses it itself while it builds the snapshot). `--plain-gc` times them as this file did
before 2026-11-29, the collector on through decide and nothing frozen, which overstated decide
at 10,000 containers by the collector's passes over the snapshot and the decision (~0.05-0.1 s:
benchmarks/README.md, "prometheus_scale.py", twenty-second session). The C allocator keeps
the memory a cycle frees (`policyd.allocator`), as `policyd run` has it, where the tree
measured has that module (an older `--baseline` keeps glibc's own settings, as its daemon
did).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import resource
import sys
import time
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parent.parent


def server_cpu_seconds(session: Any, url: str) -> float:
    """The server's own `process_cpu_seconds_total` (NaN when it does not show one)."""
    for line in session.get(f"{url}/metrics", timeout=30).text.splitlines():
        if line.startswith("process_cpu_seconds_total "):
            return float(line.split()[1])
    return math.nan


def in_flight_seconds(calls: list[dict[str, Any]]) -> float:
    """The wall seconds during which at least one query was out (the union of their
    intervals): the queries' sum when they go one after the other, less when they overlap."""
    total, reach = 0.0, -math.inf
    for call in sorted(calls, key=lambda c: c["started"]):
        start, end = call["started"], call["started"] + call["seconds"]
        total += max(0.0, end - max(start, reach))
        reach = max(reach, end)
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--now", type=float, required=True)
    parser.add_argument("--cycles", type=int, default=3)
    parser.add_argument("--policy", type=Path, default=ROOT / "policies" / "flowcon.yaml")
    parser.add_argument("--node", default=None)
    parser.add_argument("--max-concurrent-queries", type=int, default=None,
                        help="the source's bound on queries out at once (a tree that has it; "
                             "default: the source's own default)")
    parser.add_argument("--plain-gc", action="store_true",
                        help="the collector on through decide and nothing frozen (as this "
                             "file timed cycles before 2026-11-29), not as `policyd run` runs "
                             "them")
    args = parser.parse_args()

    try:
        from policyd.allocator import keep_freed_memory  # noqa: PLC0415
    except ImportError:  # a tree from before it: its daemon kept glibc's settings
        pass
    else:
        keep_freed_memory()
    from policyd.engine import decide  # noqa: PLC0415 (the tree on PYTHONPATH)
    from policyd.policy import load_policies  # noqa: PLC0415
    from policyd.sources import kubernetes, prometheus  # noqa: PLC0415
    from policyd.sources.prometheus import PrometheusSource  # noqa: PLC0415
    from policyd.sources.promql import build_queries  # noqa: PLC0415

    policies = load_policies(args.policy)[:1]
    bound = ({} if args.max_concurrent_queries is None
             else {"max_concurrent_queries": args.max_concurrent_queries})
    if args.node is None:
        settings = kubernetes()
        source = PrometheusSource(args.url, settings, timeout_seconds=60, retries=0,
                                  clock=lambda: args.now, **bound)
    else:  # only trees that have node agents' queries
        settings = kubernetes(evaluation_node_label="node")
        source = PrometheusSource(args.url, settings, timeout_seconds=60, retries=0,
                                  clock=lambda: args.now, node=args.node, **bound)
    names = {query: what for what, query in build_queries(
        policies, settings, now_seconds=args.now, **({"node": args.node} if args.node else {})
    ).labelled()}
    calls: list[dict[str, Any]] = []
    request = requests.Session.request  # every session's, in every thread (the query threads')

    def timed(self: requests.Session, method: str, url: str, **kw: Any) -> Any:
        started = time.perf_counter()
        response = request(self, method, url, **kw)
        if "/api/v1/" in url:
            query = (kw.get("params") or {}).get("query", "")
            calls.append({"query": names.get(query, query[:60]), "started": started,
                          "seconds": time.perf_counter() - started,
                          "bytes": len(response.content)})
        return response

    requests.Session.request = timed  # type: ignore[method-assign]
    parse_seconds: list[float] = []
    parse_cycle = prometheus.parse_cycle

    def timed_parse(**kw: Any) -> Any:
        started = time.perf_counter()
        try:
            return parse_cycle(**kw)
        finally:
            parse_seconds.append(time.perf_counter() - started)

    prometheus.parse_cycle = timed_parse
    pause = contextlib.nullcontext
    if not args.plain_gc:
        import policyd.tick  # noqa: PLC0415
        pause = getattr(policyd.tick, "paused_gc", contextlib.nullcontext)
        gc.freeze()
    metrics = requests.Session()  # the server's CPU counter, not timed as a query
    cycles = []
    for _ in range(args.cycles + 1):
        calls.clear()
        parse_seconds.clear()
        server_before = server_cpu_seconds(metrics, args.url)
        cpu_started = time.process_time()
        started = time.perf_counter()
        parsed = source.observe(policies)
        observed = time.perf_counter()
        cpu_observed = time.process_time()
        with pause():  # as `policyd.tick` decides
            decision = decide(policies[0], parsed.snapshot)
        done = time.perf_counter()
        cpu_done = time.process_time()
        server_seconds = server_cpu_seconds(metrics, args.url) - server_before
        in_flight = in_flight_seconds(calls)
        cycles.append({"cycle": done - started, "queries": list(calls),
                       "in_flight": in_flight, "parse": observed - started - in_flight,
                       "parse_cycle": sum(parse_seconds), "decide": done - observed,
                       "containers": len(parsed.snapshot.containers),
                       "actions": len(decision.actions), "warnings": len(parsed.warnings),
                       "cpu_observe": cpu_observed - cpu_started,
                       "cpu_decide": cpu_done - cpu_observed, "server_cpu": server_seconds})
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    json.dump({"warm_up": cycles[0], "cycles": cycles[1:], "rss_mib": rss}, sys.stdout)


if __name__ == "__main__":
    main()
