"""Three Prometheus responses -> one `Snapshot`, fast, and never a wrong action from bad data.

Theory of operation. The containers of a snapshot are the evaluation series (a container
without one is not a training job policyd can judge). Each evaluation series is matched to the
resource series (CPU, facts) of the same container through the settings' identity labels;
resources give the node, start time, current allocation, markers and labels.

What happens to bad data (warnings are collected in `Parsed.warnings`, never raised):

* evaluation series with NaN/Inf samples, or stale (last sample more than two steps before
  now): passed through to the engine, which gives "no action" for a container whose readings
  are NaN or older than two intervals; a warning names the container.
* evaluation series with no samples, without the identity labels (unmappable), or several
  series for one container (duplicated): left out (the engine cannot tell which is right).
* a container with no CPU series, or with several (a restarted container's old and new cgroup):
  kept with an empty `cpu_usage` (the engine gives it no CPU-based action); warned.
* a container whose node is unknown, or whose node has no capacity: left out (a capacity is
  needed to read allocations and usage); warned.
* no start time: the first evaluation sample's time (later than the real start, so age-based
  guards err on the side of doing nothing); warned.
* resource series of no evaluation series (other containers): counted in node usage only, and
  summarised in one warning.

Node usage is the sum, over the node's CPU series, of each one's last rate when that is finite
and at most two steps old. Nodes are every node with a container or a capacity (sample or
setting). Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from policyd.engine.series import MOST_CORES
from policyd.model import Container, Node, Series, Snapshot
from policyd.sources import facts
from policyd.sources.facts import Key, Resource
from policyd.sources.matrix import Matrix, read_matrix, read_vector
from policyd.sources.progress import EMPTY as EMPTY_PROGRESS
from policyd.sources.progress import ProgressTable
from policyd.sources.promql import CycleQueries
from policyd.sources.settings import SourceSettings

STALE_STEPS = 2
"""An evaluation series whose last sample is older than this many steps is stale."""


@dataclass(frozen=True, kw_only=True, eq=False)
class Parsed:
    """The snapshot of one cycle and every data problem met while building it."""

    snapshot: Snapshot
    warnings: tuple[str, ...]


def _label_text(metric: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{k}={v!r}" for k, v in sorted(metric.items())) + "}"


def _resources(cpu: Matrix, facts_results: Mapping[str, Any], settings: SourceSettings,
               warnings: list[str]) -> facts.Tables:
    tables = facts.Tables()
    for fact, result in facts_results.items():
        facts.apply_fact(tables, fact, read_vector(result), settings=settings, warnings=warnings)
    resources = tables.resources
    for i, metric in enumerate(cpu.labels):
        key = facts.key_of(metric, settings.identity_labels)
        if key is None:
            continue
        res = resources.get(key)
        if res is None:
            res = resources[key] = Resource()
        facts.note_series(res, metric, settings)
        res.cpu_rows.append(i)
    return tables


def _node_usage(cpu: Matrix, settings: SourceSettings, fresh_after: float,
                warnings: list[str]) -> dict[str, float]:
    """Per node the sum of its fresh CPU series' last figures. A figure that is not a number
    of cores (NaN, negative, or beyond `MOST_CORES`: a broken reading, which summed with
    another could even overflow a float) is left out, the last with a warning."""
    usage: dict[str, float] = {}
    bounds = cpu.offsets.tolist()  # Python numbers in one go, not numpy scalars one by one
    ends = np.maximum(cpu.offsets[1:] - 1, 0)
    values, times = ((cpu.values[ends].tolist(), cpu.times[ends].tolist()) if cpu.values.size
                     else ([], []))
    for i, metric in enumerate(cpu.labels):
        if bounds[i + 1] == bounds[i]:
            continue
        value, time = values[i], times[i]
        node = facts.node_of(metric, settings)
        if node is None or not (math.isfinite(value) and value >= 0) or time < fresh_after:
            continue
        if value > MOST_CORES:
            warnings.append(f"node {node}: a CPU figure of {value:g} cores is not a reading; "
                            "left out of its usage")
            continue
        usage[node] = usage.get(node, 0.0) + value
    return usage


def _short_ids(resources: Mapping[Key, Resource], settings: SourceSettings) -> dict[str, Key]:
    out: dict[str, Key] = {}
    if settings.short_id_label is None:
        return out
    for key, res in resources.items():
        sid = facts.short_id(res.labels, settings)
        if sid is not None:
            out[sid] = key
    return out


def evaluation_keys(evaluation: Matrix, resources: Mapping[Key, Resource],
                     settings: SourceSettings, warnings: list[str]) -> dict[Key, int]:
    """The evaluation series index of each container; unmappable and duplicated ones dropped.

    A series names its container by `settings.evaluation_identity_labels`, or (when the
    settings have a `short_id_label`) by the 12-character short id of a resource's cgroup path.
    The cadvisor-rest source joins its containers through this function too.
    """
    short = _short_ids(resources, settings)
    bounds = evaluation.offsets.tolist()
    keys: list[Key | None] = []
    for i, metric in enumerate(evaluation.labels):
        key = facts.key_of(metric, settings.evaluation_identity_labels)
        if key is not None and key not in resources and len(key) == 1 and key[0][:12] in short:
            key = short[key[0][:12]]
        if key is None:
            warnings.append(
                f"evaluation series {_label_text(metric)} lacks the identity labels "
                f"{', '.join(settings.evaluation_identity_labels)}; left out")
        elif evaluation.broken[i] is not None:
            warnings.append(f"container {'/'.join(key)}: evaluation series "
                            f"{evaluation.broken[i]}; left out")
            key = None
        elif bounds[i + 1] == bounds[i]:
            warnings.append(f"container {'/'.join(key)}: evaluation series has no samples; "
                            "left out")
            key = None
        keys.append(key)
    counts = Counter(k for k in keys if k is not None)
    for key, n in counts.items():
        if n > 1:
            warnings.append(f"container {'/'.join(key)}: {n} evaluation series map to it "
                            "(duplicated); left out")
    return {k: i for i, k in enumerate(keys) if k is not None and counts[k] == 1}


def _all_series(matrix: Matrix) -> list[Series]:
    """Every row of `matrix` as a Series (built at once: 10,000 rows are common)."""
    return Series.many(matrix.times, matrix.values, matrix.offsets)


def parse_cycle(*, evaluation: Any, cpu: Any, facts_results: Mapping[str, Any],
                queries: CycleQueries,
                settings: SourceSettings, intervals: Mapping[str, float] | None = None,
                progress: ProgressTable | None = None) -> Parsed:
    """Build the cycle's snapshot from the `data.result` lists (see the module doc: the
    evaluation and CPU ranges, and fact -> its instant result) and the jobs' progress
    (`policyd.sources.progress`, when asked for)."""
    progress = progress or EMPTY_PROGRESS
    warnings: list[str] = []
    now, step = queries.now_seconds, queries.step_seconds
    fresh_after = now - STALE_STEPS * step
    eval_m, cpu_m = read_matrix(evaluation), read_matrix(cpu)
    tables = _resources(cpu_m, facts_results, settings, warnings)
    resources, annotations = tables.resources, tables.annotations
    chosen = evaluation_keys(eval_m, resources, settings, warnings)
    capacity = {**settings.static_capacity_cores, **tables.capacity}
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(eval_m.values)
    bad_count = np.concatenate(([0], np.cumsum(bad)))
    # The chosen series' figures read as Python numbers in one go each, not one numpy scalar
    # at a time in the loop below (every chosen series has a sample: `evaluation_keys`).
    rows_of = np.fromiter(chosen.values(), dtype=np.int64, count=len(chosen))
    starts, ends = eval_m.offsets[rows_of], eval_m.offsets[rows_of + 1]
    bad_counts = (bad_count[ends] - bad_count[starts]).tolist()
    first_times = eval_m.times[starts].tolist()
    last_times = eval_m.times[ends - 1].tolist()
    eval_series, cpu_series = _all_series(eval_m), _all_series(cpu_m)
    containers: list[Container] = []
    for n, (key, i) in enumerate(chosen.items()):
        cid = "/".join(key)
        metric, res = eval_m.labels[i], resources.get(key)
        node = (res.node if res is not None else None) or facts.node_of(metric, settings)
        if node is None:
            warnings.append(f"container {cid}: no {settings.node_label!r} label on its series; "
                            "left out")
            continue
        cores = capacity.get(node, settings.default_capacity_cores)
        if cores is None:
            warnings.append(f"container {cid}: node {node} has no known CPU capacity; left out")
            continue
        if bad_counts[n]:
            warnings.append(f"container {cid}: evaluation has {bad_counts[n]} "
                            "NaN/Inf samples (the engine takes no action on them)")
        if last_times[n] < fresh_after:
            warnings.append(f"container {cid}: evaluation is stale (last sample "
                            f"{now - last_times[n]:.0f} s before now)")
        rows = res.cpu_rows if res is not None else []
        if len(rows) != 1 and "cpu" in queries.inputs:
            warnings.append(f"container {cid}: " + (
                "no CPU series" if not rows else f"{len(rows)} CPU series (duplicated); "
                "CPU left empty"))
        started = res.started_at if res is not None else None
        if started is None or not math.isfinite(started):
            started = first_times[n]
            warnings.append(f"container {cid}: no start time; using its first evaluation "
                            "sample")
        res_labels: Mapping[str, str] = res.labels if res is not None else {}
        pod = (facts.key_of(res_labels or metric, settings.annotation_identity_labels)
               if settings.annotations_metric else None)
        marker_labels = {**res_labels, **(annotations.get(pod, {}) if pod else {})}
        labels = dict(metric)
        labels.pop("__name__", None)
        labels.update(facts.prefixed_labels(res_labels, settings.label_prefix,
                                                queries.label_keys))
        done = progress.of_series(metric)
        containers.append(Container(
            id=cid,
            name=metric.get(settings.name_label) or cid,
            node=node,
            namespace=(metric.get(settings.namespace_label, "")
                       if settings.namespace_label else ""),
            started_at=started,
            evaluation=eval_series[i],
            cpu_usage=cpu_series[rows[0]] if len(rows) == 1 else Series.empty(),
            cpu_allocation=facts.allocation(res, queries.allocation_mode, cores, settings),
            labels=labels,
            markers=facts.markers(marker_labels, settings, f"container {cid}", warnings),
            steps=done.steps, total_steps=done.total_steps,
        ))
    _summarise_others(resources, chosen, warnings)
    usage = _node_usage(cpu_m, settings, fresh_after, warnings)
    nodes: list[Node] = []
    for name in sorted(set(capacity) | {c.node for c in containers}):
        cores = capacity.get(name, settings.default_capacity_cores)
        assert cores is not None  # a container's node without a capacity was left out above
        nodes.append(Node(name=name, cpu_capacity=cores, cpu_usage=usage.get(name, 0.0)))
    snapshot = Snapshot(time=now, nodes=tuple(nodes), containers=tuple(containers),
                        intervals=dict(intervals or {}))
    return Parsed(snapshot=snapshot, warnings=tuple(warnings))


def _summarise_others(resources: Mapping[Key, Resource], chosen: Mapping[Key, int],
                      warnings: list[str]) -> None:
    others = [k for k, r in resources.items() if k not in chosen and r.cpu_rows]
    if others:
        shown = ", ".join("/".join(k) for k in sorted(others)[:5])
        more = f" and {len(others) - 5} more" if len(others) > 5 else ""
        warnings.append(f"{len(others)} containers have CPU series but no evaluation series "
                        f"(not training jobs, or their exporter is not scraped): {shown}{more}")
