"""How fast the Prometheus answers of a cycle become a snapshot (the sources' target: a
10,000-container cycle decoded and parsed in <= 1 s).

Usage: python benchmarks/prometheus_parse.py [--containers 10000] [--samples 60] [--repeat 5]
                                             [--out DIR]

Writes a large answer in the shape Prometheus sends for the kubernetes() profile's
queries (10 containers per node; values as strings, a few NaN; compact JSON, as Prometheus
writes it), then times, median of `--repeat` each, in this order:

* decoding the bodies with `json.loads` (what prometheus-api-client's `.json()` did);
* decoding them with `policyd.fastjson.loads` (orjson);
* `parse_cycle` on the decoded results;
* the cycle decoded by fastjson and parsed, the collector paused (how the source ran it until
  range answers were read from their bytes);
* the cycle as `PrometheusSource.observe` runs it: the range answers read from their bytes
  (`prometheus_http.range_result`), the instant ones decoded by fastjson, parsed, the cyclic
  garbage collector paused (`fastjson.paused_gc`): the figure the target is about.

Prints the query count of a cycle; each figure is the median wall and CPU time of this
process (the CPU time shows less of a shared machine's other load).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import median_wall_and_cpu_seconds

from policyd import fastjson
from policyd.engine.flowcon import FlowConPolicy
from policyd.engine.spec import API_VERSION
from policyd.sources import Parsed, build_queries, kubernetes, parse_cycle
from policyd.sources.prometheus_http import range_result

NOW = 1_700_000_000.0
RANGES = ("evaluation", "cpu")


def write_answers(out: Path, containers: int, samples: int, step: float) -> None:
    steps = [NOW - step * k for k in range(samples - 1, -1, -1)]
    evaluation: list[dict[str, object]] = []
    cpu: list[dict[str, object]] = []
    facts: dict[str, list[dict[str, object]]] = {}
    for i in range(containers):
        ident: dict[str, str] = {"namespace": f"team-{i % 7}", "pod": f"job-{i}",
                                 "container": "train"}
        node: dict[str, str] = {"node": f"w{i // 10}"}
        loss = [f"{2.0 * (0.99 ** k) + i * 1e-6:.6g}" for k in range(samples)]
        if i % 1000 == 0:
            loss[samples // 2] = "NaN"
        evaluation.append({"metric": {"__name__": "policyd_training_loss", "job_name": f"j{i}",
                                      "job": "training", "instance": f"10.1.{i // 250}.{i % 250}"
                                      ":9100", **ident},
                           "values": [[t, v] for t, v in zip(steps, loss, strict=True)]})
        # the labels the reduced queries keep (promql: identity, node, cgroup id)
        cpu.append({"metric": {**ident, **node, "id": f"/kubepods/pod{i}/c"},
                    "values": [[t, f"{0.5 + (i % 10) / 10:.3f}"] for t in steps]})
        base = {**ident, **node, "id": f"/kubepods/pod{i}/c"}
        facts.setdefault("started_at", []).append({"metric": base, "value": [NOW, "1.6e9"]})
        facts.setdefault("shares", []).append({"metric": base, "value": [NOW, "1024"]})
    for n in range((containers + 9) // 10):
        facts.setdefault("capacity", []).append({"metric": {"node": f"w{n}"},
                                                 "value": [NOW, "16"]})
    answers = [("evaluation", evaluation, "matrix"), ("cpu", cpu, "matrix"),
               *((f"facts_{fact}", result, "vector") for fact, result in facts.items())]
    for name, result, kind in answers:
        body = {"status": "success", "data": {"resultType": kind, "result": result}}
        (out / f"{name}.json").write_text(json.dumps(body, separators=(",", ":")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--containers", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    policy = FlowConPolicy.model_validate({
        "apiVersion": API_VERSION, "kind": "FlowCon", "metadata": {"name": "bench"},
        "spec": {"interval_seconds": 20, "window_intervals": args.samples - 1}})
    settings = kubernetes()
    queries = build_queries([policy], settings, now_seconds=NOW)
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        write_answers(out, args.containers, args.samples, queries.step_seconds)
        texts = {p.stem: p.read_text() for p in sorted(out.glob("*.json"))}
    megabytes = sum(len(t) for t in texts.values()) / 1e6
    bodies = {n: t.encode() for n, t in texts.items()}

    def parse(decoded: dict[str, Any]) -> Parsed:
        return parse_cycle(evaluation=decoded["evaluation"], cpu=decoded["cpu"],
                           facts_results={n.removeprefix("facts_"): r for n, r in decoded.items()
                                          if n.startswith("facts_")},
                           queries=queries, settings=settings)

    def decoded_cycle() -> Parsed:
        with fastjson.paused_gc():
            return parse({n: fastjson.loads(b)["data"]["result"] for n, b in bodies.items()})

    def cycle() -> Parsed:
        with fastjson.paused_gc():
            return parse({n: range_result(b) if n in RANGES else fastjson.loads(b)["data"]["result"]
                          for n, b in bodies.items()})

    def timed(func: Callable[[], object]) -> str:
        wall, cpu = median_wall_and_cpu_seconds(func, args.repeat)
        return f"median {wall:.3f} s wall, {cpu:.3f} s CPU"

    stdlib = timed(lambda: [json.loads(b) for b in bodies.values()])
    fast = timed(lambda: [fastjson.loads(b) for b in bodies.values()])
    decoded = {n: fastjson.loads(b)["data"]["result"] for n, b in bodies.items()}
    parsed = parse(decoded)
    alone = timed(lambda: parse(decoded))
    decoded.clear()  # the whole cycles below decode their own
    before = timed(decoded_cycle)
    whole = timed(cycle)
    print(f"containers={args.containers} samples={args.samples} answer={megabytes:.1f} MB "
          f"queries_per_cycle={queries.count}; each figure of {args.repeat} runs")
    print(f"json.loads of the bodies (the client's own decoding): {stdlib}")
    print(f"fastjson.loads of the bodies (orjson, GC paused): {fast}")
    print(f"parse_cycle (GC on; {len(parsed.snapshot.containers)} containers, "
          f"{len(parsed.snapshot.nodes)} nodes, {len(parsed.warnings)} warnings): {alone}")
    print(f"the cycle, decoded by fastjson and parsed, GC paused: {before}")
    print(f"the cycle as the source runs it, range answers read from their bytes, GC paused: "
          f"{whole}")


if __name__ == "__main__":
    main()
