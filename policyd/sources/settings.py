"""Where a source finds things in Prometheus: label names, metric names, capacities, markers.

`SourceSettings` is a frozen value passed down to the query builder (`promql`) and the parser
(`parse`); nothing here reads the environment or the network. Three profiles cover the setups
policyd knows:

* `kubernetes()`: cAdvisor as the kubelet serves it (`/metrics/cadvisor`). A container is
  (namespace, pod, container); its node comes from a `node` label that the scrape configuration
  adds by relabelling (`__meta_kubernetes_node_name` -> `node`). Markers come from
  kube-state-metrics' `kube_pod_annotations` (annotation keys allow-listed with
  `--metric-annotations-allowlist=pods=[policyd.io/migrated,...]`), joined on (namespace, pod).
* `cadvisor_docker()`: a standalone cAdvisor per Docker host. A container is its `name`; the
  exporter's `container` label (the container's name or short id) points at it; the node is
  the cAdvisor target's `instance`, mapped through `node_names` (port stripped otherwise).
  Markers and labels are Docker labels, which cAdvisor exposes as `container_label_*` (dots and
  slashes become underscores: `policyd.io/migrated` -> `container_label_policyd_io_migrated`).
* `process()`: no cAdvisor at all; a job's CPU is `process_cpu_seconds_total` of the process
  that exports its loss (the exporter lives in the training process). A job is (job, instance)
  of its scrape target; capacity is static. Used by the integration tests.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from policyd.model import labels

LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
MatchOp = Literal["=", "!=", "=~", "!~"]


def _check_label(name: str, what: str) -> None:
    if not LABEL_NAME.match(name):
        raise ValueError(
            f"{what}: {name!r} is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)")


def _check_metric(name: str | None, what: str) -> None:
    if name is not None and not METRIC_NAME.match(name):
        raise ValueError(f"{what}: {name!r} is not a Prometheus metric name")


@dataclass(frozen=True)
class Matcher:
    """One label matcher, e.g. `Matcher("container", "!=", "")`; the value is escaped on use."""

    label: str
    op: MatchOp
    value: str

    def __post_init__(self) -> None:
        _check_label(self.label, "matcher label")
        if self.op not in ("=", "!=", "=~", "!~"):
            raise ValueError(f"matcher op {self.op!r} must be one of =, !=, =~, !~")


@dataclass(frozen=True, kw_only=True)
class MarkerLabels:
    """Label names holding `Markers` fields (None: that marker is never read, stays default)."""

    migrated: str | None = None
    rebalanced: str | None = None
    converged_at: str | None = None
    last_action_at: str | None = None

    def names(self) -> tuple[str, ...]:
        return tuple(n for n in (self.migrated, self.rebalanced, self.converged_at,
                                 self.last_action_at) if n is not None)


def _frozen_map(value: Mapping[str, object]) -> MappingProxyType[str, object]:
    return MappingProxyType(dict(value))


@dataclass(frozen=True, kw_only=True)
class SourceSettings:
    """How to find containers, their CPU, their node and their facts in Prometheus.

    Identity: `identity_labels` name a container on the resource series (CPU, start time, CPU
    spec); `evaluation_identity_labels` name the same thing, position by position, on the
    evaluation series (the exporter's labels). `short_id_label`, when set, is a resource label
    holding a cgroup path ending in the full container id (`/docker/<64 hex>`): an evaluation
    series whose identity is a 12-character short id is matched through it.
    """

    profile: str
    identity_labels: tuple[str, ...]
    evaluation_identity_labels: tuple[str, ...]
    short_id_label: str | None = None
    name_label: str = "job_name"
    namespace_label: str | None = None
    cpu_counter: str = "container_cpu_usage_seconds_total"
    container_matchers: tuple[Matcher, ...] = ()
    cpu_matchers: tuple[Matcher, ...] = ()
    start_time_metric: str | None = "container_start_time_seconds"
    shares_metric: str | None = "container_spec_cpu_shares"
    quota_metric: str | None = "container_spec_cpu_quota"
    period_metric: str | None = "container_spec_cpu_period"
    shares_meaning: Literal["fraction", "cores"] = "fraction"
    capacity_metric: str | None = "machine_cpu_cores"
    capacity_matchers: tuple[Matcher, ...] = ()
    static_capacity_cores: Mapping[str, float] = field(default_factory=dict)
    default_capacity_cores: float | None = None
    node_label: str = "node"
    node_names: Mapping[str, str] = field(default_factory=dict)
    node_strip_port: bool = False
    marker_labels: MarkerLabels = field(default_factory=MarkerLabels)
    annotations_metric: str | None = None
    annotation_identity_labels: tuple[str, ...] = ()
    label_prefix: str | None = None
    scrape_interval_seconds: float = 15.0
    series_id_label: str | None = None
    """A resource label telling two cgroups of one container apart (the kubelet's `id`): kept
    on the per-container series when the others are dropped (`kept_labels`), so a restarted
    container's old and new series stay two."""
    evaluation_node_label: str | None = None
    """The node label on the exporter's series (loss, steps), when the scrape adds one
    (deploy/kubernetes/podmonitor-training.yaml relabels the pod's node to `node`): a node
    agent then asks only for its node's loss. None: it asks for every job's loss and keeps its
    node's."""

    def __post_init__(self) -> None:
        if not self.identity_labels:
            raise ValueError("identity_labels must name at least one label")
        if len(self.identity_labels) != len(self.evaluation_identity_labels):
            raise ValueError(
                f"evaluation_identity_labels {self.evaluation_identity_labels} must pair one to "
                f"one with identity_labels {self.identity_labels}")
        for what, names in (("identity_labels", self.identity_labels),
                            ("evaluation_identity_labels", self.evaluation_identity_labels),
                            ("annotation_identity_labels", self.annotation_identity_labels),
                            ("marker_labels", self.marker_labels.names())):
            for name in names:
                _check_label(name, what)
        for what, one in (("short_id_label", self.short_id_label), ("name_label", self.name_label),
                          ("namespace_label", self.namespace_label),
                          ("node_label", self.node_label),
                          ("series_id_label", self.series_id_label),
                          ("evaluation_node_label", self.evaluation_node_label)):
            if one is not None:
                _check_label(one, what)
        for what, metric in (("cpu_counter", self.cpu_counter),
                             ("start_time_metric", self.start_time_metric),
                             ("shares_metric", self.shares_metric),
                             ("quota_metric", self.quota_metric),
                             ("period_metric", self.period_metric),
                             ("capacity_metric", self.capacity_metric),
                             ("annotations_metric", self.annotations_metric)):
            _check_metric(metric, what)
        if self.annotations_metric and not set(self.annotation_identity_labels) <= set(
                self.identity_labels):
            raise ValueError("annotation_identity_labels must be a subset of identity_labels")
        if (self.quota_metric is None) != (self.period_metric is None):
            raise ValueError("quota_metric and period_metric go together (quota / period = cores)")
        caps = dict(self.static_capacity_cores)
        if self.default_capacity_cores is not None:
            caps["(default)"] = self.default_capacity_cores
        for node, cores in caps.items():
            if not cores > 0:
                raise ValueError(f"capacity of node {node!r} must be a positive number of cores")
        if not self.scrape_interval_seconds > 0:
            raise ValueError("scrape_interval_seconds must be positive")
        object.__setattr__(self, "static_capacity_cores", _frozen_map(self.static_capacity_cores))
        object.__setattr__(self, "node_names", _frozen_map(self.node_names))

    def node_matcher(self, node: str) -> Matcher:
        """A matcher selecting the resource series of `node` (the inverse of `facts.node_of`):
        the node label equal to it or, when scrape targets are mapped to nodes (`node_names`,
        ports stripped), a regex of every target that names it."""
        if not self.node_names and not self.node_strip_port:
            return Matcher(self.node_label, "=", node)
        literal = regex_literal(node)
        options = [regex_literal(raw) for raw, mapped in sorted(self.node_names.items())
                   if mapped == node]
        options.append(literal)
        if self.node_strip_port:
            options += [f"{literal}:[0-9]+", f"\\[{literal}\\]:[0-9]+"]
        return Matcher(self.node_label, "=~", "|".join(dict.fromkeys(options)))

    @property
    def kept_labels(self) -> tuple[str, ...] | None:
        """The labels of a resource series policyd reads (identity, node, short id, and the
        markers when they are resource labels), or None when it reads them all (a profile with
        `label_prefix`: a job's labels are resource labels whose names no query can list)."""
        if self.label_prefix is not None:
            return None
        names = [*self.identity_labels, self.node_label]
        if self.short_id_label is not None:
            names.append(self.short_id_label)
        if self.annotations_metric is None:
            names.extend(self.marker_labels.names())
        return tuple(dict.fromkeys(names))


_RE2_SPECIAL = frozenset("\\.+*?()|[]{}^$")


def regex_literal(value: str) -> str:
    """An RE2 pattern matching exactly `value` (its metacharacters backslash-escaped)."""
    return "".join("\\" + ch if ch in _RE2_SPECIAL else ch for ch in value)


def _exposed_markers(prefix: str) -> MarkerLabels:
    """The marker keys (`policyd.model.labels.MARKERS`) as an exporter exposes them."""
    return MarkerLabels(**{field: labels.prometheus_label(key, prefix) for field, key in (
        ("migrated", labels.MIGRATED), ("rebalanced", labels.REBALANCED),
        ("converged_at", labels.CONVERGED_AT), ("last_action_at", labels.LAST_ACTION_AT))})


DOCKER_MARKERS = _exposed_markers("container_label_")
"""Docker labels `policyd.io/migrated` etc. as cAdvisor exposes them
(`container_label_policyd_io_migrated`)."""

KUBERNETES_MARKERS = _exposed_markers("annotation_")
"""Pod annotations `policyd.io/migrated` etc. as kube-state-metrics exposes them
(`annotation_policyd_io_migrated`)."""


def kubernetes(*, scrape_interval_seconds: float = 15.0,
               static_capacity_cores: Mapping[str, float] | None = None,
               evaluation_node_label: str | None = None) -> SourceSettings:
    """kubelet `/metrics/cadvisor` + kube-state-metrics annotations (see the module docstring).

    Kubernetes writes a container's CPU request as cgroup shares (1024 per core), so the
    current allocation is shares / 1024 / node capacity (`shares_meaning="cores"`).
    """
    return SourceSettings(
        profile="kubernetes",
        identity_labels=("namespace", "pod", "container"),
        evaluation_identity_labels=("namespace", "pod", "container"),
        namespace_label="namespace",
        container_matchers=(Matcher("container", "!=", ""), Matcher("container", "!=", "POD")),
        cpu_matchers=(Matcher("cpu", "=", "total"),),
        shares_meaning="cores",
        node_label="node",
        static_capacity_cores=static_capacity_cores or {},
        marker_labels=KUBERNETES_MARKERS,
        annotations_metric="kube_pod_annotations",
        annotation_identity_labels=("namespace", "pod"),
        scrape_interval_seconds=scrape_interval_seconds,
        series_id_label="id",
        evaluation_node_label=evaluation_node_label,
    )


def cadvisor_docker(*, node_names: Mapping[str, str] | None = None,
                    scrape_interval_seconds: float = 15.0,
                    static_capacity_cores: Mapping[str, float] | None = None) -> SourceSettings:
    """Standalone cAdvisor on each Docker host (see the module docstring).

    `node_names` maps a cAdvisor target's `instance` ("10.0.0.5:8080") to the node name the
    Docker actuator knows; an instance not in it is named by its host part. policyd's Docker
    actuator writes a fraction f of the node as f * 1024 shares (`shares_meaning="fraction"`).
    """
    return SourceSettings(
        profile="cadvisor_docker",
        identity_labels=("name",),
        evaluation_identity_labels=("container",),
        short_id_label="id",
        container_matchers=(Matcher("name", "!=", ""),),
        cpu_matchers=(Matcher("cpu", "=", "total"),),
        shares_meaning="fraction",
        node_label="instance",
        node_names=node_names or {},
        node_strip_port=True,
        static_capacity_cores=static_capacity_cores or {},
        marker_labels=DOCKER_MARKERS,
        label_prefix="container_label_",
        scrape_interval_seconds=scrape_interval_seconds,
    )


def process(*, capacity_cores: float, job: str | None = None,
            node_names: Mapping[str, str] | None = None,
            scrape_interval_seconds: float = 15.0) -> SourceSettings:
    """Jobs measured by their own exporter process: `process_cpu_seconds_total` (see above).

    `capacity_cores` is every node's capacity (the caller decides, e.g. `os.cpu_count()`);
    `job` restricts the CPU and start-time series to one scrape job.
    """
    scope = (Matcher("job", "=", job),) if job is not None else ()
    return SourceSettings(
        profile="process",
        identity_labels=("job", "instance"),
        evaluation_identity_labels=("job", "instance"),
        cpu_counter="process_cpu_seconds_total",
        container_matchers=scope,
        start_time_metric="process_start_time_seconds",
        shares_metric=None,
        quota_metric=None,
        period_metric=None,
        capacity_metric=None,
        default_capacity_cores=capacity_cores,
        node_label="instance",
        node_names=node_names or {},
        node_strip_port=True,
        scrape_interval_seconds=scrape_interval_seconds,
    )
