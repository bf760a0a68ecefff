"""The label and annotation keys policyd writes on workloads and reads back, spelled once.

Docker containers carry them as labels (set when policyd creates a replacement container);
Kubernetes pods and Jobs as annotations and labels. The actuators write them, the sources read
them back into `Markers`, and the engine's default opt-out key is `OPT_OUT`. Values are
strings: "true" for flags, epoch seconds for times, a node name for `MIGRATED_FROM` and
`MIGRATING_TO`, a move record's name for `MOVE` on a pod.

Prometheus exporters rename them (`prometheus_label`): cAdvisor exposes a Docker label as
`container_label_policyd_io_migrated`, kube-state-metrics a pod annotation as
`annotation_policyd_io_migrated`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

PREFIX = "policyd.io/"

MIGRATED = PREFIX + "migrated"
"""The workload was moved by SpeCon (or marked as if it had been: Algorithm 5)."""
REBALANCED = PREFIX + "rebalanced"
"""The workload was moved by SpeCon's rebalancing step."""
CONVERGED_AT = PREFIX + "converged_at"
"""When the workload was first seen converging (epoch seconds)."""
LAST_ACTION_AT = PREFIX + "last_action_at"
"""When policyd last acted on the workload (epoch seconds)."""
MARKERS = (MIGRATED, REBALANCED, CONVERGED_AT, LAST_ACTION_AT)
"""The keys read back into `policyd.model.Markers`, in its field order."""

MIGRATED_FROM = PREFIX + "migrated-from"
"""On a replacement: the node its predecessor ran on (recovery tells old from new by it)."""
MOVE_ID = PREFIX + "move-id"
"""On a replacement: the id of the move that created it (the intent record holds the same id), so
a create retried after a lost answer adopts the container it already made."""
MIGRATING = PREFIX + "migrating"
"""Label of a Kubernetes Job while policyd moves its pod (suspended, re-pinned, resumed)."""
MIGRATING_TO = PREFIX + "migrating-to"
"""Annotation of that Job: the node it is being moved to (what recovery finishes)."""

MOVE = PREFIX + "move"
"""Label (`true`) of policyd's move records (ConfigMaps in its own namespace), and annotation of
a pod policyd created in a move (the record's name): recovery tells its own pods by it."""

MANAGED = PREFIX + "managed"
"""The default managed label (`policyd.io/managed=true`): only workloads carrying it are
touched, on Docker (`docker.managed_label`) and Kubernetes (`kubernetes.label_selector`)."""
MANAGED_SELECTOR = MANAGED + "=true"

OPT_OUT = PREFIX + "opt-out"
"""A workload labelled or annotated `policyd.io/opt-out: "true"` is never acted on: the
policies' default `selector.opt_out_key`, enforced by the engine and checked again by the
actuators on the pod (Kubernetes) or the container's labels (Docker) as read just before
acting."""

TARGET_LOSS = PREFIX + "target-loss"
"""Label or annotation a job sets to declare the loss it is trained to reach (a number): the
forecast says when it gets there."""

DEADLINE = PREFIX + "deadline"
"""When the job must finish: an RFC 3339 time (`2026-11-24T18:00:00Z`) or a duration counted
from the job's submission (`45m`, `2h`, `1h30m`, `90s`; see `SUBMITTED_AT`)."""
MIN_CPU = PREFIX + "min-cpu"
"""The fewest cores the job may be given (a number of cores: `0.5`, `2`)."""
MAX_CPU = PREFIX + "max-cpu"
"""The most cores the job can use (a number of cores)."""
SUBMITTED_AT = PREFIX + "submitted-at"
"""When the job was submitted (epoch seconds): a relative deadline counts from it. policyd
writes it on a workload it admits or recreates, so that it survives a move; without it the
workload's own creation time counts."""
ADMITTED_FROM = PREFIX + "admitted-from"
"""On a held job's copy that an admission started on another node: the node it was held on
(start-up recovery removes a held original whose copy runs: `actuators.docker.admission`)."""
QOE_TARGET = PREFIX + "qoe-target"
"""Label or annotation a job sets to declare its quality-of-experience target: a metric, a
comparison and a number, `steps_per_second>=40` or `p95_latency_ms<=80` (`policyd.engine.qoe`
reads it; the metric names a QoE policy knows are `steps_per_second` and its `spec.metrics`)."""

SPEED = PREFIX + "speed"
"""Label of a node (Kubernetes) or engine (Docker): how fast one of its cores trains relative to
an average core (a positive number, `1.0` average, `1.5` half again as fast); `Node.speed`."""
WORKLOAD = PREFIX + "workload"
"""Label or annotation a job sets to name its workload (the same code and batch, e.g. a sweep's
trials share one): jobs of one workload cost the same per step, so their step times on two nodes
tell the nodes' speeds apart when a node's speed is not stated (`policyd.engine.node_speed`)."""

DELIVERED = PREFIX + "delivered"
"""When policyd stopped the job because it reached its target loss or converged (epoch
seconds): a delivered job is never restarted or migrated."""
DELIVERED_REASON = PREFIX + "delivered-reason"
"""Why it was stopped (the engine's reason, cut to fit an annotation)."""
CHECKPOINT = PREFIX + "checkpoint"
"""Where a delivered job's final checkpoint is (the path the job reported)."""
STOP_REQUESTED = PREFIX + "stop"
"""Annotation policyd sets on a Kubernetes pod just before it stops it for good (value: the
event, `target` or `converged`): a trainer that reads its pod's annotations (a downward-API
volume) exits 0 after its checkpoint then, so that its Job ends as succeeded."""

DECLARED = (OPT_OUT, TARGET_LOSS, DEADLINE, MIN_CPU, MAX_CPU, SUBMITTED_AT, QOE_TARGET, WORKLOAD)
"""The keys a job declares on its workload (label or annotation) for the engine to read."""

_NOT_LABEL_CHARS = re.compile(r"[^a-zA-Z0-9_]")


def set_true(key: str, *found: Mapping[str, object] | None) -> bool:
    """Whether any of `found` (a workload's labels, its annotations) sets `key` to "true", in
    any case: how the engine's selector and the actuators read `OPT_OUT`."""
    # SIM110 waived: a loop, not any(...), makes no generator per call (10,000 a decide)
    for where in found:  # noqa: SIM110
        if where and str(where.get(key, "")).lower() == "true":
            return True
    return False


def prometheus_label(key: str, prefix: str) -> str:
    """`key` as an exporter exposes it: `prefix` + the key with every character a Prometheus
    label name cannot hold (`.`, `/`, `-`) turned into `_`."""
    return prefix + _NOT_LABEL_CHARS.sub("_", key)
