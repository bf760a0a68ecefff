"""What one `policyd run` process is in a deployment: a node agent, or an elected manager.

Node agent (`policyd run --node NAME`, the Kubernetes DaemonSet): the policies whose kind has
scope "node" (FlowCon), for the containers on its own node. The scoping is done on the
snapshot, after the source and before the engine (`NodeScopedSource`): the snapshot keeps only
that node and the containers on it, so the engine decides exactly as it would for a one-node
cluster and stays unchanged. Events (Algorithm 2) are filtered the same way: a pod starting on
another node resets nothing here. Policies of scope "cluster" are left out by the daemon
(`Daemon(scope="node")`), with a warning, at start and on every reload.

Manager (`policyd run --leader-elect`, the Deployment's replicas): a `LeaderElector` on its
own thread takes part in the election on the Lease; the actuator is wrapped in `LeaderGate`
(`leader.LeaderOnly`): every replica decides (metrics, logs, alerts), only the leader applies,
and a leader whose renewals fail stops applying after `renew_deadline_seconds`, before another
replica may take over (`lease_duration_seconds`). On each acquisition, half-done migrations
are recovered (a standby never recovers), serialised with the actions.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from policyd.daemon.settings import KubernetesSection
from policyd.engine.kind import Scope
from policyd.engine.registry import KINDS
from policyd.engine.spec import PolicyDocument
from policyd.model import Action, Decision, Snapshot
from policyd.model.events import ContainerEvent
from policyd.tick import Actuator, EventSource, Outcome, Source, close_source

if TYPE_CHECKING:  # leader imports the Kubernetes client: only when elections are wanted
    from policyd.daemon.leader import LeaderElector, LeaseSettings
    from policyd.daemon.ports import OutcomeObserver

LOG = logging.getLogger(__name__)

NODE_AGENT_SCOPE: Scope = "node"
"""The scope of the kinds a node agent runs."""


# --- node agent ----------------------------------------------------------------------------

def scope_to_node(snapshot: Snapshot, node: str) -> Snapshot:
    """`snapshot` with only `node` and the containers on it (pure)."""
    return replace(snapshot, nodes=tuple(n for n in snapshot.nodes if n.name == node),
                   containers=tuple(c for c in snapshot.containers if c.node == node))


class NodeScopedSource:
    """A `Source` whose snapshots hold one node and its containers."""

    def __init__(self, source: Source, node: str) -> None:
        self.source, self.node = source, node

    def snapshot(self, policies: Sequence[PolicyDocument], *,
                 intervals: Mapping[str, float] | None = None) -> Snapshot:
        return scope_to_node(self.source.snapshot(policies, intervals=intervals), self.node)

    def close(self) -> None:
        close_source(self.source)


class NodeScopedEvents:
    """An `EventSource` passing on only the events of one node."""

    def __init__(self, events: EventSource, node: str) -> None:
        self.events, self.node = events, node

    def watch(self, on_event: Callable[[ContainerEvent], None], stop: threading.Event) -> None:
        def mine(event: ContainerEvent) -> None:
            if event.node == self.node:
                on_event(event)
        self.events.watch(mine, stop)


def watched_kinds(node: str | None, leader: bool, *, node_reports: bool = False) -> list[str]:
    """The kinds whose policy custom resources a process watches, by its role: a node agent
    the kinds of scope node (the only ones it may run), an elected manager and a lone
    `policyd run` every kind: any policy runs cluster-wide when it may stop or move jobs
    (`on_target`/`on_converged: stop`, Predictive's `migrate`: `Kind.scope_of`). Each process
    runs the policies of its own scope; with `node_reports` a node agent also watches the kinds
    it reports to the manager (`Kind.node_reports`)."""
    if node is not None:
        return [name for name, kind in KINDS.items()
                if kind.scope == NODE_AGENT_SCOPE or kind.policy_scope is not None
                or (node_reports and kind.node_reports is not None)]
    return list(KINDS)


def node_agent_policies(policies: Sequence[PolicyDocument], *,
                        node_reports: bool = False) -> list[PolicyDocument]:
    """The policies a node agent runs: those whose kind has scope node, and with
    `node_reports` those it reports to the manager (a cluster-wide kind with
    `Kind.node_reports`)."""
    return [p for p in policies if KINDS.of(p).scope_of(p) == NODE_AGENT_SCOPE
            or (node_reports and KINDS.of(p).reports_of(p))]


def manager_reads(policies: Sequence[PolicyDocument]) -> list[str]:
    """What a manager with `node_reports` reads for each cluster-wide policy, one line each:
    its node agents' reports, or every container (a kind that cannot be split, or SpeCon with
    `stop`, whose agents decide nothing), so that an operator sees which policies the split
    leaves reading the whole cluster."""
    lines = []
    for p in policies:
        kind = KINDS.of(p)
        if kind.scope_of(p) != "cluster":
            continue
        if kind.reports_of(p):
            lines.append(f"policy {p.name} ({p.kind}): decided from its node agents' reports")
        elif kind.node_reports is not None:
            lines.append(f"policy {p.name} ({p.kind}): reads every container: it may stop jobs, "
                         "and its node agents decide nothing that could report them")
        else:
            lines.append(f"policy {p.name} ({p.kind}): reads every container: {p.kind} is not "
                         "decided from node reports")
    return lines


# --- manager: leader election ----------------------------------------------------------------

def lease_settings(section: KubernetesSection, identity: str) -> LeaseSettings:
    """The settings file's `kubernetes` section -> the elector's settings."""
    from policyd.daemon.leader import LeaseSettings  # noqa: PLC0415

    lease = {name: getattr(section, name) for name in LeaseSettings.model_fields
             if name != "identity"}  # the section's Lease fields: LeaseSettings extends them
    return LeaseSettings(identity=identity, **lease)


class LeaderOnlyObserver:
    """A backend's observer told only while this replica leads (its writes, such as Events,
    are made once, by the replica that acts)."""

    def __init__(self, observer: OutcomeObserver, elector: LeaderElector) -> None:
        self.observer = observer
        self.elector = elector

    def on_outcome(self, outcome: Outcome, now: float) -> None:
        if self.elector.leading():
            self.observer.on_outcome(outcome, now)

    def flush(self) -> None:
        self.observer.flush()


class LeaderGate:
    """`LeaderOnly` (apply only while leading) plus recovery on each acquisition, run under
    the same lock as the actions so a recovery and an action never interleave."""

    def __init__(self, actuator: Actuator, elector: LeaderElector, *,
                 recover: Callable[[], object] | None = None) -> None:
        from policyd.daemon.leader import LeaderOnly  # noqa: PLC0415

        self.only = LeaderOnly(actuator, elector)
        self.elector = elector
        self._recover = recover
        self._lock = threading.Lock()

    @property
    def skipped(self) -> int:
        """Actions a standby did not apply."""
        return self.only.skipped

    def apply(self, action: Action, decision: Decision) -> None:
        with self._lock:
            self.only.apply(action, decision)

    def acquired(self) -> None:
        """Leadership was just acquired: finish or roll back half-done migrations."""
        if self._recover is None:
            return
        with self._lock:
            if not self.elector.leading():
                return
            try:
                done = self._recover()
            except Exception as exc:  # the actuator tries again before its next action
                LOG.error("leader: recovering half-done migrations failed: %s", exc)
                return
            if isinstance(done, list) and done:
                LOG.info("leader: recovered %d half-done migrations", len(done))


class Election:
    """The elector on its own thread, from `start` until `stop`; `gate` gates the actuator."""

    def __init__(self, settings: LeaseSettings, lease_api: Any, actuator: Actuator, *,
                 recover: Callable[[], object] | None = None,
                 elector: LeaderElector | None = None) -> None:
        from policyd.daemon.leader import LeaderElector  # noqa: PLC0415

        self.elector = elector if elector is not None else LeaderElector(settings, lease_api)
        self.gate = LeaderGate(actuator, self.elector, recover=recover)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _acquired(self) -> None:  # off the election thread: renewals must not wait for it
        threading.Thread(target=self.gate.acquired, name="policyd-recover",
                         daemon=True).start()

    def start(self) -> None:
        s = self.elector.settings
        LOG.info("leader election on lease %s/%s as %s", s.namespace, s.name, s.identity)
        self._thread = threading.Thread(target=self.elector.run,
                                         args=(self._stop, self._acquired),
                                         name="policyd-leader", daemon=True)
        self._thread.start()

    def try_once(self) -> bool:
        """One attempt now, on this thread (`--once`); whether this replica leads."""
        leads = self.elector.step()
        if leads:
            self.gate.acquired()
        return leads

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
