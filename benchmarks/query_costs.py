"""What each query of a manager's cycle costs Prometheus, and what a recording rule could save
(issue 18; benchmarks/README.md, "prometheus_scale.py", sixteenth session).

    flock /tmp/policyd-slow.lock .venv/bin/python benchmarks/query_costs.py --work DIR \\
        [--containers 10000] [--repeat 5]

Reads the data `benchmarks/prometheus_scale.py --work DIR` kept (it backfills it when run
first), served by Debian's Prometheus on 127.0.0.1 at the data's end, with prometheus_scale.py's
FlowCon policy and the kubernetes profile. Each query of one cycle (`build_queries`) is asked
`--repeat` times with `stats=all`; printed per query: the median of Prometheus's own evaluation
time (`evalTotalTime`) and of the wall time of the fetch, the answer's bytes and series. Beside
every query that computes (the CPU `rate`, the facts' `max by`), the plain read of its input
series: what reading a series a recording rule had stored would cost at most (the rule's
series carry the reduced labels, so their bytes are the computed query's, their evaluation a
plain read's). The rule's own evaluation (one instant step each rule interval) is not counted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import repository  # noqa: F401  (the repository on sys.path, after PYTHONPATH's trees)

sys.path.insert(0, str(Path(__file__).resolve().parent))

from backfill import serving
from prometheus_scale import POLICY

from policyd.policy import load_policies
from policyd.sources import kubernetes
from policyd.sources.promql import CycleQueries, build_queries

RANGED = {"evaluation", "cpu", "steps"}
"""The cycle's range queries (the others are instant queries at the end)."""


def ask(url: str, query: str, queries: CycleQueries, *, ranged: bool
        ) -> tuple[float, float, int, int]:
    """(Prometheus's evaluation seconds, wall seconds, bytes, series) of one fetch."""
    params: dict[str, object] = {"query": query, "stats": "all"}
    if ranged:
        params.update(start=queries.start_seconds, end=queries.now_seconds,
                      step=queries.step_seconds)
    else:
        params.update(time=queries.now_seconds)
    path = "query_range" if ranged else "query"
    started = time.perf_counter()
    with urllib.request.urlopen(f"{url}/api/v1/{path}?{urllib.parse.urlencode(params)}",
                                timeout=120) as response:
        body = response.read()
    wall = time.perf_counter() - started
    data = json.loads(body)["data"]
    return (float(data["stats"]["timings"]["evalTotalTime"]), wall, len(body),
            len(data["result"]))


def plain_read(what: str, query: str) -> str | None:
    """The input series of a computing query (the CPU rate, a fact's `max by (...) (X)`),
    or None for a query that is a plain read already or joins two."""
    if what == "cpu":
        return query.removeprefix("rate(").rsplit("[", 1)[0]
    if query.startswith("max by") and " / " not in query and " and on" not in query:
        return query.split(") (", 1)[1].removesuffix(")")
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True,
                        help="the directory prometheus_scale.py --work kept the data in")
    parser.add_argument("--containers", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    data = args.work / f"prometheus-{args.containers}"
    end = args.work / f"prometheus-{args.containers}.end"
    if not end.exists():
        raise SystemExit(f"no kept data in {data}: run benchmarks/prometheus_scale.py "
                         f"--containers {args.containers} --work {args.work} first")
    policy = args.work / "query_costs_policy.yaml"
    policy.write_text(POLICY)
    queries = build_queries(load_policies(policy)[:1], kubernetes(),
                            now_seconds=float(end.read_text()))
    rows: list[tuple[str, str, bool]] = []
    for what, query in queries.labelled():
        rows.append((what, query, what in RANGED))
        plain = plain_read(what, query)
        if plain is not None:
            rows.append((f"  {what} as a plain read", plain, what in RANGED))
    print(f"{'query':<34} {'eval':>8} {'wall':>8} {'answer':>9} {'series':>7}", flush=True)
    with serving(data) as url:
        for what, query, ranged in rows:
            ask(url, query, queries, ranged=ranged)  # warm
            got = [ask(url, query, queries, ranged=ranged) for _ in range(args.repeat)]
            print(f"{what:<34} {statistics.median(g[0] for g in got):>7.3f}s "
                  f"{statistics.median(g[1] for g in got):>7.3f}s {got[0][2] / 1e6:>7.2f}MB "
                  f"{got[0][3]:>7}", flush=True)


if __name__ == "__main__":
    main()
