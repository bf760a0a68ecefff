"""The real backends, built from settings: source, actuator, listener and alerter.

Docker: the actuator and the listener come from `policyd.actuators.docker` and
`policyd.sources.docker_events`; the loss always comes from Prometheus (`prometheus.url`), CPU
and the facts from cAdvisor through Prometheus (the `cadvisor-docker` profile, the default),
from the Docker engines' own stats (`docker-stats`, `policyd.sources.docker_stats`) or from
each host's cAdvisor REST API (`cadvisor-rest`, `policyd.sources.cadvisor_source`). Alerts
go to Alertmanager when `alertmanager` is set. Every one of these is imported here, when the
backend is chosen, so that the simulator and the tests never load the Docker SDK or HTTP
clients.

Kubernetes: one API client (in-cluster config, else the kubeconfig; made only for this
backend) shared by the pod source (`policyd.sources.kubernetes_pods.KubernetesPodSource`: pods
from the API, loss and CPU from Prometheus), the listener (`PodWatch`; in the manager, beside
it, `policyd.sources.kubernetes_jobs.JobWatch` for Jobs submitted held, both in one
`MergedEvents`), the actuator
(`policyd.actuators.kubernetes.KubernetesActuator`), the Lease API of leader election, and the
custom objects API the policy resources are read from (`policy_resources`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, assert_never

from policyd.actuators.docker.settings import DockerSettings
from policyd.actuators.kubernetes.settings import KubernetesSettings
from policyd.alerts.settings import AlertSettings
from policyd.clients.access_settings import HttpAccessFields
from policyd.clients.http_access import HttpAccess, check_files
from policyd.daemon.ports import OutcomeObserver
from policyd.daemon.settings import (
    AlertmanagerSection,
    DaemonSettings,
    DockerSection,
    KubernetesSection,
    PrometheusSettings,
)
from policyd.sources.settings import SourceSettings, cadvisor_docker, kubernetes, process
from policyd.tick import Actuator, EventSource, Source

LOG = logging.getLogger(__name__)


class BackendError(Exception):
    """The backend cannot be reached as configured (one line: why)."""


@dataclass(frozen=True, kw_only=True)
class Parts:
    """What a real daemon runs against."""

    source: Source
    actuator: Actuator
    events: EventSource | None
    lease_api: Any = None
    """coordination.k8s.io's API (a CoordinationV1Api) for `--leader-elect`; kubernetes only."""
    recover: Callable[[], object] | None = None
    """Finishes half-done migrations; called when leadership is acquired (`--leader-elect`)."""
    policy_api: Any = None
    """policyd.io's custom objects (a CustomObjectsApi): the policies as custom resources;
    kubernetes only."""
    settle: Callable[[], object] | None = None
    """Finishes or rolls back the moves still pending; the daemon calls it at the start of
    every cycle (cheap when none is)."""
    observer: OutcomeObserver | None = None
    """The backend's own observer of every tick's outcome (kubernetes: Events for
    declarations that cannot be read), beside the alerts."""
    sees_held_jobs: bool = True
    """Whether the source lists held jobs (created-not-started containers, suspended Jobs) for
    the policies that admit them; on Docker only the docker-stats profile asks the engines."""


def source_settings(prometheus: PrometheusSettings) -> SourceSettings:
    """The `policyd.sources.settings` profile the settings name (a profile that reads the CPU
    from Prometheus: not `docker-stats` nor `cadvisor-rest`, see `docker_parts`)."""
    scrape = prometheus.scrape_interval_seconds
    nodes = dict(prometheus.node_names)
    match prometheus.profile:
        case "kubernetes":
            return kubernetes(scrape_interval_seconds=scrape,
                              evaluation_node_label=prometheus.evaluation_node_label)
        case "cadvisor-docker":
            return cadvisor_docker(node_names=nodes, scrape_interval_seconds=scrape)
        case "process":
            cores = prometheus.capacity_cores or float(os.cpu_count() or 1)
            return process(capacity_cores=cores, job=prometheus.process_job, node_names=nodes,
                           scrape_interval_seconds=scrape)
        case "docker-stats" | "cadvisor-rest":
            raise ValueError(f"{prometheus.profile} is not a Prometheus profile (see "
                             "docker_parts)")
        case _:
            assert_never(prometheus.profile)


