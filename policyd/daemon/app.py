"""`run`: settings in, a running policyd out, until stopped; the exit code back.

Wires the pieces the settings choose: the policies (all valid, or nothing starts), the metrics
registry and the HTTP endpoints, the alerter, and either the simulated world
(`simulated.SimulatedRun`) or the real daemon (`scheduler.Daemon`) on the docker backend.
The caller owns the process: it passes the stop event (set by its signal handlers) and the
output stream; nothing here exits the process or reads the environment.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TextIO

from prometheus_client import CollectorRegistry

from policyd.daemon.backend import Parts, alerter, docker_parts
from policyd.daemon.health import Health
from policyd.daemon.http import StatusServer
from policyd.daemon.metrics import DaemonMetrics
from policyd.daemon.reload import PolicyWatcher
from policyd.daemon.scheduler import Daemon, TickReport
from policyd.daemon.settings import DaemonSettings
from policyd.daemon.simulated import SimulatedRun, SimulationError
from policyd.engine.spec import PolicyDocument
from policyd.policy import validate_files

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
    policies, problems = validate_files(settings.policies)
    if problems:
        noun = "problem" if len(problems) == 1 else "problems"
        raise StartupError([str(p) for p in problems],
                           f"{len(problems)} {noun} in the policy files; nothing started")
    return policies


def run(settings: DaemonSettings, *, out: TextIO, stop: threading.Event, once: bool = False,
        registry: CollectorRegistry | None = None, parts: Parts | None = None) -> int:
    """Run policyd as `settings` say until `stop` is set (or, with `once`, one tick per
    policy). `parts` replaces the docker backend's source, actuator and listener."""
    policies = load_policy_set(settings)
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
        observer = alerter(settings.alertmanager)
        if settings.backend == "simulated":
            try:
                simulation = SimulatedRun(settings.simulation, policies, metrics=metrics,
                                          out=out, health=health, observer=observer)
            except SimulationError as exc:
                raise StartupError([str(exc)]) from None
            return simulation.run(stop, once=once)
        parts = parts if parts is not None else docker_parts(settings, policies)
        daemon = Daemon(policies, source=parts.source, actuator=parts.actuator,
                        events=parts.events, observer=observer, metrics=metrics, health=health,
                        watcher=PolicyWatcher(settings.policies))
        if once:
            reports = daemon.run_once()
            daemon.shutdown()
            for report in reports:
                print(describe_report(report), file=out)
            return 0 if all(r.result == "ok" for r in reports) else 1
        daemon.run(stop)
        return 0
    finally:
        if server is not None:
            server.close()


def describe_report(report: TickReport) -> str:
    """`policy NAME: ok, 2 actions (0 failed), next interval 20 s` or the error."""
    if report.outcome is None:
        return f"policy {report.policy}: {report.result}: {report.error or ''}".rstrip(": ")
    decision = report.outcome.decision
    dry = " [dry run]" if decision.dry_run else ""
    return (f"policy {report.policy}: ok, {len(decision.actions)} actions "
            f"({len(report.outcome.failed)} failed), next interval "
            f"{decision.next_interval:g} s{dry}")
