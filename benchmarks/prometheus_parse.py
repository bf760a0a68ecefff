"""How fast three Prometheus answers become a snapshot (the sources' target: a 10,000-container
cycle decoded and parsed in <= 1 s).

Usage: python benchmarks/prometheus_parse.py [--containers 10000] [--samples 60] [--repeat 5]
                                             [--out DIR]

Writes a large answer in the shape Prometheus sends for the kubernetes() profile's three
queries (10 containers per node; values as strings, a few NaN), then times, median of
`--repeat` each, in this order:

* decoding the three bodies with `json.loads` (what prometheus-api-client's `.json()` did);
* decoding them with `policyd.fastjson.loads` (orjson, what `FastPrometheusConnect` does);
* `parse_cycle` on the decoded results;
* the cycle as `PrometheusSource.observe` runs it: decode (fastjson) and parse with the cyclic
  garbage collector paused (`fastjson.paused_gc`), the figure the target is about.

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
from policyd.sources.promql import FACT_LABEL

NOW = 1_700_000_000.0


def write_answers(out: Path, containers: int, samples: int, step: float) -> None:
    steps = [NOW - step * k for k in range(samples - 1, -1, -1)]
    evaluation: list[dict[str, object]] = []
    cpu: list[dict[str, object]] = []
    facts: list[dict[str, object]] = []
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
        cpu.append({"metric": {**ident, **node, "cpu": "total", "id": f"/kubepods/pod{i}/c",
                               "image": "train:1", "name": f"k8s_train_job-{i}"},
                    "values": [[t, f"{0.5 + (i % 10) / 10:.3f}"] for t in steps]})
        base = {**ident, **node, "id": f"/kubepods/pod{i}/c", "image": "train:1"}
        facts.append({"metric": {**base, FACT_LABEL: "started_at"}, "value": [NOW, "1.6e9"]})
        facts.append({"metric": {**base, FACT_LABEL: "shares"}, "value": [NOW, "1024"]})
    for n in range((containers + 9) // 10):
        facts.append({"metric": {"node": f"w{n}", FACT_LABEL: "capacity"}, "value": [NOW, "16"]})
    for name, result, kind in (("evaluation", evaluation, "matrix"), ("cpu", cpu, "matrix"),
                               ("facts", facts, "vector")):
        body = {"status": "success", "data": {"resultType": kind, "result": result}}
        (out / f"{name}.json").write_text(json.dumps(body))


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
        texts = {n: (out / f"{n}.json").read_text() for n in ("evaluation", "cpu", "facts")}
    megabytes = sum(len(t) for t in texts.values()) / 1e6
    bodies = {n: t.encode() for n, t in texts.items()}

    def parse(decoded: dict[str, Any]) -> Parsed:
        return parse_cycle(evaluation=decoded["evaluation"], cpu=decoded["cpu"],
                           facts_result=decoded["facts"], queries=queries, settings=settings)

    def cycle() -> Parsed:
        with fastjson.paused_gc():
            return parse({n: fastjson.loads(b)["data"]["result"] for n, b in bodies.items()})

    def timed(func: Callable[[], object]) -> str:
        wall, cpu = median_wall_and_cpu_seconds(func, args.repeat)
        return f"median {wall:.3f} s wall, {cpu:.3f} s CPU"

    stdlib = timed(lambda: [json.loads(b) for b in bodies.values()])
    fast = timed(lambda: [fastjson.loads(b) for b in bodies.values()])
    decoded = {n: fastjson.loads(b)["data"]["result"] for n, b in bodies.items()}
    parsed = parse(decoded)
    alone = timed(lambda: parse(decoded))
    decoded.clear()  # the whole cycle below decodes its own
    whole = timed(cycle)
    print(f"containers={args.containers} samples={args.samples} answer={megabytes:.1f} MB "
          f"queries_per_cycle={queries.count}; each figure of {args.repeat} runs")
    print(f"json.loads of the three bodies (the client's own decoding): {stdlib}")
    print(f"fastjson.loads of the three bodies (orjson, GC paused): {fast}")
    print(f"parse_cycle (GC on; {len(parsed.snapshot.containers)} containers, "
          f"{len(parsed.snapshot.nodes)} nodes, {len(parsed.warnings)} warnings): {alone}")
    print(f"the cycle, decoded by fastjson and parsed, GC paused: {whole}")


if __name__ == "__main__":
    main()
