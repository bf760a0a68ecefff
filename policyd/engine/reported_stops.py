"""Stops decided by node agents and made by the manager: a policy that may stop jobs, split.

Theory of operation. Only the cluster-wide manager may stop a job (`policyd.engine.kind.
MANAGER_ONLY`: a node agent holds no right to delete pods or end Jobs), so a policy with
`on_target` / `on_converged: stop` runs on the manager, and without node reports the manager
reads every container's series each cycle: a FlowCon policy that only sets CPU splits across
its node agents, the same policy with `on_converged: stop` does not.

With `node_reports`, the agent decides its node's part of the policy (`Kind.agent_part`: the
whole policy when it is cluster-wide only because it may stop jobs, else the kind's node
part) exactly as a lone daemon would, guards (opt-out, minimum age, cooldown) and ownership
among the policies it knows included, takes the `Stop` actions out of that decision
(`take_stops`) and applies the rest. Its node's report lists the jobs it would have stopped
(`NodeReport.stops`: the job, what happened, and the figure behind it). The manager makes one
`Stop` per listed job (`reported_stops`), with the policy's grace: it decides nothing of its
own about them, it could not (it reads no container). A report older than two intervals is
not read (`policyd.sources.node_reports`), so a stop is at most that late.

Pure: the decision, the snapshot and the reports are the only inputs.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import replace

from policyd.engine.delivery import REPORTED, STOPPED
from policyd.engine.spec import PolicyDocument
from policyd.model import Assessment, Decision, NodeReport, Snapshot, Stop, StopRequest


def take_stops(decision: Decision, snapshot: Snapshot
               ) -> tuple[Decision, dict[str, tuple[StopRequest, ...]]]:
    """`decision` without its `Stop` actions (what a node agent applies), and them as stop
    requests by node, each with its figure: the job's latest loss when it reached its target,
    its forecast's remaining improvement when it converged."""
    stops = [a for a in decision.actions if isinstance(a, Stop)]
    if not stops:
        return decision, {}
    by_id = {c.id: c for c in snapshot.containers}
    forecasts = {a.container: a.forecast for a in decision.assessments}
    out: defaultdict[str, list[StopRequest]] = defaultdict(list)
    unfigured: list[str] = []
    for stop in stops:
        figure = math.nan
        if stop.event == "target" and stop.container in by_id:
            values = by_id[stop.container].evaluation.values
            figure = float(values[-1]) if len(values) else math.nan
        forecast = forecasts.get(stop.container)
        if stop.event == "converged" and forecast is not None \
                and forecast.remaining_improvement is not None:
            figure = forecast.remaining_improvement
        if math.isfinite(figure):
            out[stop.node].append(StopRequest(container=stop.container, event=stop.event,
                                              figure=figure))
        else:  # the delivery step judges only finite figures: a defect, said, never silent
            unfigured.append(stop.container)
    kept = tuple(a for a in decision.actions if not isinstance(a, Stop))
    stopped = {stop.container for stop in stops}
    assessments = tuple(_reported(a) if a.container in stopped else a
                        for a in decision.assessments)
    reported = sum(len(v) for v in out.values())
    notes = [f"{reported} job(s) to stop reported to the manager (only it stops jobs)"]
    if unfigured:
        notes.append(f"not reported, no finite figure behind the stop: {', '.join(unfigured)}")
    return (replace(decision, actions=kept, assessments=assessments,
                    notes=(*decision.notes, *notes)),
            {node: tuple(requests) for node, requests in out.items()})


def _reported(a: Assessment) -> Assessment:
    """A stopped job's assessment as the agent that only reports the stop words it."""
    delivery = a.delivery
    if delivery is None:
        return a
    return a.but(delivery=replace(delivery, reason=delivery.reason.replace(STOPPED, REPORTED)),
                 note=a.note.replace(STOPPED, REPORTED))


def plain_reports(policy: PolicyDocument, snapshot: Snapshot) -> tuple[NodeReport, ...]:
    """A report per node with the figures every report has (its cores, the CPU in use, the
    jobs the policy selects there): what a policy whose manager only stops jobs reports beside
    its stops."""
    selected = Counter(c.node for c in snapshot.containers if policy.spec.selector.selects(c))
    return tuple(NodeReport(policy=policy.name, node=n.name, time=snapshot.time,
                            cpu_capacity_cores=n.cpu_capacity, cpu_used_cores=n.cpu_usage,
                            selected=selected[n.name])
                 for n in snapshot.nodes)


def with_stops(reports: tuple[NodeReport, ...],
               stops: Mapping[str, tuple[StopRequest, ...]]) -> tuple[NodeReport, ...]:
    """`reports` with each node's stop requests."""
    return tuple(replace(r, stops=stops[r.node]) if r.node in stops else r for r in reports)


def reported_stops(policy: PolicyDocument, snapshot: Snapshot) -> tuple[Stop, ...]:
    """The manager's `Stop` of every job its agents' reports of `policy` list, by node and
    job; one per job: a job two reports list (moved between its old node's last report and
    its new node's) is stopped where the latest of them found it."""
    latest: dict[str, tuple[NodeReport, StopRequest]] = {}
    for r in sorted((r for r in snapshot.node_reports if r.policy == policy.name),
                    key=lambda r: (r.time, r.node)):
        for q in r.stops:
            latest[q.container] = (r, q)
    out = [Stop(policy=policy.name, container=q.container, node=r.node, event=q.event,
                reason=_why(q, r.node, policy), grace_seconds=policy.spec.stop_grace_seconds)
           for r, q in latest.values()]
    return tuple(sorted(out, key=lambda s: (s.node, s.container)))


def _why(q: StopRequest, node: str, policy: PolicyDocument) -> str:
    if q.event == "target":
        what = f"reached its target loss (latest loss {q.figure:.4g})"
    else:
        what = (f"converged (the loss to fall by only {100 * q.figure:.2f} % more, under "
                f"converged_below {100 * policy.spec.converged_below:g} %)")
    return f"{what}, reported by the node agent of {node}"


def stops_decision(policy: PolicyDocument, snapshot: Snapshot, *, kind: str,
                   interval_seconds: float) -> Decision:
    """The manager's decision of a policy that is cluster-wide only because it may stop jobs
    (`Kind.stops_only`), from its agents' reports: their stops, nothing else."""
    stops = reported_stops(policy, snapshot)
    reports = sum(1 for r in snapshot.node_reports if r.policy == policy.name)
    return Decision(policy=policy.name, kind=kind, time=snapshot.time, actions=stops,
                    assessments=(), next_interval=interval_seconds,
                    dry_run=policy.spec.dry_run,
                    notes=(f"from {reports} node report(s): {len(stops)} job(s) to stop; the "
                           "node agents set the CPU",))
