"""The Kubernetes pod source's join: Prometheus's answers and the API's pod and node lists ->
the cycle's snapshot. Pure: no I/O, no clock.

The API's lists stand in for Prometheus's fact queries (kube-state-metrics is not needed):
`facts_vector` turns the pods' facts into the facts' instant vectors that `parse.parse_cycle`
already reads (fact -> samples), so matching, warnings and markers are the Prometheus source's
own code, with the `kubernetes` profile (`api_settings`). `merge` keeps only the evaluation
series of listed pods, and adds each pod's labels and annotations to its container's (the
series' labels win on a clash).

Must not: call the Kubernetes API or Prometheus (`kubernetes_pod_facts`, the source), or decide
what a failure means.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

from policyd.model import Snapshot
from policyd.model import labels as keys
from policyd.sources import promql
from policyd.sources.kubernetes_pod_facts import PodFacts
from policyd.sources.parse import Parsed, parse_cycle
from policyd.sources.progress import ProgressTable
from policyd.sources.settings import SourceSettings, kubernetes


def facts_vector(found: Iterable[PodFacts], allocatable: Mapping[str, float], now: float
                 ) -> dict[str, list[dict[str, Any]]]:
    """The facts' instant vectors `parse_cycle` reads (fact -> samples), built from the API
    (pure): capacity per node, start time, CPU request as shares (x1024, read back as cores by
    the `kubernetes` profile), limit in cores, and the markers as `annotation_policyd_io_*`
    labels."""
    out: dict[str, list[dict[str, Any]]] = {}

    def sample(fact: str, labels: Mapping[str, str], value: float) -> None:
        out.setdefault(fact, []).append({"metric": dict(labels), "value": [now, repr(value)]})

    for n, c in sorted(allocatable.items()):
        sample(promql.FACT_CAPACITY, {"node": n}, c)
    for f in found:
        ident = {"namespace": f.namespace, "pod": f.pod, "container": f.container,
                 "node": f.node}
        if f.started_at is not None:
            sample(promql.FACT_STARTED, ident, f.started_at)
        if f.cpu_request is not None:
            sample(promql.FACT_SHARES, ident, f.cpu_request * 1024)
        if f.cpu_limit is not None:
            sample(promql.FACT_LIMIT, ident, f.cpu_limit)
        marks = {keys.prometheus_label(k, "annotation_"): v
                 for k, v in f.annotations.items() if k in keys.MARKERS}
        sample(promql.FACT_ANNOTATIONS, {"namespace": f.namespace, "pod": f.pod, **marks}, 1.0)
    return out


def api_settings(evaluation_node_label: str | None = None) -> SourceSettings:
    """The `kubernetes` profile; its facts (and the `kube_pod_annotations`-shaped markers)
    are built from the API by `facts_vector` rather than queried."""
    return kubernetes(evaluation_node_label=evaluation_node_label)


def merge(*, evaluation: Any, cpu: Any, found: Sequence[PodFacts],
          allocatable: Mapping[str, float], queries: promql.CycleQueries,
          settings: SourceSettings, intervals: Mapping[str, float] | None = None,
          progress: ProgressTable | None = None) -> Parsed:
    """Prometheus's two range results + the pod list -> the cycle's snapshot (pure).
    Only evaluation series of listed pods are kept; pod labels and annotations are added to
    each container's (the series' labels win on a clash)."""
    by_key = {(f.namespace, f.pod, f.container): f for f in found}
    kept = [e for e in evaluation or [] if tuple(
        (e.get("metric") or {}).get(n, "") for n in settings.evaluation_identity_labels)
        in by_key]
    parsed = parse_cycle(evaluation=kept, cpu=cpu, facts_results=facts_vector(
        found, allocatable, queries.now_seconds), queries=queries, settings=settings,
        intervals=intervals, progress=progress)
    containers = []
    for c in parsed.snapshot.containers:
        f = by_key[cast(tuple[str, str, str], tuple(c.id.split("/", 2)))]
        containers.append(replace(c, name=f.pod, labels={**f.labels, **c.labels},
                                  annotations=f.annotations))
    snap = parsed.snapshot
    return Parsed(snapshot=Snapshot(time=snap.time, nodes=snap.nodes,
                                    containers=tuple(containers), intervals=snap.intervals),
                  warnings=parsed.warnings)
