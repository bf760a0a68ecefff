"""The offline contract in JSON form: snapshot dicts in, decision dicts out (docs/design.md).

Fields may be added to either side, none renamed. Parsing takes already-decoded JSON (the
caller reads the file), so this module stays free of I/O. Every problem is reported with the
JSON path where it was found, e.g. `containers[3].cpu_allocation: must be in (0, 1], got 1.5`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import numpy as np

from policyd.model.deadline import JobDeadline
from policyd.model.decision import (
    Action,
    Admit,
    Assessment,
    Decision,
    MarkMigrated,
    Migrate,
    SetCpu,
    Stop,
)
from policyd.model.forecast import JobForecast
from policyd.model.node_report import (
    AT_RISK_FIGURES,
    RESIDENT_FIGURES,
    RESIDENT_SIDE_FIGURES,
    WAITING_FIGURES,
    AtRiskJob,
    NodeReport,
    ReallocationRequest,
    RebalanceCandidate,
    ResidentJob,
    StopRequest,
    WaitingJob,
)
from policyd.model.pending import PendingJob, QueuedJob
from policyd.model.qoe import Delivery, QoeStatus
from policyd.model.snapshot import Container, Markers, Node, Series, Snapshot


class SnapshotError(ValueError):
    """A snapshot document that cannot be read; `problems` lists `path: message` lines."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


def _number(raw: Mapping[str, Any], key: str, path: str, problems: list[str], *,
            default: float | None = None, optional: bool = False) -> float | None:
    value = raw.get(key, default)
    if value is None:
        if not optional:
            problems.append(f"{path}.{key}: required number is missing")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        problems.append(f"{path}.{key}: expected a number, got {type(value).__name__} {value!r}")
        return None
    return float(value)


def _string_map(raw: Mapping[str, Any], key: str, path: str, problems: list[str]) -> dict[str, str]:
    value = raw.get(key, _NOTHING)
    if value is _NOTHING:
        return {}
    if isinstance(value, dict):
        # a plain loop: twice as fast as all() over a generator for a container's few labels
        for k, v in value.items():
            if not (isinstance(k, str) and isinstance(v, str)):
                break
        else:
            return value
    problems.append(f"{path}.{key}: expected an object of string values")
    return {}


_NOTHING: Any = object()
"""A key's absence (`raw.get(key, _NOTHING)`), told apart from any value it may hold."""


_SERIES_KEYS = ("evaluation", "cpu_usage", "steps")


def _batched_series(raw_containers: list[Any]) -> dict[tuple[int, str], Series]:
    """Every container's series converted at once, keyed by (container index, key).

    Converting 20,000 short `[[t, v], ...]` lists one `np.array` call each costs more than the
    rest of reading a snapshot; one pass over all their numbers converts each one the same
    way. Where that fails (some pair is not two numbers), nothing is returned and each series
    is read alone, which reports the problem where it is (`_series`).
    """
    keys: list[tuple[int, str]] = []
    lengths: list[int] = []
    pairs: list[Any] = []
    for i, raw in enumerate(raw_containers):
        if not isinstance(raw, dict):
            continue
        for key in _SERIES_KEYS:
            value = raw.get(key, [])
            if isinstance(value, list):
                keys.append((i, key))
                lengths.append(len(value))
                pairs.extend(value)
    # Every pair a list of two: then reading the numbers in a row converts each one as
    # np.array(pairs) would (numpy's own float conversion), without its shape discovery.
    if not (set(map(type, pairs)) <= {list} and set(map(len, pairs)) <= {2}):
        return {}
    try:
        flat = np.fromiter(itertools.chain.from_iterable(pairs), np.float64, 2 * len(pairs))
    except (TypeError, ValueError, OverflowError):
        return {}
    array = flat.reshape(-1, 2)
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return dict(zip(keys, Series.many(array[:, 0], array[:, 1], offsets), strict=True))


def _series(raw: Mapping[str, Any], key: str, path: str, problems: list[str]) -> Series:
    value = raw.get(key, [])
    if not isinstance(value, list):
        problems.append(f"{path}.{key}: expected a list of [time_seconds, value] pairs")
        return Series.empty()
    try:
        return Series.from_pairs(value)
    except (TypeError, ValueError, OverflowError) as exc:  # OverflowError: an int past 1e308
        problems.append(f"{path}.{key}: {exc}")
        return Series.empty()


