"""How long a stopping leader keeps the Lease: SIGTERM (the stop event) -> Lease released.

A real `policyd run --leader-elect` (the daemon, its pod watch and its elector, through the real
`kubernetes` client) runs against the fake API server of tests/kubernetes, which holds its watch
open as a real server does (no pod changes: the watch waits out its 30 s window). Once it leads
and its watch is open, the stop event is set; the time until the Lease has no holder is what a
standby waits, plus at most its retry period (2 s by default), before it leads. Repeated, the
median printed.

    .venv/bin/python benchmarks/k8s_failover.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from pathlib import Path

import repository  # noqa: F401  (the repository on sys.path, after PYTHONPATH's trees)
from kubernetes import client as k8s  # type: ignore[import-untyped]
from prometheus_client import CollectorRegistry

from policyd.daemon import DaemonSettings, HttpSettings, KubernetesSection, run
from policyd.daemon.backend import Parts
from policyd.daemon.settings import PrometheusSettings
from policyd.sources.kubernetes_pod_watch import PodWatch
from tests.daemon.fakes import FakeActuator, FakeSource, policy_yaml
from tests.kubernetes import world


class Scope:
    namespaces: tuple[str, ...] = ()
    label_selector = "policyd.io/managed=true"
    container_name: str | None = None
    node_name: str | None = None


def once(tmp: Path) -> float:
    (tmp / "p.yaml").write_text(policy_yaml())
    settings = DaemonSettings(
        policies=(tmp / "p.yaml",), backend="kubernetes",
        prometheus=PrometheusSettings(url="http://127.0.0.1:9", profile="kubernetes"),
        kubernetes=KubernetesSection(), http=HttpSettings(enabled=False))
    with world.served() as (server, _), server.api_client() as api:
        world.node_w2(server.cluster)
        world.resize_pod(server.cluster, "rs-done")
        stop = threading.Event()
        parts = Parts(source=FakeSource(), actuator=FakeActuator(),
                      events=PodWatch(k8s.CoreV1Api(api), Scope()),
                      lease_api=k8s.CoordinationV1Api(api))
        thread = threading.Thread(target=run, args=(settings,), kwargs={
            "out": open("/dev/null", "w"), "stop": stop, "registry": CollectorRegistry(),  # noqa: SIM115
            "parts": parts, "leader_identity": "a"})
        thread.start()
        while not (any(r["query"].get("watch") for r in server.requests) and
                   (server.cluster.get("leases", "policyd", "policyd-specon") or {}).get(
                       "spec", {}).get("holderIdentity") == "a"):
            time.sleep(0.01)
        time.sleep(0.2)
        started = time.perf_counter()
        stop.set()
        while (server.cluster.get("leases", "policyd", "policyd-specon") or {}).get(
                "spec", {}).get("holderIdentity") == "a":
            time.sleep(0.005)
        released = time.perf_counter() - started
        thread.join(60)
        return released


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    import tempfile  # noqa: PLC0415

    times = []
    for _ in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            times.append(once(Path(tmp)))
    print(f"stop -> Lease released: median {statistics.median(times):.3f} s "
          f"(min {min(times):.3f}, max {max(times):.3f}, {args.repeats} runs)")


if __name__ == "__main__":
    main()
