"""A manager from node reports against a real Prometheus: what a cycle costs at 1,000 and
10,000 workers (issue 18; benchmarks/README.md, "node_reports.py").

    flock /tmp/policyd-slow.lock .venv/bin/python benchmarks/node_reports.py [--nodes 1000 10000]
                                    [--cycles 5]
                                    [--kind specon|predictive|deadline|flowcon-stop]

Per size: the synthetic cluster of engine_scale.py (10 jobs a worker, 60 samples a series) under
the thesis's SpeCon (policies/specon.yaml) or the shipped Predictive, which moves jobs
(policies/predictive.yaml; each job's steps and declared total added as forecast_scale.py adds
them; half the workers crowded, half roomy: `CROWDED_CORES`) or the shipped Deadline
(policies/deadline.yaml; the same steps and workers, each job's deadline set where it needs
`DEADLINE_CORES` cores, so that the crowded workers' jobs are at risk, and one held job per
`HELD_EVERY` workers to admit) or the shipped FlowCon with `on_converged` and `on_target: stop`
(`flowcon-stop`: a policy that runs in the manager only because it may stop jobs; the same
steps, totals and workers); every worker's report made by the kind's `node_reports` (what each
node agent makes of its own node; for flowcon-stop the agent's whole tick, `policyd.engine.
report`: its decision, its stops listed in the report); a child process publishes them on
/metrics endpoints of 1,000 workers each (as the agents would, each its own), re-stamped every 5
s so that none goes stale; a real Prometheus (127.0.0.1, 5 s scrapes) scrapes them. Then the
manager's cycles, in this process: `NodeReportSource.snapshot` (the one instant query, its
answer decoded) and `decide` (SpeCon's Algorithms 4 and 5, Predictive's moves, from the reports;
Deadline's moves and admissions, its held jobs handed over as the manager's own source would
list them, that listing not timed; flowcon-stop's stops), each timed in wall and CPU seconds
(the child's and Prometheus's CPU are theirs, not counted); the answer's bytes and Prometheus's
own evaluation time (`stats=all`) from one raw fetch; the process's peak RSS. Also one agent's
cycle: `node_reports` on one worker's 10 jobs (median of 200; Predictive's and Deadline's agents
plan the worker's limits in it, their node part's work; flowcon-stop's agent decides the whole
policy on its node, forecasts included).
"listed": the jobs the reports name (requests, candidates, waiting, at-risk jobs and stops).
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import resource
import statistics
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path

import repository  # noqa: F401  (the repository on sys.path, after PYTHONPATH's trees)
from forecast_scale import with_steps
from synthetic import make_snapshot
from timing import host_speed_text

from policyd.daemon.health import Health
from policyd.daemon.http import StatusServer
from policyd.daemon.node_report_metrics import NodeReportCollector
from policyd.engine import decide, report
from policyd.engine.forecasting import forecast_containers, settings_of
from policyd.engine.registry import KINDS
from policyd.engine.spec import PolicyDocument
from policyd.model import NodeReport, PendingJob, Snapshot
from policyd.policy import load_policies
from policyd.sources.node_reports import NodeReportSource, reports_query
from tests.integration.servers import LOOPBACK, prometheus

ROOT = Path(__file__).resolve().parents[1]
SCRAPE_SECONDS = 5.0
PER_NODE = 10
PER_ENDPOINT = 1_000
"""Workers' reports per /metrics endpoint of the publishing child."""
CROWDED_CORES, ROOMY_CORES = 4.0, 32.0
"""Predictive's workers: even ones crowded (its 10 jobs on 4 cores: six wait), odd ones with
cores to spare, so that every crowded worker reports as many waiting jobs as it may lose and
the manager has moves to price (the report's largest size)."""
DEADLINE_CORES = 1.5
"""Deadline's jobs: each one's deadline 1.2 x its forecast time on this many cores away."""
HELD_EVERY = 10
"""Deadline: one held job per this many workers."""


KINDS_MEASURED = ("specon", "predictive", "deadline", "flowcon-stop")


