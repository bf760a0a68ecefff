"""What the cAdvisors said + the evaluation range -> one `Snapshot`. Pure: no I/O, no clock.

Theory of operation. As in the cadvisor-docker Prometheus profile (`parse`), the containers of
a snapshot are the evaluation series, joined to cAdvisor's containers by
`parse.evaluation_keys` with the `settings.cadvisor_docker()` identity: the exporter's
`container` label holds the Docker container's name (cAdvisor's `aliases[0]`) or its 12-character
short id, matched through the cgroup path (`ContainerInfo.name`, which ends in the full id).
The snapshot's container id is the Docker name, as in the other Docker profiles: it survives a
migration (the replacement has the same name on another engine).

Per container: `node` is the host whose cAdvisor reports it; `started_at` its
`spec.creation_time`; `cpu_allocation` its shares (a fraction f of the node is f * 1024 shares,
as the Docker actuator writes it) or quota / period (`facts.allocation`); `labels` the
evaluation series' labels and the Docker labels; `markers` the `policyd.io/*` Docker labels
merged with what the actuator recorded (`docker_labels.label_markers`); `cpu_usage` the cores
per interval the caller computed from the counters (`cpu_counter`).

Bad data gives warnings, never an exception (the same rules as `parse`): NaN or stale
evaluation series are passed through (the engine takes no action on them); unmappable or
duplicated ones are left out; a container without CPU samples gets an empty `cpu_usage`; a
Docker name reported by two hosts (a half-done migration) is the later-started one; evaluation
series naming no container of any host, and containers without an evaluation series, are
summarised. Node usage is the sum of the newest interval's cores of every container of the
node, when that interval is at most two steps old.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from policyd.model import Container, Markers, Node, Series, Snapshot
from policyd.sources import facts
from policyd.sources.cadvisor_info import CadvisorContainer
from policyd.sources.docker_labels import label_markers
from policyd.sources.facts import Key
from policyd.sources.matrix import Matrix
from policyd.sources.parse import STALE_STEPS, Parsed, evaluation_keys
from policyd.sources.progress import EMPTY as EMPTY_PROGRESS
from policyd.sources.progress import ProgressTable
from policyd.sources.promql import CycleQueries
from policyd.sources.settings import cadvisor_docker

SETTINGS = cadvisor_docker()
"""The cadvisor-docker identity (name / short id) and its reading of shares."""


@dataclass(frozen=True, kw_only=True)
class HostReading:
    """One cAdvisor's answer: its node, the node's cores and its Docker containers."""

    node: str
    cores: float
    containers: tuple[CadvisorContainer, ...]


def _chosen(hosts: Sequence[HostReading], warnings: list[str]
            ) -> dict[Key, tuple[CadvisorContainer, HostReading]]:
    """Each Docker name once: the later-started container when two hosts report it."""
    chosen: dict[Key, tuple[CadvisorContainer, HostReading]] = {}
    for host in hosts:
        for c in host.containers:
            key = (c.name,)
            other = chosen.get(key)
            if other is not None:
                warnings.append(f"container {c.name[:200]}: reported by {other[1].node} and "
                                f"{host.node} (a half-done migration?); using the later start")
                if (other[0].started_at or 0.0) >= (c.started_at or 0.0):
                    continue
            chosen[key] = (c, host)
    return chosen


def _resources(chosen: Mapping[Key, tuple[CadvisorContainer, HostReading]]
               ) -> dict[Key, facts.Resource]:
    """The containers as `parse` sees resources: the labels the identity rules read."""
    return {key: facts.Resource(node=host.node, labels={"name": c.name, "id": c.cgroup},
                                started_at=c.started_at, shares=c.shares, quota=c.quota,
                                period=c.period, cpu_rows=[0])
            for key, (c, host) in chosen.items()}


def _node_usage(hosts: Sequence[HostReading], cpu: Mapping[str, Series],
                fresh_after: float) -> dict[str, float]:
    usage: dict[str, float] = {}
    for host in hosts:
        total = 0.0
        for c in host.containers:
            series = cpu.get(c.container_id)
            if series is None or len(series) == 0:
                continue
            value, at = float(series.values[-1]), float(series.times_seconds[-1])
            if math.isfinite(value) and value >= 0 and at >= fresh_after:
                total += value
        usage[host.node] = total
    return usage


def _summarise(chosen: Mapping[Key, object], used: Mapping[Key, int], unseen: list[str],
               warnings: list[str]) -> None:
    others = sorted(k[0] for k in chosen if k not in used)
    if others:
        more = f" and {len(others) - 5} more" if len(others) > 5 else ""
        warnings.append(f"{len(others)} Docker containers have no evaluation series (not "
                        f"training jobs, or their exporter is not scraped): "
                        f"{', '.join(o[:200] for o in others[:5])}{more}")
    if unseen:
        more = f" and {len(unseen) - 5} more" if len(unseen) > 5 else ""
        warnings.append(f"{len(unseen)} evaluation series name no Docker container of any "
                        f"cAdvisor host; left out: {', '.join(unseen[:5])}{more}")


def assemble(*, evaluation: Matrix, hosts: Sequence[HostReading], cpu: Mapping[str, Series],
             queries: CycleQueries, extra_markers: Mapping[str, Markers] | None = None,
             intervals: Mapping[str, float] | None = None,
             warnings: Sequence[str] = (), progress: ProgressTable | None = None) -> Parsed:
    """The cycle's snapshot (see the module docstring); `cpu` is by Docker container id,
    `warnings` those met before (reading the payloads), `progress` the jobs' steps."""
    progress = progress or EMPTY_PROGRESS
    found = list(warnings)
    now, step = queries.now_seconds, queries.step_seconds
    fresh_after = now - STALE_STEPS * step
    chosen = _chosen(hosts, found)
    resources = _resources(chosen)
    keys = evaluation_keys(evaluation, resources, SETTINGS, found)
    used = {k: i for k, i in keys.items() if k in resources}
    unseen = sorted("/".join(k)[:200] for k in keys if k not in resources)
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(evaluation.values)
    bad_count = np.concatenate(([0], np.cumsum(bad)))
    containers: list[Container] = []
    for key, i in used.items():
        c, host = chosen[key]
        where = f"container {c.name[:200]}"
        lo, hi = evaluation.span(i)
        if bad_count[hi] > bad_count[lo]:
            found.append(f"{where}: evaluation has {bad_count[hi] - bad_count[lo]} NaN/Inf "
                         "samples (the engine takes no action on them)")
        if evaluation.times[hi - 1] < fresh_after:
            found.append(f"{where}: evaluation is stale (last sample "
                         f"{now - evaluation.times[hi - 1]:.0f} s before now)")
        usage = cpu.get(c.container_id, Series.empty())
        if len(usage) == 0:
            found.append(f"{where}: no CPU samples cover the window yet; CPU left empty")
        started = c.started_at
        if started is None:
            started = float(evaluation.times[lo])
            found.append(f"{where}: no start time; using its first evaluation sample")
        metric = evaluation.labels[i]
        labels = {k: v for k, v in metric.items() if k != "__name__"}
        labels.update(c.labels)
        done = progress.of_series(metric)
        containers.append(Container(
            id=c.name, name=c.name, node=host.node, started_at=started,
            evaluation=Series.of(evaluation.times[lo:hi], evaluation.values[lo:hi]),
            cpu_usage=usage,
            cpu_allocation=facts.allocation(resources[key], queries.allocation_mode,
                                            host.cores, SETTINGS),
            labels=labels,
            markers=label_markers(c.labels, (extra_markers or {}).get(c.container_id), found,
                                  where),
            steps=done.steps, total_steps=done.total_steps))
    _summarise(chosen, used, unseen, found)
    usage_by_node = _node_usage(hosts, cpu, fresh_after)
    nodes = tuple(Node(name=h.node, cpu_capacity=h.cores, cpu_usage=usage_by_node[h.node])
                  for h in sorted(hosts, key=lambda h: h.node))
    snapshot = Snapshot(time=now, nodes=nodes, containers=tuple(containers),
                        intervals=dict(intervals or {}))
    return Parsed(snapshot=snapshot, warnings=tuple(found))