def _metrics(raw: Mapping[str, Any], path: str, problems: list[str]) -> dict[str, Series]:
    """`metrics`: an object of metric name -> `[[time_seconds, value], ...]` (optional)."""
    value = raw.get("metrics", _NOTHING)
    if value is _NOTHING:  # most snapshots: no policy asks for QoE metrics
        return {}
    if not isinstance(value, dict):
        problems.append(f"{path}.metrics: expected an object of metric name -> series")
        return {}
    return {str(name): _series(value, name, f"{path}.metrics", problems) for name in value}


_NO_MARKERS = Markers()
_NO_MARKERS_FORM: dict[str, Any] = {
    "migrated": False, "rebalanced": False, "converged_at": None, "last_action_at": None,
    "move_failures": 0, "move_failed_at": None,
}
"""How `snapshot_to_dict` writes a workload policyd never marked (most of a snapshot's)."""


def _markers(raw: Any, path: str, problems: list[str]) -> Markers:
    if raw is None:
        return _NO_MARKERS
    # the unmarked form, each value of its own type: one shared value. Equal to it, only the
    # flags and the count can be of another type (0 == False and 0.0 == 0 in Python).
    if raw == _NO_MARKERS_FORM and raw["migrated"] is False and raw["rebalanced"] is False \
            and type(raw["move_failures"]) is int:
        return _NO_MARKERS
    if not isinstance(raw, dict):
        problems.append(f"{path}: expected an object")
        return Markers()
    flags = {}
    for key in ("migrated", "rebalanced"):
        value = raw.get(key, False)
        if not isinstance(value, bool):
            problems.append(f"{path}.{key}: expected true or false, got {value!r}")
            value = False
        flags[key] = value
    return Markers(
        migrated=flags["migrated"],
        rebalanced=flags["rebalanced"],
        converged_at=_number(raw, "converged_at", path, problems, optional=True),
        last_action_at=_number(raw, "last_action_at", path, problems, optional=True),
        move_failures=_count(raw, "move_failures", path, problems),
        move_failed_at=_number(raw, "move_failed_at", path, problems, optional=True),
    )


def _count(raw: Mapping[str, Any], key: str, path: str, problems: list[str]) -> int:
    value = raw.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        problems.append(f"{path}.{key}: expected a whole number >= 0, got {value!r}")
        return 0
    return value


def _required_string(raw: Mapping[str, Any], key: str, path: str, problems: list[str]) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value:
        problems.append(f"{path}.{key}: required non-empty string, got {value!r}")
        return ""
    return value


def _node(raw: Any, path: str, problems: list[str]) -> Node | None:
    if not isinstance(raw, dict):
        problems.append(f"{path}: expected an object")
        return None
    before = len(problems)
    name = _required_string(raw, "name", path, problems)
    capacity = _number(raw, "cpu_capacity", path, problems)
    usage = _number(raw, "cpu_usage", path, problems, default=0.0)
    speed = _number(raw, "speed", path, problems, optional=True)
    if len(problems) > before or capacity is None or usage is None:
        return None
    try:
        return Node(name=name, cpu_capacity=capacity, cpu_usage=usage, speed=speed)
    except ValueError as exc:
        problems.append(f"{path}: {exc}")
        return None


def _container(raw: Any, path: str, problems: list[str],
               batched: Mapping[str, Series]) -> Container | None:
    if not isinstance(raw, dict):
        problems.append(f"{path}: expected an object")
        return None
    before = len(problems)
    cid = _required_string(raw, "id", path, problems)
    node = _required_string(raw, "node", path, problems)
    started_at = _number(raw, "started_at", path, problems)
    allocation = _number(raw, "cpu_allocation", path, problems, default=1.0)
    name = raw.get("name", cid)
    namespace = raw.get("namespace", "")
    if not isinstance(name, str) or not isinstance(namespace, str):
        problems.append(f"{path}: name and namespace must be strings")
    evaluation, usage, steps = (batched[key] if key in batched
                                else _series(raw, key, path, problems) for key in _SERIES_KEYS)
    total_steps = _number(raw, "total_steps", path, problems, optional=True)
    submitted_at = _number(raw, "submitted_at", path, problems, optional=True)
    labels = _string_map(raw, "labels", path, problems)
    annotations = _string_map(raw, "annotations", path, problems)
    markers = _markers(raw.get("markers"), f"{path}.markers", problems)
    metrics = _metrics(raw, path, problems)
    if len(problems) > before or started_at is None or allocation is None:
        return None
    try:
        return Container(
            id=cid, name=str(name), node=node, started_at=started_at,
            evaluation=evaluation, cpu_usage=usage, cpu_allocation=allocation,
            namespace=str(namespace), labels=labels, annotations=annotations, markers=markers,
            steps=steps, total_steps=total_steps, submitted_at=submitted_at,
            metrics=metrics,
        )
    except ValueError as exc:
        problems.append(f"{path}: {exc}")
        return None


