"""What one cadvisor-rest cycle costs: bytes from each cAdvisor, decoding, reading, assembling.

Usage: python benchmarks/cadvisor_rest.py [--hosts 4] [--containers 100] [--samples 30]
                                          [--repeat 5]

Each host answers `POST /api/v1.3/docker/` (a local server on 127.0.0.1) with `--containers`
Docker containers of `--samples` stats samples each: copies of the real ContainerInfo of
tests/sources/payloads/cadvisor/otel_PreInfoContainer.json (every field of a real sample:
cpu, diskio, memory, network, filesystem), with their own names, ids, times one second apart
and growing counters, written as compact JSON as cAdvisor's Go encoder writes it (encoded
once: the servers' own work is not timed). 30 samples is
one 30 s interval at cAdvisor's default 1 s housekeeping: what each cycle fetches once the
source has its rings. Prints the answer size per host, then medians of `--repeat`: a whole
`snapshot()` over HTTP (one Prometheus range query, one POST per host), and, in process on
the decoded answers, `json.loads`, `read_docker_containers` and `assemble`.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import repository  # noqa: F401  (the repository on sys.path, after PYTHONPATH's trees)

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import median_seconds

from policyd.engine.flowcon import FlowConPolicy
from policyd.engine.spec import API_VERSION
from policyd.sources.cadvisor_info import parse_timestamp, read_docker_containers, rfc3339
from policyd.sources.cadvisor_snapshot import SETTINGS, HostReading, assemble
from policyd.sources.cadvisor_source import CadvisorRestSource
from policyd.sources.matrix import read_matrix
from policyd.sources.promql import build_queries
from tests.sources.cadvisor_server import Stub, load, serving

NOW = parse_timestamp("2019-04-09T22:30:00Z")


def host_answer(host: int, containers: int, samples: int) -> list[dict[str, Any]]:
    (template,) = load("otel_PreInfoContainer.json").values()
    sample = template["stats"][0]
    out = []
    for i in range(containers):
        info = copy.deepcopy(template)
        cid = f"{host:04x}{i:060x}"
        info["id"], info["name"] = cid, f"/docker/{cid}"
        info["aliases"] = [f"job-{host}-{i}", cid]
        stats = []
        for k in range(samples):
            entry = copy.deepcopy(sample)
            entry["timestamp"] = rfc3339(NOW - samples + k + 1)
            entry["cpu"]["usage"]["total"] = 10**12 + k * 5 * 10**8  # 0.5 cores
            stats.append(entry)
        info["stats"] = stats
        out.append(info)
    return out


def policy() -> FlowConPolicy:
    return FlowConPolicy.model_validate({
        "apiVersion": API_VERSION, "kind": "FlowCon", "metadata": {"name": "b"},
        "spec": {"interval_seconds": 10, "window_intervals": 3}})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--containers", type=int, default=100)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    q = build_queries([policy()], SETTINGS, now_seconds=NOW)
    steps = [q.start_seconds + q.step_seconds * k for k in range(4)]
    names = [f"job-{h}-{i}" for h in range(args.hosts) for i in range(args.containers)]
    evaluation = {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"container": n}, "values": [[t, "1.0"] for t in steps]} for n in names]}}
    answers = [host_answer(h, args.containers, args.samples) for h in range(args.hosts)]
    bodies = [json.dumps(Stub(docker=a).served_docker({"num_stats": -1}),
                         separators=(",", ":")) for a in answers]
    print(f"{args.hosts} hosts x {args.containers} containers x {args.samples} samples; "
          f"answer per host {len(bodies[0]) / 1e6:.2f} MB "
          f"({len(bodies[0]) / (args.containers * args.samples):.0f} B per sample)")

    with ExitStack() as stack:
        prom = stack.enter_context(serving(Stub(prometheus=evaluation)))
        hosts = {f"w{h}": stack.enter_context(serving(Stub(docker_body=b,
                                                             machine={"num_cores": 16})))
                 for h, b in enumerate(bodies)}

        def cycle() -> None:
            src = CadvisorRestSource(prom, hosts, timeout_seconds=60, clock=lambda: NOW)
            try:
                src.snapshot([policy()])
            finally:
                src.close()

        print(f"snapshot() over HTTP: {median_seconds(cycle, args.repeat):.3f} s")

    decoded = [json.loads(b) for b in bodies]
    decode = median_seconds(lambda: [json.loads(b) for b in bodies], args.repeat)
    print(f"json.loads of the answers: {decode:.3f} s")
    read = median_seconds(lambda: [read_docker_containers(d, "b") for d in decoded], args.repeat)
    print(f"read_docker_containers: {read:.3f} s")
    readings = [HostReading(node=f"w{h}", cores=16.0,
                            containers=tuple(read_docker_containers(d, "b")[0]))
                for h, d in enumerate(decoded)]
    matrix = read_matrix(evaluation["data"]["result"])
    made = median_seconds(lambda: assemble(evaluation=matrix, hosts=readings, cpu={},
                                           queries=q), args.repeat)
    print(f"assemble: {made:.3f} s")


if __name__ == "__main__":
    main()