def checked_access(section: HttpAccessFields, name: str) -> HttpAccess | None:
    """The section's `HttpAccess`, its certificate, key and CA files checked readable now (a
    BackendError naming the section) rather than at the first TLS handshake."""
    access = section.access()
    if access is not None:
        try:
            check_files(access)
        except ValueError as exc:
            raise BackendError(f"{name}.tls_config: {exc}") from None
    return access


def prometheus_source(prometheus: PrometheusSettings) -> Source:
    from policyd.sources.prometheus import PrometheusSource  # noqa: PLC0415

    assert prometheus.url is not None
    return PrometheusSource(prometheus.url, source_settings(prometheus),
                            timeout_seconds=prometheus.timeout_seconds,
                            max_concurrent_queries=prometheus.max_concurrent_queries,
                            access=checked_access(prometheus, "prometheus"))


def docker_settings(section: DockerSection) -> DockerSettings:
    """`policyd.actuators.docker.DockerSettings` for the configured engines and knobs."""
    return DockerSettings.from_section(section)


def docker_parts(settings: DaemonSettings) -> Parts:
    """Source, actuator (after `recover()`: half-done migrations are finished or rolled back)
    and listener for the docker backend. (A migration's grace period travels on the action.)"""
    from policyd.actuators.docker import DockerActuator  # noqa: PLC0415
    from policyd.actuators.docker.steps import crash_at  # noqa: PLC0415
    from policyd.sources.docker_events import DockerEvents  # type: ignore[import-not-found,unused-ignore]  # noqa: PLC0415

    prometheus = settings.prometheus
    assert prometheus.url is not None
    docker = docker_settings(settings.docker)
    actuator = DockerActuator(docker, crash=crash_at(docker.test_crash_at))
    try:
        actuator.recover()
    except Exception as exc:  # an engine down at start: the actuator retries before acting
        LOG.error("docker: recovering half-done migrations failed (tried again before the "
                  "next action): %s", exc)
    source: Source
    if prometheus.profile == "docker-stats":
        from policyd.sources.docker_stats import DockerSnapshotSource  # noqa: PLC0415

        source = DockerSnapshotSource(prometheus.url, docker,
                                      extra_markers=actuator.recorded_markers,
                                      timeout_seconds=prometheus.timeout_seconds,
                                      max_concurrent_queries=prometheus.max_concurrent_queries,
                                      access=checked_access(prometheus, "prometheus"))
    elif prometheus.profile == "cadvisor-rest":
        from policyd.sources.cadvisor_source import cadvisor_rest_source  # noqa: PLC0415

        try:
            source = cadvisor_rest_source(
                prometheus.url, {node: str(url) for node, url in prometheus.cadvisor.items()},
                timeout_seconds=prometheus.timeout_seconds,
                max_concurrent_queries=prometheus.max_concurrent_queries,
                extra_markers=actuator.recorded_markers,
                access=checked_access(prometheus, "prometheus"))
        except ValueError as exc:
            raise BackendError(f"prometheus.cadvisor: {exc}") from None
    else:
        source = prometheus_source(prometheus)
    return Parts(source=source, actuator=actuator, events=DockerEvents(docker),
                 settle=actuator.settle_pending,
                 sees_held_jobs=prometheus.profile == "docker-stats")


def kubernetes_settings(section: KubernetesSection, node: str | None = None
                        ) -> KubernetesSettings:
    """`policyd.actuators.kubernetes.KubernetesSettings` from the `kubernetes` section (the
    pod source and the watch read its namespaces, label_selector and container_name too);
    `node` (a node agent) narrows every list and watch to that node's pods. Moves are
    recorded in policyd's own namespace (the section's `namespace`)."""
    return KubernetesSettings.from_scope(section, node_name=node,
                                         record_namespace=section.namespace)