def _pending(raw: Any, path: str, problems: list[str]) -> PendingJob | None:
    if not isinstance(raw, dict):
        problems.append(f"{path}: expected an object")
        return None
    before = len(problems)
    pid = _required_string(raw, "id", path, problems)
    submitted_at = _number(raw, "submitted_at", path, problems)
    name, namespace, node = raw.get("name", pid), raw.get("namespace", ""), raw.get("node")
    if not isinstance(name, str) or not isinstance(namespace, str):
        problems.append(f"{path}: name and namespace must be strings")
    if node is not None and (not isinstance(node, str) or not node):
        problems.append(f"{path}.node: expected a node name or null, got {node!r}")
    labels = _string_map(raw, "labels", path, problems)
    annotations = _string_map(raw, "annotations", path, problems)
    if len(problems) > before or submitted_at is None:
        return None
    try:
        return PendingJob(id=pid, name=str(name), submitted_at=submitted_at, node=node,
                          namespace=str(namespace), labels=labels, annotations=annotations)
    except ValueError as exc:
        problems.append(f"{path}: {exc}")
        return None


def _node_report(raw: Any, path: str, problems: list[str]) -> NodeReport | None:
    if not isinstance(raw, dict):
        problems.append(f"{path}: expected an object")
        return None
    before = len(problems)
    policy = _required_string(raw, "policy", path, problems)
    node = _required_string(raw, "node", path, problems)
    figures = {key: _number(raw, key, path, problems)
               for key in ("time", "cpu_capacity_cores", "cpu_used_cores")}
    counts = {key: _count(raw, key, path, problems)
              for key in ("pc", "wc", "cc", "selected", "unreallocated")}
    requests: list[tuple[str, float]] = []
    candidates: list[tuple[str, float]] = []
    for key, out, field_name in (("requests", requests, "gain"),
                                 ("candidates", candidates, "converged_seconds")):
        for where, item in _listed(raw, key, path, problems):
            container = _required_string(item, "container", where, problems)
            value = _number(item, field_name, where, problems)
            if value is not None:
                out.append((container, value))
    spare = _number(raw, "spare_cores", path, problems) if "spare_cores" in raw else 0.0
    top = _number(raw, "top_cores", path, problems) if "top_cores" in raw else 0.0
    waiting = _reported_jobs(raw, "waiting", WaitingJob, figures=WAITING_FIGURES,
                             path=path, problems=problems)
    at_risk = _reported_jobs(raw, "at_risk", AtRiskJob, figures=AT_RISK_FIGURES,
                             path=path, problems=problems)
    speed = _number(raw, "stated_speed", path, problems) if "stated_speed" in raw else 0.0
    residents = _reported_jobs(raw, "residents", ResidentJob, figures=RESIDENT_FIGURES,
                               optional=RESIDENT_SIDE_FIGURES, path=path, problems=problems)
    stops = _stop_requests(raw, path, problems)
    time, capacity, used = (figures[k] for k in ("time", "cpu_capacity_cores",
                                                 "cpu_used_cores"))
    if len(problems) > before or time is None or capacity is None or used is None \
            or spare is None or top is None or speed is None:
        return None
    try:
        return NodeReport(
            policy=policy, node=node, time=time, cpu_capacity_cores=capacity,
            cpu_used_cores=used, pc=counts["pc"], wc=counts["wc"], cc=counts["cc"],
            selected=counts["selected"], unreallocated=counts["unreallocated"],
            requests=tuple(ReallocationRequest(container=c, gain=g) for c, g in requests),
            candidates=tuple(RebalanceCandidate(container=c, converged_seconds=d)
                             for c, d in candidates),
            spare_cores=spare, waiting=waiting, top_cores=top, at_risk=at_risk,
            stated_speed=speed, residents=residents, stops=stops)
    except ValueError as exc:
        problems.append(f"{path}: {exc}")
        return None


