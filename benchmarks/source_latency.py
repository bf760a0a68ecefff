"""One source cycle against a Prometheus that answers late, its queries one after the other
and together on the query pool (benchmarks/README.md, prometheus_scale.py, "Thirteenth
session").

    .venv/bin/python benchmarks/source_latency.py [--source kubernetes|docker-stats|both]
                                                  [--delay SECONDS] [--cycles N] [--workers K]

Each source is made twice, with `max_concurrent_queries` 1 and K (default 4), from the tests'
fakes: for `kubernetes` the fake API server replaying the recorded Kubernetes 1.36 answers
(node w2, pod rs-done) and tests/sources/cadvisor_server.py answering as Prometheus; for
`docker-stats` the same Prometheus stand-in (four jobs' loss) and two fake engines (four
containers on one, each one-shot stats call held as long as a query). Every query is held
`--delay` seconds. Each source is warmed with one cycle, then N cycles of each are timed
alternately (1, K, 1, K, ...) around `snapshot([flowcon])`; printed: the medians and their
ratio. Everything runs on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import repository  # noqa: F401  (the repository on sys.path, after PYTHONPATH's trees)
from kubernetes import client as k8s

from policyd.actuators.kubernetes import KubernetesSettings
from policyd.model import Snapshot
from policyd.sources.docker_stats import DockerSnapshotSource
from policyd.sources.kubernetes_pods import KubernetesPodSource
from tests.docker.test_docker_stats import SETTINGS, FakeApi, clients, inspect
from tests.kubernetes import world
from tests.sources.builders import envelope, flowcon, series
from tests.sources.cadvisor_server import Stub, serving

Cycle = Callable[[], Snapshot]
JOBS = 4


@contextmanager
def kubernetes_cycles(delay: float, workers: tuple[int, ...]) -> Iterator[Mapping[int, Cycle]]:
    """A FlowCon cycle of `KubernetesPodSource` (4 queries, the pod and node lists) per bound."""
    stub = Stub(prometheus=world.rs_done_loss, query_delay_seconds=delay)
    with world.served() as (server, _), serving(stub) as url, server.api_client() as api:
        world.node_w2(server.cluster)
        world.resize_pod(server.cluster, "rs-done")
        core = k8s.CoreV1Api(api)
        scope = KubernetesSettings(host=server.url)
        sources = {w: KubernetesPodSource(url, scope, core=core, retries=0,
                                          max_concurrent_queries=w) for w in workers}
        yield {w: (lambda s=s: s.snapshot([flowcon()])) for w, s in sources.items()}


@contextmanager
def docker_cycles(delay: float, workers: tuple[int, ...]) -> Iterator[Mapping[int, Cycle]]:
    """A FlowCon cycle of the docker-stats source (3 queries and the engines' poll) per bound."""
    stub = Stub(prometheus=envelope([series({"container": f"job{i}"}, [2.0, 1.5])
                                     for i in range(JOBS)]), query_delay_seconds=delay)
    with serving(stub) as url:
        sources: dict[int, Any] = {}
        for w in workers:
            engine = FakeApi({f"c{i}": inspect(f"c{i}", f"job{i}") for i in range(JOBS)},
                             delay=delay)
            sources[w] = DockerSnapshotSource(url, SETTINGS,
                                              clients=clients(a=engine, b=FakeApi({})),
                                              retries=0, max_concurrent_queries=w)
        try:
            yield {w: (lambda s=s: s.snapshot([flowcon()])) for w, s in sources.items()}
        finally:
            for s in sources.values():
                s.close()


def timed(cycles: Mapping[int, Cycle], count: int) -> dict[int, list[float]]:
    """Seconds per cycle for each bound: one warm-up each, then `count` rounds alternating."""
    for cycle in cycles.values():
        cycle()
    times: dict[int, list[float]] = {w: [] for w in cycles}
    for _ in range(count):
        for w, cycle in cycles.items():
            start = time.perf_counter()
            cycle()
            times[w].append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", choices=("kubernetes", "docker-stats", "both"),
                        default="both")
    parser.add_argument("--delay", type=float, default=0.05,
                        help="seconds every query (and every stats call) is held (0.05)")
    parser.add_argument("--cycles", type=int, default=7, help="timed cycles per bound (7)")
    parser.add_argument("--workers", type=int, default=4,
                        help="max_concurrent_queries compared with 1 (4)")
    args = parser.parse_args()
    bounds = (1, args.workers)
    chosen = {"kubernetes": [("kubernetes", kubernetes_cycles)],
              "docker-stats": [("docker-stats", docker_cycles)],
              "both": [("kubernetes", kubernetes_cycles), ("docker-stats", docker_cycles)]}
    print(f"delay {1000 * args.delay:.0f} ms a query, {args.cycles} cycles per bound, "
          "alternating; medians")
    for name, make in chosen[args.source]:
        with make(args.delay, bounds) as cycles:
            times = timed(cycles, args.cycles)
        one, many = (statistics.median(times[w]) for w in bounds)
        print(f"{name:>12}: 1 at once {1000 * one:7.1f} ms, {args.workers} at once "
              f"{1000 * many:7.1f} ms, {args.workers} / 1 = {many / one:.2f}x", flush=True)


if __name__ == "__main__":
    main()
