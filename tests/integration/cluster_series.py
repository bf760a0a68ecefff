"""A Kubernetes cluster's training jobs as the series Prometheus would hold for them, as text.

One generator for the integration tests against real PromQL backends and for the scale
benchmark (benchmarks/prometheus_scale.py): N training containers, `per_node` on each node,
with the series policyd reads and the label sets their exporters give them:

* the kubelet's cAdvisor (`/metrics/cadvisor`, scraped by the kube-prometheus-stack's kubelet
  ServiceMonitor, which adds `node` by relabelling): `container_cpu_usage_seconds_total`
  (`cpu="total"`), `container_start_time_seconds`, `container_spec_cpu_shares`, `_quota`,
  `_period`, each with the whole label set (`id`, `image`, `name`, `endpoint`, ...); per node
  `machine_cpu_cores`;
* kube-state-metrics: `kube_pod_annotations` with the allow-listed marker annotations;
* the training job's exporter (exporters/): `policyd_training_loss`,
  `policyd_training_steps_total` and, for every other job, `policyd_training_progress_ratio`,
  with the PodMonitor's `node` label (deploy/kubernetes/podmonitor-training.yaml).

Loss curves decay at different rates from different start times, so new, progressing and
converged jobs are all present; a few jobs carry the `migrated` marker. Seeded, deterministic.
`openmetrics` writes promtool's backfill input (`promtool tsdb create-blocks-from openmetrics`,
seconds, `# EOF`); `exposition` writes the Prometheus text format with millisecond timestamps
that VictoriaMetrics imports (`POST /api/v1/import/prometheus`). The same samples either way.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TextIO

import numpy as np

NAMESPACES = 7
CAPACITY_CORES = 16.0
IMAGE = "registry.example.com/ml/train:1.4.2"


@dataclass(frozen=True, kw_only=True)
class Cluster:
    """What to generate: `containers` jobs from `start_seconds` to `end_seconds` (inclusive,
    every `scrape_seconds`)."""

    containers: int
    start_seconds: float
    end_seconds: float
    per_node: int = 10
    scrape_seconds: float = 15.0
    seed: int = 11

    @property
    def nodes(self) -> int:
        return max(1, math.ceil(self.containers / self.per_node))

    def times(self) -> np.ndarray:
        count = int((self.end_seconds - self.start_seconds) // self.scrape_seconds) + 1
        return self.start_seconds + self.scrape_seconds * np.arange(count, dtype=np.float64)


def node_of(i: int, cluster: Cluster) -> str:
    return f"w{i // cluster.per_node}"


def pod_of(i: int) -> tuple[str, str]:
    """(namespace, pod) of job i."""
    return f"team-{i % NAMESPACES}", f"train-{i}-x7k2p"


def _labels(pairs: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(pairs.items())) + "}"


@dataclass(frozen=True)
class Job:
    """One training container's identity and the parameters of its curves."""

    index: int
    namespace: str
    pod: str
    node: str
    started_at: float
    loss_scale: float
    loss_floor: float
    tau_seconds: float
    cores: float
    steps_per_second: float
    total_steps: float | None
    migrated: bool


def jobs(cluster: Cluster) -> list[Job]:
    rng = np.random.default_rng(cluster.seed)
    n = cluster.containers
    span = cluster.end_seconds - cluster.start_seconds
    # Started from 3 x the history before the start to half-way through it: new, progressing
    # and converged jobs in every cycle of the run.
    started = cluster.start_seconds + rng.uniform(-3.0, 0.5, n) * span
    out = []
    for i in range(n):
        namespace, pod = pod_of(i)
        out.append(Job(
            index=i, namespace=namespace, pod=pod, node=node_of(i, cluster),
            started_at=float(round(started[i])), loss_scale=float(rng.uniform(0.5, 5.0)),
            loss_floor=float(rng.uniform(0.02, 0.2)), tau_seconds=float(rng.uniform(120, 2400)),
            cores=float(rng.uniform(0.3, 1.6)), steps_per_second=float(rng.uniform(2, 40)),
            total_steps=float(rng.integers(20_000, 200_000)) if i % 2 == 0 else None,
            migrated=i % 97 == 5))
    return out


def _number(value: float) -> str:
    return repr(float(value)) if math.isfinite(value) else ("NaN" if math.isnan(value) else
                                                             ("+Inf" if value > 0 else "-Inf"))