def _listed(raw: Mapping[str, Any], key: str, path: str, problems: list[str]
            ) -> list[tuple[str, dict[str, Any]]]:
    """The objects of the list `raw[key]` (none when absent), each with where it is; anything
    else a problem."""
    listed = raw.get(key, [])
    if not isinstance(listed, list):
        problems.append(f"{path}.{key}: expected a list")
        return []
    out = []
    for i, item in enumerate(listed):
        where = f"{path}.{key}[{i}]"
        if isinstance(item, dict):
            out.append((where, item))
        else:
            problems.append(f"{where}: expected an object")
    return out


def _stop_requests(raw: Mapping[str, Any], path: str, problems: list[str]
                   ) -> tuple[StopRequest, ...]:
    """A node report's `stops`: the jobs its agent would stop."""
    out = []
    for where, item in _listed(raw, "stops", path, problems):
        container = _required_string(item, "container", where, problems)
        figure = _number(item, "figure", where, problems)
        event = item.get("event")
        if event not in ("target", "converged"):
            problems.append(f"{where}.event: expected target or converged, got {event!r}")
            continue
        if container and figure is not None:
            try:
                out.append(StopRequest(container=container, event=event, figure=figure))
            except ValueError as exc:
                problems.append(f"{where}: {exc}")
    return tuple(out)


_J = TypeVar("_J", WaitingJob, AtRiskJob, ResidentJob)


def _reported_jobs(raw: Mapping[str, Any], key: str, make: Callable[..., _J], *,
                   figures: tuple[str, ...], path: str, problems: list[str],
                   optional: tuple[str, ...] = ()) -> tuple[_J, ...]:
    """A node report's list of jobs by their figures (and the `optional` ones they have):
    `waiting` (Predictive's jobs a move could serve), `at_risk` (Deadline's) or `residents`
    (FlowCon2's jobs)."""
    out = []
    for where, item in _listed(raw, key, path, problems):
        container = _required_string(item, "container", where, problems)
        values = {name: _number(item, name, where, problems) for name in figures}
        found = {name: value for name, value in values.items() if value is not None}
        if not container or len(found) < len(figures):
            continue
        found |= {name: value for name in optional
                  if (value := _number(item, name, where, problems, optional=True)) is not None}
        try:
            out.append(make(container=container, **found))
        except ValueError as exc:
            problems.append(f"{where}: {exc}")
    return tuple(out)


def snapshot_from_dict(raw: Any) -> Snapshot:
    """Parse a decoded snapshot document; raises SnapshotError listing every problem found."""
    problems: list[str] = []
    if not isinstance(raw, dict):
        raise SnapshotError([f"$: expected a JSON object, got {type(raw).__name__}"])
    time = _number(raw, "time", "$", problems)
    raw_nodes, raw_containers = raw.get("nodes"), raw.get("containers", [])
    if not isinstance(raw_nodes, list) or not raw_nodes:
        problems.append("$.nodes: required non-empty list of nodes")
        raw_nodes = []
    if not isinstance(raw_containers, list):
        problems.append("$.containers: expected a list")
        raw_containers = []
    nodes = [_node(n, f"nodes[{i}]", problems) for i, n in enumerate(raw_nodes)]
    batched = _batched_series(raw_containers)
    containers = [
        _container(c, f"containers[{i}]", problems,
                   {key: batched[i, key] for key in _SERIES_KEYS if (i, key) in batched})
        for i, c in enumerate(raw_containers)
    ]
    raw_pending = raw.get("pending", [])
    if not isinstance(raw_pending, list):
        problems.append("$.pending: expected a list of held jobs")
        raw_pending = []
    pending = [_pending(p, f"pending[{i}]", problems) for i, p in enumerate(raw_pending)]
    raw_reports = raw.get("node_reports", [])
    if not isinstance(raw_reports, list):
        problems.append("$.node_reports: expected a list of node reports")
        raw_reports = []
    reports = [_node_report(r, f"node_reports[{i}]", problems)
               for i, r in enumerate(raw_reports)]
    intervals = raw.get("intervals", {})
    if not isinstance(intervals, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in intervals.values()
    ):
        problems.append("$.intervals: expected an object of policy name -> seconds")
        intervals = {}
    if problems or time is None:
        raise SnapshotError(problems[:50] + ([f"... and {len(problems) - 50} more"]
                                             if len(problems) > 50 else []))
    try:
        return Snapshot(
            time=time,
            nodes=tuple(n for n in nodes if n is not None),
            containers=tuple(c for c in containers if c is not None),
            intervals={k: float(v) for k, v in intervals.items()},
            pending=tuple(p for p in pending if p is not None),
            node_reports=tuple(r for r in reports if r is not None),
        )
    except ValueError as exc:
        raise SnapshotError([f"$: {exc}"]) from None