def shipped(kind: str) -> PolicyDocument:
    """The shipped policy of `kind` (`KINDS_MEASURED`), selecting the synthetic jobs."""
    stops = kind == "flowcon-stop"
    policy = load_policies(ROOT / "policies" / f"{'flowcon' if stops else kind}.yaml")[0]
    spec = policy.spec.model_copy(update={
        "selector": policy.spec.selector.model_copy(update={"labels": {"app": "train"}}),
        **({"on_converged": "stop", "on_target": "stop"} if stops else {})})
    return policy.model_copy(update={"spec": spec})


def reports_of(policy: PolicyDocument, snapshot: Snapshot) -> tuple[NodeReport, ...]:
    kind = KINDS.of(policy)
    if kind.node_reports is None or kind.stops_only(policy):
        return report(policy, snapshot)[1]
    return kind.node_reports(policy, snapshot)


def publish(reports: tuple[NodeReport, ...], policy: str, ready: Connection) -> None:
    """The child: the reports on /metrics endpoints of `PER_ENDPOINT` workers each (as the
    agents would publish them, each its own: one endpoint of 10,000 workers' reports takes
    longer to scrape than the 5 s scrape timeout on a loaded 2-core machine), re-stamped now
    every 5 s, until killed."""
    from prometheus_client import CollectorRegistry  # noqa: PLC0415

    collectors, ports = [], []
    for start in range(0, len(reports), PER_ENDPOINT):
        registry = CollectorRegistry()
        collector = NodeReportCollector()
        registry.register(collector)
        server = StatusServer(LOOPBACK, 0, registry=registry, health=Health())
        server.start()
        collectors.append((collector, reports[start:start + PER_ENDPOINT]))
        ports.append(server.port)
    while True:
        now = float(int(time.time()))
        for collector, mine in collectors:
            collector.publish(policy, tuple(replace(r, time=now) for r in mine))
        if ports:
            ready.send(ports)
            ports = []
        time.sleep(SCRAPE_SECONDS)


def raw_query(url: str, query: str) -> tuple[int, float, float]:
    """(bytes, wall seconds, Prometheus's evaluation seconds) of one fetch of `query`."""
    params = urllib.parse.urlencode({"query": query, "stats": "all"})
    started = time.perf_counter()
    with urllib.request.urlopen(f"{url}/api/v1/query?{params}", timeout=60) as response:
        body = response.read()
    wall = time.perf_counter() - started
    timings = json.loads(body)["data"].get("stats", {}).get("timings", {})
    return len(body), wall, float(timings.get("evalTotalTime", float("nan")))


def wait_for(source: NodeReportSource, policy: PolicyDocument, count: int) -> None:
    """Until Prometheus holds every report (the source's warnings meanwhile not logged)."""
    logging.getLogger("policyd.sources.node_reports").setLevel(logging.ERROR)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if len(source.snapshot([policy]).node_reports) == count:
            return
        time.sleep(1.0)
    raise RuntimeError(f"{count} node reports not in Prometheus within 180 s: "
                       f"{source.last_warnings[:3]}")


