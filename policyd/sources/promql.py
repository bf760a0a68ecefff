"""The PromQL of one cycle: a few queries, whatever the number of containers.

Theory of operation. The engine reads each job's evaluation function E at the boundaries
t_m = now - (M - m) * interval and the cores it used in each (t_{m-1}, t_m] (docs/design.md,
"Sampling at interval boundaries"). One
cycle asks Prometheus a small, fixed number of questions, whatever the number of containers:

1. `evaluation`: the policy's evaluation query as a RANGE from now - M * interval to now with
   step = interval. At each step Prometheus returns the last sample at or before it (its
   lookback), which is the thesis's reading: "when queried in the middle of an iteration, the
   previous value will be returned".
2. `cpu`: `rate(<counter>{...}[w])` as a range over the same steps: cores used, averaged over
   the w seconds before each step. w is the interval, widened to two scrape intervals when the
   interval is shorter (rate needs two samples in its window).
3. the facts, one small instant query each (`facts`, named by `FACTS`): node `capacity`,
   `started_at`, the current allocation of the knob the policies set (`shares` under
   `mode: shares`, `limit_cores` = quota / period under `mode: quota`: never both), and, on
   Kubernetes, the pod `annotations` holding the markers (for a node agent, the pods with a
   container on its node: the annotations carry no node label). At most four: at most eight
   queries a cycle with the progress queries below.

Each fact query keeps only the labels policyd reads (`SourceSettings.kept_labels`: identity,
node, and the cgroup `id` that tells a restarted container's two series apart), with `max by
(...)`: the kubelet's series carry a dozen long labels (image, container name, endpoint,
service...) that were most of the facts' bytes. The CPU range query is not reduced: the `id` it
must keep is its longest label, so dropping the rest saved a fifth of its bytes, and
aggregating 10,000 series at every step cost Prometheus more time than that saved (1.04 s
against 0.68 s at 10,000 containers, benchmarks/README.md). A profile whose job labels are
resource labels with a prefix (Docker's `container_label_*`) keeps every label, since no query
can list them. Separate
queries replace the one query this module used to build (operands tagged with `label_replace`
and joined with `or`), whose evaluation cost grew with every operand: at 10,000 containers it
was 83 % of Prometheus's time.

Node usage is not queried: it is the sum of the node's containers' rates (see `parse`).
A source asks only for what the policies it serves need (`Kind.inputs` in
`policyd.engine.registry`): when none of them reads CPU, the `cpu` query is not made. The
forecast beside every decision reads each job's progress, so two more questions come with every
cycle (`policyd.sources.progress`): 4. `steps`, the exporter's steps counter as a range over the
same steps, and 5. `progress`, its progress ratio (steps done / the run's total) as an instant
query.

Label values come from the cluster and from policy files; every one is written as an escaped
PromQL string (backslash, double quote, newlines), and namespace lists as escaped RE2
alternatives, so no value can end a matcher early or widen a query. This module is pure: no
I/O, no clock (`now_seconds` is an argument).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from policyd.engine.kind import FORECAST_INPUTS, Input
from policyd.engine.registry import KINDS
from policyd.engine.schedule import base_interval_seconds
from policyd.engine.spec import PolicyDocument
from policyd.model import labels
from policyd.sources.narrow import narrowed
from policyd.sources.settings import Matcher, SourceSettings, regex_literal

FACT_CAPACITY = "capacity"
FACT_STARTED = "started_at"
FACT_SHARES = "shares"
FACT_LIMIT = "limit_cores"
FACT_ANNOTATIONS = "annotations"
FACTS = (FACT_CAPACITY, FACT_STARTED, FACT_SHARES, FACT_LIMIT, FACT_ANNOTATIONS)
"""The facts a cycle may ask for, in the order it asks."""

STEPS_METRIC = "policyd_training_steps_total"
PROGRESS_METRIC = "policyd_training_progress_ratio"
"""The exporter's steps counter and progress ratio (`exporters/`), beside its loss."""

MAX_POINTS = 11_000
"""Prometheus refuses a range query with more than this many steps (400 bad_data)."""

def quote(value: str) -> str:
    """`value` as a double-quoted PromQL string that reads back as exactly `value`."""
    out = (value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
           .replace("\r", "\\r").replace("\t", "\\t"))
    return f'"{out}"'


def render_matchers(matchers: Iterable[Matcher]) -> str:
    """`{a="x",b!="y"}` (or "" when there are none)."""
    body = ",".join(f"{m.label}{m.op}{quote(m.value)}" for m in matchers)
    return "{" + body + "}" if body else ""


def duration(seconds: float) -> str:
    """A PromQL duration: whole seconds as `40s`, anything finer in milliseconds."""
    if seconds <= 0 or not math.isfinite(seconds):
        raise ValueError(f"a duration must be a positive number of seconds, got {seconds}")
    if float(seconds).is_integer():
        return f"{int(seconds)}s"
    return f"{max(round(seconds * 1000), 1)}ms"