def snapshot_to_dict(snapshot: Snapshot) -> dict[str, Any]:
    """The JSON form of a snapshot (what `--save-snapshot` writes)."""
    return {
        "time": snapshot.time,
        "nodes": [
            {"name": n.name, "cpu_capacity": n.cpu_capacity, "cpu_usage": n.cpu_usage,
             **({} if n.speed is None else {"speed": n.speed})}
            for n in snapshot.nodes
        ],
        "containers": [
            {
                "id": c.id, "name": c.name, "node": c.node, "namespace": c.namespace,
                "started_at": c.started_at, "labels": dict(c.labels),
                "annotations": dict(c.annotations),
                "evaluation": c.evaluation.pairs(), "cpu_usage": c.cpu_usage.pairs(),
                "cpu_allocation": c.cpu_allocation,
                "markers": {
                    "migrated": c.markers.migrated, "rebalanced": c.markers.rebalanced,
                    "converged_at": c.markers.converged_at,
                    "last_action_at": c.markers.last_action_at,
                    "move_failures": c.markers.move_failures,
                    "move_failed_at": c.markers.move_failed_at,
                },
                "steps": c.steps.pairs(), "total_steps": c.total_steps,
                "submitted_at": c.submitted_at,
                **({"metrics": {name: series.pairs() for name, series in c.metrics.items()}}
                   if c.metrics else {}),
            }
            for c in snapshot.containers
        ],
        "intervals": dict(snapshot.intervals),
        "pending": [
            {"id": p.id, "name": p.name, "namespace": p.namespace, "node": p.node,
             "submitted_at": p.submitted_at, "labels": dict(p.labels),
             "annotations": dict(p.annotations)}
            for p in snapshot.pending
        ],
        **({"node_reports": [node_report_to_dict(r) for r in snapshot.node_reports]}
           if snapshot.node_reports else {}),
    }


def node_report_to_dict(report: NodeReport) -> dict[str, Any]:
    """The JSON form of a node agent's report (`policyd.model.node_report`)."""
    return {
        "policy": report.policy, "node": report.node, "time": report.time,
        "cpu_capacity_cores": report.cpu_capacity_cores,
        "cpu_used_cores": report.cpu_used_cores, "pc": report.pc, "wc": report.wc,
        "cc": report.cc, "selected": report.selected, "unreallocated": report.unreallocated,
        "requests": [{"container": r.container, "gain": r.gain} for r in report.requests],
        "candidates": [{"container": c.container, "converged_seconds": c.converged_seconds}
                       for c in report.candidates],
        **({"spare_cores": report.spare_cores,
            "waiting": [{"container": w.container,
                         **{name: getattr(w, name) for name in WAITING_FIGURES}}
                        for w in report.waiting]}
           if report.spare_cores or report.waiting else {}),
        **({"top_cores": report.top_cores} if report.top_cores else {}),
        **({"at_risk": [{"container": j.container,
                         **{name: getattr(j, name) for name in AT_RISK_FIGURES}}
                        for j in report.at_risk]}
           if report.at_risk else {}),
        **({"stated_speed": report.stated_speed} if report.stated_speed else {}),
        **({"residents": [{"container": j.container,
                           **{name: float(getattr(j, name)) for name in RESIDENT_FIGURES},
                           **{name: getattr(j, name) for name in RESIDENT_SIDE_FIGURES
                              if getattr(j, name) is not None}}
                          for j in report.residents]}
           if report.residents else {}),
        **({"stops": [{"container": q.container, "event": q.event, "figure": q.figure}
                      for q in report.stops]}
           if report.stops else {}),
    }


def _finite_or_none(value: float | None) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return value