def with_deadlines(policy: PolicyDocument, snapshot: Snapshot) -> Snapshot:
    """`snapshot` with each forecast job's deadline `DEADLINE_CORES` away (module docstring),
    and held jobs with deadlines."""
    settings = settings_of(policy, snapshot, alpha=0.05, interval_seconds=20.0)
    found = forecast_containers(settings, snapshot, {c.id for c in snapshot.containers})

    def at(seconds: float) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(snapshot.time + seconds))

    containers = tuple(
        c if c.id not in found.by_id else replace(c, labels={
            **c.labels, "policyd.io/deadline": at(
                1.2 * found.by_id[c.id].remaining_seconds_at(DEADLINE_CORES))})
        for c in snapshot.containers)
    held = tuple(PendingJob(id=f"held-{i}", name=f"held-{i}", submitted_at=snapshot.time - 5,
                            labels={"app": "train", "policyd.io/deadline": at(3600 + i)})
                 for i in range(len(snapshot.nodes) // HELD_EVERY))
    return replace(snapshot, containers=containers, pending=held)


def series_of(reports: tuple[NodeReport, ...], policy: str) -> int:
    """How many series the agents publish for `reports`."""
    collector = NodeReportCollector()
    collector.publish(policy, reports)
    return sum(len(family.samples) for family in collector.collect())


def measure(nodes: int, cycles: int, kind: str) -> dict[str, float]:
    policy = shipped(kind)
    snapshot = make_snapshot(nodes * PER_NODE, per_node=PER_NODE)
    if kind != "specon":  # half the workers crowded (jobs wait), half with cores to spare
        snapshot = replace(with_steps(snapshot, totals=True), nodes=tuple(
            replace(n, cpu_capacity=CROWDED_CORES if i % 2 == 0 else ROOMY_CORES)
            for i, n in enumerate(snapshot.nodes)))
    if kind == "deadline":
        snapshot = with_deadlines(policy, snapshot)
    reports = reports_of(policy, snapshot)
    one = replace(snapshot, nodes=snapshot.nodes[:1],
                  containers=tuple(c for c in snapshot.containers
                                   if c.node == snapshot.nodes[0].name))
    agent = []
    for _ in range(200):
        started = time.process_time()
        reports_of(policy, one)
        agent.append(time.process_time() - started)
    series = series_of(reports, policy.name)
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    publisher = context.Process(target=publish, args=(reports, policy.name, child), daemon=True)
    publisher.start()
    try:
        ports = parent.recv()
        with tempfile.TemporaryDirectory() as work, \
                prometheus(Path(work), [f"{LOOPBACK}:{port}" for port in ports],
                           scrape_seconds=SCRAPE_SECONDS) as prom:
            source = NodeReportSource(prom.url, timeout_seconds=60, retries=0)
            wait_for(source, policy, nodes)
            size, fetch, evaluation = raw_query(prom.url, reports_query([policy.name]))
            walls, cpus, observes, moves = [], [], [], 0
            for _ in range(cycles):
                wall, cpu = time.perf_counter(), time.process_time()
                seen = replace(source.snapshot([policy]), pending=snapshot.pending)
                observed = time.perf_counter() - wall
                decision = decide(policy, seen)
                walls.append(time.perf_counter() - wall)
                cpus.append(time.process_time() - cpu)
                observes.append(observed)
                moves = len(decision.actions)
                assert len(seen.node_reports) == nodes, source.last_warnings[:3]
    finally:
        publisher.kill()
        publisher.join()
    return {"nodes": nodes, "containers": nodes * PER_NODE, "series": series,
            "listed": sum(len(r.requests) + len(r.candidates) + len(r.waiting)
                          + len(r.at_risk) + len(r.stops) for r in reports),
            "cycle_wall_s": statistics.median(walls), "cycle_cpu_s": statistics.median(cpus),
            "observe_wall_s": statistics.median(observes),
            "answer_mb": size / 1e6, "fetch_s": fetch, "prometheus_eval_s": evaluation,
            "actions": moves, "agent_cpu_ms": 1000 * statistics.median(agent),
            "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--cycles", type=int, default=5)
    parser.add_argument("--kind", choices=KINDS_MEASURED, default="specon")
    args = parser.parse_args()
    print(f"{host_speed_text()}; {args.kind}", flush=True)
    print(f"{'workers':>8} {'jobs':>8} {'listed':>7} {'series':>7} {'answer':>8} {'fetch':>7} "
          f"{'prom eval':>9} {'observe':>8} {'cycle':>8} {'cycle CPU':>9} {'actions':>7} "
          f"{'agent':>8} {'RSS':>8}",
          flush=True)
    for nodes in args.nodes:
        r = measure(nodes, args.cycles, args.kind)
        print(f"{r['nodes']:>8,} {r['containers']:>8,} {r['listed']:>7,} {r['series']:>7,} "
              f"{r['answer_mb']:>6.2f}MB {r['fetch_s']:>6.3f}s {r['prometheus_eval_s']:>8.3f}s "
              f"{r['observe_wall_s']:>7.3f}s {r['cycle_wall_s']:>7.3f}s {r['cycle_cpu_s']:>8.3f}s "
              f"{r['actions']:>7} {r['agent_cpu_ms']:>6.2f}ms {r['rss_mib']:>5.0f}MiB", flush=True)


if __name__ == "__main__":
    threading.current_thread().name = "manager"
    main()