def allocation_mode(policies: Sequence[PolicyDocument]) -> str:
    """Which knob holds the current CPU limit: `quota` if a policy's kind sets quota, else
    `shares`."""
    modes = {KINDS.of(p).cpu_mode(p) for p in policies}
    return "quota" if "quota" in modes else "shares"


def needed_inputs(policies: Sequence[PolicyDocument]) -> frozenset[Input]:
    """What the policies' kinds read from a source (the evaluation series always, and what the
    forecasts read)."""
    inputs: set[Input] = {"evaluation", *FORECAST_INPUTS}
    for p in policies:
        inputs |= KINDS.of(p).inputs
    return frozenset(inputs)


@dataclass(frozen=True, kw_only=True)
class CycleQueries:
    """One cycle's queries and the range they cover (end = `now_seconds`)."""

    now_seconds: float
    start_seconds: float
    step_seconds: float
    evaluation: str
    cpu: str | None
    """None when no policy served reads CPU (`Kind.inputs`): the query is not made."""
    facts: tuple[tuple[str, str], ...]
    """(fact, instant query) for each fact the cycle asks for (`FACTS`)."""
    allocation_mode: str
    inputs: frozenset[Input] = frozenset({"evaluation", "cpu"})
    steps: str | None = None
    """The steps counter (a range), when the inputs hold "steps" (`policyd.sources.progress`)."""
    progress: str | None = None
    """The progress ratio (an instant query), with `steps`."""
    metrics: tuple[tuple[str, str], ...] = ()
    """(name, range query) of each per-job metric the policies name (`Kind.metric_queries`:
    QoE's `spec.metrics`), when the inputs hold "metrics" (`policyd.sources.qoe_metrics`)."""
    label_keys: tuple[str, ...] = ()
    """The label keys the policies read as written beyond the ones every job may declare
    (`labels.DECLARED`): each one's selector labels and opt-out key. A profile whose labels
    come sanitised (cAdvisor's `container_label_team_io_opt_out`) gives them back under these
    names too (`facts.prefixed_labels`)."""

    @property
    def count(self) -> int:
        return len(self.labelled())

    def labelled(self) -> tuple[tuple[str, str], ...]:
        found = [("evaluation", self.evaluation), ("cpu", self.cpu),
                 *((f"facts:{fact}", query) for fact, query in self.facts),
                 ("steps", self.steps), ("progress", self.progress),
                 *((f"metrics:{name}", query) for name, query in self.metrics)]
        return tuple((what, query) for what, query in found if query is not None)


def _scope(settings: SourceSettings, namespaces: Sequence[str],
           node: str | None = None) -> tuple[Matcher, ...]:
    scope = settings.container_matchers
    if namespaces and settings.namespace_label is not None:
        pattern = "|".join(regex_literal(n) for n in sorted(set(namespaces)))
        scope = (*scope, Matcher(settings.namespace_label, "=~", pattern))
    if node is not None:
        scope = (*scope, settings.node_matcher(node))
    return scope


def _reduced(settings: SourceSettings, expr: str) -> str:
    """A per-container series reduced to the labels policyd reads and the cgroup's
    `series_id_label` (so a restarted container's two cgroups, or two conflicting figures,
    stay two series as before), unless the profile reads every label
    (`SourceSettings.kept_labels`)."""
    kept = settings.kept_labels
    if kept is None:
        return expr
    extra = (settings.series_id_label,) if settings.series_id_label else ()
    return f"max by ({', '.join(dict.fromkeys((*kept, *extra)))}) ({expr})"


def facts_queries(settings: SourceSettings, namespaces: Sequence[str] = (),
                  allocation_mode: str = "shares", node: str | None = None
                  ) -> tuple[tuple[str, str], ...]:
    """(fact, instant query) for every fact the profile has (see the module docstring), on
    `node` only for a node agent."""
    sel = render_matchers(_scope(settings, namespaces, node))
    out: list[tuple[str, str]] = []
    if settings.capacity_metric is not None:
        on_node = (settings.node_matcher(node),) if node is not None else ()
        capacity = render_matchers((*settings.capacity_matchers, *on_node))
        out.append((FACT_CAPACITY, f"max by ({settings.node_label}) ("
                    f"{settings.capacity_metric}{capacity})"))
    if settings.start_time_metric is not None:
        out.append((FACT_STARTED, _reduced(settings, settings.start_time_metric + sel)))
    if allocation_mode == "quota":
        if settings.quota_metric is not None and settings.period_metric is not None:
            out.append((FACT_LIMIT, f"{_reduced(settings, settings.quota_metric + sel)} / "
                                    f"{_reduced(settings, settings.period_metric + sel)}"))
    elif settings.shares_metric is not None:
        out.append((FACT_SHARES, _reduced(settings, settings.shares_metric + sel)))
    if settings.annotations_metric is not None:
        ann = [m for m in _scope(settings, namespaces) if m.label in
               settings.annotation_identity_labels]
        kept = (*settings.annotation_identity_labels, *settings.marker_labels.names())
        query = (f"max by ({', '.join(dict.fromkeys(kept))}) ("
                 f"{settings.annotations_metric}{render_matchers(ann)})")
        if node is not None and settings.start_time_metric is not None:
            # Its series carry no node: a node agent keeps the pods that have a container on
            # its node, or every agent would read every pod of the cluster each cycle.
            query = (f"{query} and on ({', '.join(settings.annotation_identity_labels)}) "
                     f"{settings.start_time_metric}{sel}")
        out.append((FACT_ANNOTATIONS, query))
    return tuple(out)


