"""`run`: settings in, a running policyd out, until stopped; the exit code back.

Wires the pieces the settings choose: the policies (all valid, or nothing starts), the metrics
registry and the HTTP endpoints, the alerter, and either the simulated world
(`simulated.SimulatedRun`) or the real daemon (`scheduler.Daemon`) on the docker or kubernetes
backend, as a node agent (`node`: the node-scoped kinds, on that node only) or an elected manager
(`leader_identity`: only the Lease holder applies; see `roles`).
The caller owns the process: it passes the stop event (set by its signal handlers) and the
output stream; nothing here exits the process or reads the environment.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TextIO

from prometheus_client import CollectorRegistry

from policyd.daemon import roles
from policyd.daemon.backend import (
    BackendError,
    Parts,
    alerter,
    checked_access,
    docker_parts,
    kubernetes_parts,
)
from policyd.daemon.health import Health
from policyd.daemon.http import StatusServer
from policyd.daemon.metrics import DaemonMetrics
from policyd.daemon.ports import joined
from policyd.daemon.reload import PolicyPoller, PolicyWatcher
from policyd.daemon.scheduler import Daemon, TickReport
from policyd.daemon.settings import DaemonSettings
from policyd.daemon.simulated import SimulatedRun, SimulationError
from policyd.engine.spec import PolicyDocument
from policyd.policy import check_files
from policyd.tick import Source, close_source

LOG = logging.getLogger(__name__)


class StartupError(Exception):
    """policyd cannot start as configured; `lines` say why (one problem each)."""

    def __init__(self, lines: Sequence[str], summary: str = "") -> None:
        self.lines = list(lines)
        self.summary = summary
        super().__init__("\n".join([*self.lines, summary]))


def load_policy_set(settings: DaemonSettings) -> list[PolicyDocument]:
    """Every configured policy; `StartupError` with every problem if any file is invalid."""
    if not settings.policies:
        return []
    checked = check_files(settings.policies)
    problems = checked.problems
    if problems:
        noun = "problem" if len(problems) == 1 else "problems"
        raise StartupError([str(p) for p in problems],
                           f"{len(problems)} {noun} in the policy files; nothing started")
    for warning in checked.warnings:
        LOG.warning("%s", warning)
    return list(checked.policies)


def check_role(settings: DaemonSettings, node: str | None, leader_identity: str | None) -> None:
    """`StartupError` when `--node` / `--leader-elect` make no sense with these settings."""
    problems = []
    if node is not None and leader_identity is not None:
        problems.append("--node and --leader-elect do not go together: a node agent owns its "
                        "node (no election); the manager (SpeCon) is the one elected")
    if node is not None:
        if not node.strip():
            problems.append("--node needs a node name (e.g. --node $(NODE_NAME))")
        if settings.backend == "simulated":
            problems.append("--node needs backend docker or kubernetes: the simulator is the "
                            "whole cluster (a node agent runs node-scoped policies on one "
                            "real node)")
    if leader_identity is not None:
        if settings.backend != "kubernetes":
            problems.append(f"--leader-elect needs backend kubernetes (the election is on a "
                            f"Lease); the settings say backend {settings.backend}")
        elif not leader_identity.strip():
            problems.append("--leader-elect needs an identity (POD_NAME or the hostname)")
    if problems:
        raise StartupError(problems, "nothing started")


def run(settings: DaemonSettings, *, out: TextIO, stop: threading.Event, once: bool = False,
        registry: CollectorRegistry | None = None, parts: Parts | None = None,
        node: str | None = None, leader_identity: str | None = None) -> int:
    """Run policyd as `settings` say until `stop` is set (or, with `once`, one tick per
    policy). `parts` replaces the backend's source, actuator and listener (and Lease API).
    `node`: a node agent, the node-scoped policies for the containers on that node only.
    `leader_identity`:
    take part in the leader election as this identity; only the leader applies actions."""
    check_role(settings, node, leader_identity)
    policies = load_policy_set(settings)
    resources_wanted = settings.backend == "kubernetes" and settings.kubernetes.policy_resources
    split = settings.node_reports
    if node is not None and not roles.node_agent_policies(policies, node_reports=split) \
            and not resources_wanted:
        raise StartupError([f"--node {node}: no policy of a node-scoped kind (FlowCon) in "
                            "policies: a node agent runs those only"], "nothing started")
    registry = registry if registry is not None else CollectorRegistry()
    metrics = DaemonMetrics(registry)
    health = Health(simulated=settings.backend == "simulated")
    server = None
    if settings.http.enabled:
        try:
            server = StatusServer(settings.http.addr, settings.http.port, registry=registry,
                                  health=health)
        except OSError as exc:
            where = f"{settings.http.addr}:{settings.http.port}"
            raise StartupError([f"http: cannot listen on {where}: {exc.strerror or exc}"]) \
                from None
        server.start()
    try:
        try:
            observer = alerter(settings.alertmanager)
        except BackendError as exc:
            raise StartupError([str(exc)], "nothing started") from None
        if settings.backend == "simulated":
            try:
                simulation = SimulatedRun(settings.simulation, policies, metrics=metrics,
                                          out=out, health=health, observer=observer)
            except SimulationError as exc:
                raise StartupError([str(exc)]) from None
            return simulation.run(stop, once=once)
        if parts is None:
            try:
                parts = (kubernetes_parts(settings, recover=leader_identity is None, node=node)
                         if settings.backend == "kubernetes"
                         else docker_parts(settings))
            except BackendError as exc:
                raise StartupError([str(exc)], "nothing started") from None
        source, actuator, events = parts.source, parts.actuator, parts.events
        watcher: PolicyPoller = PolicyWatcher(settings.policies)
        resources = None
        if resources_wanted and parts.policy_api is not None:
            from policyd.daemon.policy_resources import PolicyResources  # noqa: PLC0415
            from policyd.daemon.policy_set import PolicySources  # noqa: PLC0415

            resources = PolicyResources(parts.policy_api,
                                        roles.watched_kinds(node, leader_identity is not None,
                                                                node_reports=split))
            sources = PolicySources(PolicyWatcher(settings.policies), resources, policies)
            resources.list_all()
            policies = list(sources.policies())
            watcher = sources
        if node is not None and not roles.node_agent_policies(policies, node_reports=split):
            if resources is None:
                raise StartupError([f"--node {node}: no policy of a node-scoped kind "
                                    "(FlowCon) in policies: a node agent runs those only"],
                                   "nothing started")
            LOG.warning("--node %s: no policy of a node-scoped kind yet; waiting for one (a "
                        "policy file or resource)", node)
        if node is not None:
            source = roles.NodeScopedSource(source, node)
            events = roles.NodeScopedEvents(events, node) if events is not None else None
        elif settings.node_reports:
            source = reported_source(settings, source)
            for line in roles.manager_reads(policies):
                LOG.info("node_reports: %s", line)
        election = None
        if leader_identity is not None:
            if parts.lease_api is None:
                raise StartupError(["--leader-elect: this backend has no Lease API"])
            election = roles.Election(
                roles.lease_settings(settings.kubernetes, leader_identity), parts.lease_api,
                actuator, recover=parts.recover)
            actuator = election.gate
        backend_observer = parts.observer
        if backend_observer is not None and election is not None:
            backend_observer = roles.LeaderOnlyObserver(backend_observer, election.elector)
        daemon = Daemon(policies, source=source, actuator=actuator, events=events,
                        observer=joined(observer, backend_observer), metrics=metrics,
                        health=health, watcher=watcher,
                        scope=roles.NODE_AGENT_SCOPE if node is not None else None,
                        settle=parts.settle, sees_held_jobs=parts.sees_held_jobs,
                        node_reports=settings.node_reports)
        if once:
            if election is not None and not election.try_once():
                LOG.info("leader: %s does not hold the lease: deciding, applying nothing",
                         leader_identity)
            reports = daemon.run_once()
            daemon.shutdown()
            closed(source)
            for report in reports:
                print(describe_report(report), file=out)
            return 0 if all(r.result == "ok" for r in reports) else 1
        if election is not None:
            election.try_once()  # the leader recovers and acts from the first tick on
            election.start()
        if resources is not None:
            resources.start(stop)
        try:
            daemon.run(stop)
        finally:
            if election is not None:
                election.stop()  # after the daemon: no tick runs any more
            if resources is not None:
                resources.join()
            closed(source)
        return 0
    finally:
        if server is not None:
            server.close()


def closed(source: Source) -> None:
    """Close the daemon's source once no tick runs (`policyd.tick.close_source`: its query
    threads, HTTP sessions, engine connections); a failure is logged, the shutdown goes on."""
    try:
        close_source(source)
    except Exception:  # shutting down: say it, do not fail the exit for it
        LOG.exception("closing the source failed")


def reported_source(settings: DaemonSettings, source: Source) -> Source:
    """The manager's source with `node_reports`: the policies of kinds that decide from node
    reports read them from Prometheus (`policyd.sources.node_reports`), the others `source`."""
    from policyd.sources.node_reports import NodeReportSource, ReportedSource  # noqa: PLC0415

    prometheus = settings.prometheus
    assert prometheus.url is not None
    return ReportedSource(source, NodeReportSource(
        prometheus.url, timeout_seconds=prometheus.timeout_seconds,
        access=checked_access(prometheus, "prometheus")))


def describe_report(report: TickReport) -> str:
    """`policy NAME: ok, 2 actions (0 failed), next interval 20 s` or the error."""
    if report.outcome is None:
        return f"policy {report.policy}: {report.result}: {report.error or ''}".rstrip(": ")
    decision = report.outcome.decision
    dry = " [dry run]" if decision.dry_run else ""
    return (f"policy {report.policy}: ok, {len(decision.actions)} actions "
            f"({len(report.outcome.failed)} failed), next interval "
            f"{decision.next_interval:g} s{dry}")