def job_series(job: Job, cluster: Cluster, times: np.ndarray
               ) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """(metric name + label text, sample times, values) of one job's series."""
    rng = np.random.default_rng(cluster.seed * 1_000_003 + job.index)
    alive = times >= job.started_at
    t = times[alive]
    if t.size == 0:
        return
    age = t - job.started_at
    uid = f"{job.index:08x}-5f1c-4e2a-9d3b-{job.index:012x}"
    cid = f"{job.index:016x}" * 4
    node_ip = f"10.0.{job.index // cluster.per_node // 250}.{job.index // cluster.per_node % 250}"
    pod_ip = f"10.1.{job.index // 250}.{job.index % 250}"
    cadvisor = {
        "container": "train", "endpoint": "https-metrics",
        "id": (f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
               f"{uid.replace('-', '_')}.slice/cri-containerd-{cid}.scope"),
        "image": IMAGE, "instance": f"{node_ip}:10250", "job": "kubelet",
        "metrics_path": "/metrics/cadvisor", "name": cid, "namespace": job.namespace,
        "node": job.node, "pod": job.pod, "service": "kube-prometheus-stack-kubelet"}
    usage = np.clip(job.cores * (1 + 0.05 * rng.standard_normal(t.size)), 0.01, None)
    counter = np.cumsum(usage * cluster.scrape_seconds) + 3.5
    yield ("container_cpu_usage_seconds_total" + _labels({**cadvisor, "cpu": "total"}),
           t, np.round(counter, 6))
    for name, value in (("container_start_time_seconds", job.started_at),
                        ("container_spec_cpu_shares", round(job.cores * 1024)),
                        ("container_spec_cpu_quota", round(job.cores * 2 * 100_000)),
                        ("container_spec_cpu_period", 100_000.0)):
        yield name + _labels(cadvisor), t, np.full(t.size, float(value))
    exporter = {"container": "train", "endpoint": "metrics", "instance": f"{pod_ip}:9100",
                "job": "policyd-training", "job_name": job.pod, "namespace": job.namespace,
                "node": job.node, "pod": job.pod}
    noise = 1 + 0.01 * rng.standard_normal(t.size)
    loss = (job.loss_scale * np.exp(-age / job.tau_seconds) + job.loss_floor) * noise
    yield "policyd_training_loss" + _labels(exporter), t, np.round(loss, 6)
    steps = np.floor(age * job.steps_per_second)
    yield "policyd_training_steps_total" + _labels(exporter), t, steps
    if job.total_steps is not None:
        ratio = np.minimum(steps / job.total_steps, 1.0)
        yield "policyd_training_progress_ratio" + _labels(exporter), t, np.round(ratio, 8)
    annotations = {"annotation_policyd_io_migrated": "true" if job.migrated else "",
                   "container": "kube-state-metrics", "endpoint": "http",
                   "instance": "10.2.0.5:8080", "job": "kube-state-metrics",
                   "namespace": job.namespace, "pod": job.pod,
                   "service": "kube-state-metrics", "uid": uid}
    yield ("kube_pod_annotations" + _labels({k: v for k, v in annotations.items() if v}),
           t, np.ones(t.size))


def node_series(node: int, cluster: Cluster, times: np.ndarray
                ) -> tuple[str, np.ndarray, np.ndarray]:
    ip = f"10.0.{node // 250}.{node % 250}"
    labels = {"boot_id": f"b{node:07d}", "endpoint": "https-metrics", "instance": f"{ip}:10250",
              "job": "kubelet", "machine_id": f"m{node:07d}",
              "metrics_path": "/metrics/cadvisor", "node": f"w{node}",
              "service": "kube-prometheus-stack-kubelet", "system_uuid": f"u{node:07d}"}
    return "machine_cpu_cores" + _labels(labels), times, np.full(times.size, CAPACITY_CORES)


def all_series(cluster: Cluster, containers: range | None = None
               ) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """Every series of the jobs in `containers` (default: all), and of their nodes."""
    times = cluster.times()
    chosen = containers if containers is not None else range(cluster.containers)
    every = jobs(cluster)
    for i in chosen:
        yield from job_series(every[i], cluster, times)
    for node in sorted({i // cluster.per_node for i in chosen}):
        yield node_series(node, cluster, times)


def _write(out: TextIO, series: Iterator[tuple[str, np.ndarray, np.ndarray]],
           time_text: dict[float, str]) -> None:
    for head, t, values in series:
        out.write("".join(f"{head} {_number(v)} {time_text[s]}\n"
                          for s, v in zip(t.tolist(), values.tolist(), strict=True)))


def openmetrics(cluster: Cluster, out: TextIO, containers: range | None = None) -> None:
    """promtool's backfill input: OpenMetrics text, timestamps in seconds, ending `# EOF`."""
    time_text = {s: f"{s:.3f}".rstrip("0").rstrip(".") for s in cluster.times().tolist()}
    _write(out, all_series(cluster, containers), time_text)
    out.write("# EOF\n")


def exposition(cluster: Cluster, out: TextIO, containers: range | None = None) -> None:
    """The Prometheus text format with millisecond timestamps (VictoriaMetrics' import)."""
    time_text = {s: str(round(s * 1000)) for s in cluster.times().tolist()}
    _write(out, all_series(cluster, containers), time_text)
