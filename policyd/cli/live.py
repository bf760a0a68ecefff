"""`policyd plan --prometheus URL`: the live snapshot, built from Prometheus the way the daemon
will build it, and optionally saved so the same decision can be replayed offline.

The source profile says where things are in Prometheus (`policyd.sources.settings`):
kubernetes (kubelet cAdvisor + kube-state-metrics), cadvisor-docker (standalone cAdvisor per
Docker host) or process (the exporter process's own CPU, when no cAdvisor runs); or, with
cadvisor-rest, that CPU and facts come from each Docker host's cAdvisor REST API (`--cadvisor
NODE=URL`, `policyd.sources.cadvisor_source`) and only the loss from Prometheus. With the
kubernetes profile and a Kubernetes API (`--kubeconfig FILE`, or `--kubernetes-host URL` such as
`kubectl proxy`'s), the snapshot is built exactly as the daemon builds it
(`policyd.sources.kubernetes_pods`): pods, nodes and their capacity from one list each, loss
and CPU from Prometheus; kube-state-metrics is not needed. With `--node-reports` it is the
manager's snapshot with `node_reports: true`: the node agents' reports, read from Prometheus
in one query (`policyd.sources.node_reports`), and no container.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TextIO

from policyd.cli.errors import InputError
from policyd.engine.spec import PolicyDocument
from policyd.model import Snapshot
from policyd.model.codec import snapshot_to_dict

if TYPE_CHECKING:
    from policyd.sources import SourceSettings

PROFILES = ("kubernetes", "cadvisor-docker", "process", "cadvisor-rest")


def add_arguments(parser: argparse.ArgumentParser,
                  source: argparse._MutuallyExclusiveGroup) -> None:
    """The live options; `--prometheus` joins `source` (exclusive with --snapshot)."""
    source.add_argument("--prometheus", metavar="URL",
                        help="build the snapshot live from this Prometheus (see below)")
    live = parser.add_argument_group("live snapshot from Prometheus (with --prometheus)")
    live.add_argument("--source-profile", choices=PROFILES, default="kubernetes",
                      help="where jobs' CPU and facts are found (default: kubernetes)")
    live.add_argument("--node-name", action="append", default=[], metavar="INSTANCE=NODE",
                      help="cadvisor-docker/process: a scrape target's node name (repeatable)")
    live.add_argument("--cadvisor", action="append", default=[], metavar="NODE=URL",
                      help="cadvisor-rest: a Docker node's cAdvisor (repeatable, one per node)")
    live.add_argument("--capacity-cores", type=float,
                      help="process profile: cores of every node (default: this machine's)")
    live.add_argument("--process-job", metavar="JOB",
                      help="process profile: only this scrape job's processes")
    live.add_argument("--kubeconfig", metavar="FILE",
                      help="kubernetes profile: read pods and nodes from this cluster's API, "
                           "as the daemon does (no kube-state-metrics needed)")
    live.add_argument("--kubernetes-host", metavar="URL",
                      help="kubernetes profile: the same from an API server URL (e.g. "
                           "`kubectl proxy`'s http://127.0.0.1:8001)")
    live.add_argument("--scrape-interval-seconds", type=float, default=15.0,
                      help="Prometheus's scrape interval (rate windows span two scrapes)")
    live.add_argument("--prometheus-timeout-seconds", type=float, default=10.0,
                      help="per request to Prometheus (and, with cadvisor-rest, to cAdvisor)")
    live.add_argument("--max-concurrent-queries", type=_query_bound, default=2, metavar="N",
                      help="how many of the cycle's Prometheus queries are out at once, 1 to "
                           "16, as the daemon's prometheus.max_concurrent_queries (default: 2; "
                           "1: one after the other)")
    live.add_argument("--node-reports", action="store_true",
                      help="decide as a manager with node_reports: true does: the policies "
                           "from their node agents' reports in Prometheus (one query), not "
                           "from every container (SpeCon, Predictive with migrate, Deadline, "
                           "FlowCon2, and policies that may stop jobs)")
    live.add_argument("--save-snapshot", metavar="FILE",
                      help="write the snapshot the decision was made from (replay it with "
                           "--snapshot)")


def _query_bound(text: str) -> int:
    """`--max-concurrent-queries`: a whole number from 1 to `query_pool.MAX_WORKERS`, as the
    daemon's setting; its default, 2, is the sources' `MAX_CONCURRENT_QUERIES` (not imported
    here: an offline plan loads no source)."""
    from policyd.sources.query_pool import MAX_WORKERS  # noqa: PLC0415

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 1 <= value <= MAX_WORKERS:
        raise argparse.ArgumentTypeError(f"{value} is not allowed: must be 1 to {MAX_WORKERS}")
    return value


def _pairs(option: str, pairs: list[str], shape: str) -> dict[str, str]:
    names = {}
    problems = []
    for pair in pairs:
        left, sep, right = pair.partition("=")
        if not sep or not left or not right:
            problems.append(f"{option} {pair!r}: expected {shape}")
        names[left] = right
    if problems:
        raise InputError(problems)
    return names


def _node_names(pairs: list[str]) -> dict[str, str]:
    return _pairs("--node-name", pairs, "INSTANCE=NODE")


def settings_from(args: argparse.Namespace) -> SourceSettings:
    from policyd.sources import cadvisor_docker, kubernetes, process  # noqa: PLC0415

    nodes = _node_names(args.node_name)
    scrape = args.scrape_interval_seconds
    if args.source_profile == "kubernetes":
        return kubernetes(scrape_interval_seconds=scrape)
    if args.source_profile == "cadvisor-docker":
        return cadvisor_docker(node_names=nodes, scrape_interval_seconds=scrape)
    cores = args.capacity_cores if args.capacity_cores else float(os.cpu_count() or 1)
    return process(capacity_cores=cores, job=args.process_job, node_names=nodes,
                   scrape_interval_seconds=scrape)


class LiveSource(Protocol):
    """What `plan` asks of a source: the snapshot, and the data problems met building it."""

    @property
    def last_warnings(self) -> tuple[str, ...]: ...

    def snapshot(self, policies: Sequence[PolicyDocument], *,
                 intervals: Mapping[str, float] | None = None) -> Snapshot: ...


def _nothing() -> None:
    pass


def _source(args: argparse.Namespace) -> tuple[LiveSource, Callable[[], None]]:
    """The source the profile names and how to close it (HTTP client libraries load only for
    live plans, and the sources too, so offline plans start fast)."""
    cadvisors = _pairs("--cadvisor", args.cadvisor, "NODE=URL")
    api = args.kubeconfig or args.kubernetes_host
    if api and args.source_profile != "kubernetes":
        raise InputError(["--kubeconfig and --kubernetes-host go with --source-profile "
                          "kubernetes"])
    if api:
        return _kubernetes_source(args)
    if args.source_profile != "cadvisor-rest":
        if cadvisors:
            raise InputError(["--cadvisor goes with --source-profile cadvisor-rest"])
        from policyd.sources.prometheus import PrometheusSource  # noqa: PLC0415

        try:
            return PrometheusSource(args.prometheus, settings_from(args),
                                    timeout_seconds=args.prometheus_timeout_seconds,
                                    max_concurrent_queries=args.max_concurrent_queries), _nothing
        except ValueError as exc:
            raise InputError([str(exc)]) from None
    from policyd.sources.cadvisor_source import CadvisorRestSource, url_problems  # noqa: PLC0415

    problems = url_problems(cadvisors)
    if problems:
        raise InputError([f"--cadvisor: {p}" for p in problems])
    try:
        rest = CadvisorRestSource(args.prometheus, cadvisors,
                                  timeout_seconds=args.prometheus_timeout_seconds,
                                  max_concurrent_queries=args.max_concurrent_queries)
    except ValueError as exc:
        raise InputError([str(exc)]) from None
    return rest, rest.close


def _kubernetes_source(args: argparse.Namespace) -> tuple[LiveSource, Callable[[], None]]:
    """The daemon's Kubernetes source: pods and nodes from the API, the rest from Prometheus
    (the Kubernetes client loads only here)."""
    from kubernetes import client as k8s  # type: ignore[import-untyped]  # noqa: PLC0415
    from kubernetes import config as k8s_config  # noqa: PLC0415

    from policyd.actuators.kubernetes import KubernetesSettings  # noqa: PLC0415
    from policyd.actuators.kubernetes.calls import api_client  # noqa: PLC0415
    from policyd.sources.kubernetes_pods import KubernetesPodSource  # noqa: PLC0415

    try:
        scope = KubernetesSettings(host=args.kubernetes_host, kubeconfig=args.kubeconfig)
        shared = api_client(scope)
    except (ValueError, k8s_config.ConfigException, OSError) as exc:
        raise InputError([f"--kubeconfig {args.kubeconfig}: {exc}" if args.kubeconfig
                          else f"--kubernetes-host: {exc}"]) from None
    source = KubernetesPodSource(args.prometheus, scope, core=k8s.CoreV1Api(shared),
                                 timeout_seconds=args.prometheus_timeout_seconds,
                                 max_concurrent_queries=args.max_concurrent_queries)
    return source, shared.close


def _reported(args: argparse.Namespace, source: LiveSource,
              policies: Sequence[PolicyDocument]) -> LiveSource:
    """`--node-reports`: the manager's source with `node_reports: true` (the reports from
    Prometheus; the held jobs of an admitting policy from `source`, as the daemon's
    manager has them); every policy must be one a manager decides from reports."""
    from policyd.engine.registry import KINDS  # noqa: PLC0415
    from policyd.sources.node_reports import NodeReportSource, ReportedSource  # noqa: PLC0415

    others = [f"--node-reports: policy {p.name} ({p.kind}) is not decided from node reports "
              "(its node agents decide it alone, or it reads every container): plan it "
              "without --node-reports" for p in policies if not KINDS.of(p).reports_of(p)]
    if others:
        raise InputError(others)
    return ReportedSource(source, NodeReportSource(
        args.prometheus, timeout_seconds=args.prometheus_timeout_seconds))


def live_snapshot(args: argparse.Namespace, policies: Sequence[PolicyDocument],
                  err: TextIO) -> Snapshot:
    """The snapshot Prometheus (and cAdvisor) give now for `policies`; warnings go to `err`;
    failures are InputErrors."""
    from policyd.sources import SourceError  # noqa: PLC0415

    source, close = _source(args)
    if args.node_reports:
        source = _reported(args, source, policies)
    try:
        snapshot = source.snapshot(policies)
    except SourceError as exc:  # Prometheus's and cAdvisor's have logged what failed
        api = bool(args.kubeconfig or args.kubernetes_host)
        where = ("Prometheus and cAdvisor" if args.source_profile == "cadvisor-rest" else
                 "Prometheus and the Kubernetes API" if api else "Prometheus")
        raise InputError([str(exc)] if api else [],
                         f"no decision: the snapshot could not be read from {where}") from None
    except ValueError as exc:  # policies that cannot share one snapshot (their queries)
        raise InputError([str(exc)], "no decision") from None
    finally:
        close()
    for warning in source.last_warnings:
        print(f"warning: {warning}", file=err)
    if args.source_profile == "kubernetes" and not (args.kubeconfig or args.kubernetes_host) \
            and any("no known CPU capacity" in w for w in source.last_warnings):
        print("hint: without kube-state-metrics, give --kubeconfig FILE or --kubernetes-host "
              "URL: node capacity then comes from the Kubernetes API", file=err)
    if args.save_snapshot:
        path = Path(args.save_snapshot)
        try:
            path.write_text(json.dumps(snapshot_to_dict(snapshot)) + "\n", encoding="utf-8")
        except OSError as exc:
            raise InputError([f"{path}: cannot write the snapshot: {exc.strerror}"]) from None
    return snapshot