def action_to_dict(action: Action) -> dict[str, Any]:
    """One action in the decision's JSON form (`from`/`to` for migrations, as docs/design.md)."""
    match action:
        case SetCpu():
            return {"kind": action.kind, "policy": action.policy, "container": action.container,
                    "node": action.node, "fraction": action.fraction, "mode": action.mode,
                    "reason": action.reason}
        case Migrate():
            return {"kind": action.kind, "policy": action.policy, "container": action.container,
                    "from": action.from_node, "to": action.to_node, "reason": action.reason,
                    "scores": dict(action.scores), "rebalance": action.rebalance,
                    "converged_at": action.converged_at, "grace_seconds": action.grace_seconds}
        case MarkMigrated():
            return {"kind": action.kind, "policy": action.policy, "container": action.container,
                    "node": action.node, "converged_at": action.converged_at,
                    "reason": action.reason, "scores": dict(action.scores)}
        case Admit():
            return {"kind": action.kind, "policy": action.policy, "container": action.container,
                    "node": action.node, "held_on": action.held_on, "fraction": action.fraction,
                    "mode": action.mode, "reason": action.reason}
        case Stop():
            return {"kind": action.kind, "policy": action.policy, "container": action.container,
                    "node": action.node, "event": action.event, "reason": action.reason,
                    "grace_seconds": action.grace_seconds}


def forecast_to_dict(f: JobForecast) -> dict[str, Any]:
    """A forecast's JSON form (seconds from the decision's time; `finish_at` epoch seconds)."""
    return {"steps_done": f.steps_done, "total_steps": f.total_steps,
            "remaining_steps": f.remaining_steps, "remaining_seconds": f.remaining_seconds,
            "finish_at": f.finish_at, "low_seconds": f.low_seconds,
            "high_seconds": f.high_seconds, "steps_per_second": f.steps_per_second,
            "basis": f.basis, "target_loss": f.target_loss,
            "target_eta_seconds": f.target_eta_seconds, "note": f.note,
            **({"remaining_improvement": f.remaining_improvement}
               if f.remaining_improvement is not None else {})}


def qoe_to_dict(q: QoeStatus) -> dict[str, Any]:
    """A job's QoE standing in JSON form (`policyd.model.qoe`)."""
    return {"target": q.target, "metric": q.metric, "comparison": q.comparison,
            "target_value": q.target_value, "measured": q.measured, "state": q.state,
            "shortfall": q.shortfall, "short_seconds": q.short_seconds, "alerting": q.alerting,
            "cores_needed": q.cores_needed}


def delivery_to_dict(d: Delivery) -> dict[str, Any]:
    return {"event": d.event, "response": d.response, "reason": d.reason}


def deadline_to_dict(d: JobDeadline | None) -> dict[str, Any] | None:
    """A deadline's JSON form (times epoch seconds), None for none."""
    if d is None:
        return None
    return {"state": d.state, "deadline_at": d.deadline_at, "eta_at": d.eta_at,
            "slack_seconds": d.slack_seconds, "needed_cores": d.needed_cores, "note": d.note}


def _assessment_to_dict(a: Assessment) -> dict[str, Any]:
    return {"node": a.node, "category": a.category, "gain": _finite_or_none(a.gain),
            "cpu_fraction_now": a.cpu_fraction_now, "cpu_fraction_next": a.cpu_fraction_next,
            "note": a.note,
            "forecast": forecast_to_dict(a.forecast) if a.forecast is not None else None,
            "forecast_note": a.forecast_note, "deadline": deadline_to_dict(a.deadline),
            # added keys only where there is something to say (older outputs stay as they were)
            **({"qoe": qoe_to_dict(a.qoe)} if a.qoe is not None else {}),
            **({"delivery": delivery_to_dict(a.delivery)} if a.delivery is not None else {})}


def _queued_to_dict(q: QueuedJob) -> dict[str, Any]:
    return {"container": q.container, "position": q.position, "why": q.why,
            "reason": q.reason, "deadline": deadline_to_dict(q.deadline)}


def decision_to_dict(decision: Decision) -> dict[str, Any]:
    """The decision's JSON form: the contract's keys first (docs/design.md, "Decision"), then
    policyd's additions."""
    return {
        "actions": [action_to_dict(a) for a in decision.actions],
        "categories": decision.categories,
        "next_interval": decision.next_interval,
        "policy": decision.policy,
        "kind": decision.kind,
        "time": decision.time,
        "dry_run": decision.dry_run,
        "skipped": decision.skipped,
        "containers": {a.container: _assessment_to_dict(a) for a in decision.assessments},
        "notes": list(decision.notes),
        "queue": [_queued_to_dict(q) for q in decision.queue],
    }