def cpu_query(settings: SourceSettings, step_seconds: float,
              namespaces: Sequence[str] = (), node: str | None = None) -> str:
    """Cores used per container, averaged over the window before each step."""
    window = max(step_seconds, 2 * settings.scrape_interval_seconds)
    sel = render_matchers((*_scope(settings, namespaces, node), *settings.cpu_matchers))
    return f"rate({settings.cpu_counter}{sel}[{duration(window)}])"


def build_queries(
    policies: Sequence[PolicyDocument],
    settings: SourceSettings,
    *,
    now_seconds: float,
    intervals: Mapping[str, float] | None = None,
    node: str | None = None,
) -> CycleQueries:
    """The queries of one cycle serving every policy in `policies`.

    The policies must share one evaluation query (a snapshot holds one evaluation series per
    container). The step is the smallest current interval (`intervals[name]`, else the base
    interval), the range the longest window; the step grows if the range would exceed
    Prometheus's 11,000 points. Namespaces narrow the resource queries only when every policy
    names some (a policy without namespaces manages all of them).

    `node` (a node agent): every resource query carries a matcher on the node
    (`SourceSettings.node_matcher`), and so do the evaluation query, when it is one plain
    selector (`narrow`), and the progress queries, when the exporter's series carry the node
    (`evaluation_node_label`); N agents then share the cluster's cost N ways.
    """
    if not policies:
        raise ValueError("a snapshot serves at least one policy")
    queries = {p.spec.evaluation.query for p in policies}
    if len(queries) != 1:
        raise ValueError(
            "policies sharing a source must share spec.evaluation.query; got "
            + ", ".join(sorted(repr(q) for q in queries)))
    current = {p.name: float((intervals or {}).get(p.name, base_interval_seconds(p)))
               for p in policies}
    step = min(current.values())
    history = max(p.spec.window_intervals * current[p.name] for p in policies)
    if history / step > MAX_POINTS:
        step = float(math.ceil(history / MAX_POINTS))
    history = math.ceil(history / step - 1e-9) * step  # a whole number of steps ends at now
    namespaces: list[str] = []
    if all(p.spec.selector.namespaces for p in policies):
        namespaces = [n for p in policies for n in p.spec.selector.namespaces]
    inputs = needed_inputs(policies)
    evaluation, steps, progress = queries.pop(), STEPS_METRIC, PROGRESS_METRIC
    if node is not None and settings.evaluation_node_label is not None:
        on_node = f"{settings.evaluation_node_label}={quote(node)}"
        evaluation = narrowed(evaluation, on_node) or evaluation
        steps, progress = f"{steps}{{{on_node}}}", f"{progress}{{{on_node}}}"
    metrics = metric_queries(policies, node, settings) if "metrics" in inputs else ()
    return CycleQueries(
        now_seconds=now_seconds,
        start_seconds=now_seconds - history,
        step_seconds=step,
        evaluation=evaluation,
        cpu=cpu_query(settings, step, namespaces, node) if "cpu" in inputs else None,
        facts=facts_queries(settings, namespaces, allocation_mode(policies), node),
        allocation_mode=allocation_mode(policies),
        inputs=inputs,
        steps=steps if "steps" in inputs else None,
        progress=progress if "steps" in inputs else None,
        metrics=metrics,
        label_keys=read_label_keys(policies),
    )


def read_label_keys(policies: Sequence[PolicyDocument]) -> tuple[str, ...]:
    """The label keys `policies` read as written (`CycleQueries.label_keys`), each once, in
    the order the policies name them."""
    keys = [k for p in policies
            for k in (*p.spec.selector.labels, p.spec.selector.opt_out_key)]
    return tuple(dict.fromkeys(k for k in keys if k not in labels.DECLARED))


def metric_queries(policies: Sequence[PolicyDocument], node: str | None,
                   settings: SourceSettings) -> tuple[tuple[str, str], ...]:
    """(name, query) of every per-job metric the policies name, each once; one name given two
    queries by two policies is refused (a snapshot holds one series per job and name). On a
    node agent a plain selector is narrowed to its node, as the evaluation query is."""
    chosen: dict[str, str] = {}
    for p in policies:
        for name, query in KINDS.of(p).metric_queries(p).items():
            if chosen.setdefault(name, query) != query:
                raise ValueError(f"policies sharing a source must give metric {name!r} one "
                                 f"query; got {chosen[name]!r} and {query!r}")
    if node is not None and settings.evaluation_node_label is not None:
        on_node = f"{settings.evaluation_node_label}={quote(node)}"
        chosen = {name: narrowed(query, on_node) or query for name, query in chosen.items()}
    return tuple(sorted(chosen.items()))