def kubernetes_parts(settings: DaemonSettings, *, recover: bool = True,
                     node: str | None = None) -> Parts:
    """Source, actuator, listener and Lease API for the kubernetes backend. `recover`: finish
    half-done migrations now (False with `--leader-elect`: the leader does it when elected).
    `node` (a node agent: FlowCon only, no RBAC on Jobs): only that node's pods are listed and
    watched, no Job is, and nothing is recovered."""
    from kubernetes import client as k8s  # type: ignore[import-untyped]  # noqa: PLC0415
    from kubernetes import config as k8s_config  # noqa: PLC0415

    from policyd.actuators.kubernetes import KubernetesActuator  # noqa: PLC0415
    from policyd.actuators.kubernetes.calls import api_client  # noqa: PLC0415
    from policyd.actuators.kubernetes.declaration_events import DeclarationEvents  # noqa: PLC0415
    from policyd.sources.kubernetes_jobs import JobWatch  # noqa: PLC0415
    from policyd.sources.kubernetes_node_watch import NodeWatch  # noqa: PLC0415
    from policyd.sources.kubernetes_pod_watch import PodWatch  # noqa: PLC0415
    from policyd.sources.kubernetes_pods import KubernetesPodSource  # noqa: PLC0415
    from policyd.sources.merged_events import MergedEvents  # noqa: PLC0415

    prometheus = settings.prometheus
    assert prometheus.url is not None
    scope = kubernetes_settings(settings.kubernetes, node)
    try:
        shared = api_client(scope)  # in-cluster config, else the kubeconfig
    except (k8s_config.ConfigException, OSError) as exc:
        raise BackendError(f"kubernetes: no in-cluster config (not in a pod with a service "
                           f"account) and no usable kubeconfig: {exc}") from None
    core = k8s.CoreV1Api(shared)
    actuator = KubernetesActuator(scope, core=core, batch=k8s.BatchV1Api(shared),
                                  events_api=k8s.EventsV1Api(shared),
                                  policy_api=k8s.PolicyV1Api(shared))
    if node is None and recover:  # a node agent makes no moves (KubernetesSettings.node_name)
        try:
            done = actuator.recover()
        except Exception as exc:  # the actuator tries again before its first action
            LOG.error("kubernetes: recovering half-done migrations failed (tried again before "
                      "the next action): %s", exc)
        else:
            if done:
                LOG.info("kubernetes: settled %d half-done migrations", len(done))
    batch = None if node is not None else k8s.BatchV1Api(shared)  # Jobs: the manager's
    jobs = JobWatch(batch, scope) if batch is not None else None
    pods = PodWatch(core, scope)  # the listener, and the source's view of the pods
    nodes = NodeWatch(core, scope.node_name)  # the source's view of the nodes (no events)
    source = KubernetesPodSource(prometheus.url, scope, core=core,
                                 timeout_seconds=prometheus.timeout_seconds,
                                 max_concurrent_queries=prometheus.max_concurrent_queries,
                                 access=checked_access(prometheus, "prometheus"),
                                 evaluation_node_label=prometheus.evaluation_node_label,
                                 batch=batch,
                                 held_from=jobs.held_now if jobs is not None else None,
                                 pods_from=pods.running_now, nodes_from=nodes.nodes_now)
    # one listener: the pods' and (the manager's) the held Jobs' events, and the views the
    # source reads while the watches run
    events: EventSource = MergedEvents(pods, nodes, *((jobs,) if jobs is not None else ()))
    return Parts(source=source, actuator=actuator, events=events,
                 observer=DeclarationEvents(actuator.events,
                                            container_name=scope.container_name),
                 lease_api=k8s.CoordinationV1Api(shared), recover=actuator.recover,
                 policy_api=k8s.CustomObjectsApi(shared))


def alerter(section: AlertmanagerSection | None) -> OutcomeObserver | None:
    """`policyd.alerts.Alerter` posting to Alertmanager, or None when none is configured."""
    if section is None:
        return None
    from policyd.alerts.alerter import Alerter  # noqa: PLC0415

    checked_access(section, "alertmanager")
    observer: OutcomeObserver = Alerter(AlertSettings.from_section(section))
    return observer
