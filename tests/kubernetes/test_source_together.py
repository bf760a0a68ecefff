"""KubernetesPodSource with its Prometheus queries in flight together
(`prometheus.max_concurrent_queries`), against the fake API server (the recorded pod rs-done on
w2) and a fake Prometheus on 127.0.0.1 that holds every query a while: four queries at once on
four workers and one at a time on one, the pod list read while they are out, the evaluation
query's failure the cycle's error even when a later one fails first, and a failed progress
query still a warning."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kubernetes import client as k8s  # type: ignore[import-untyped]

from policyd.actuators.kubernetes import KubernetesSettings
from policyd.sources import SourceError
from policyd.sources.kubernetes_pods import KubernetesPodSource
from tests.kubernetes import world
from tests.kubernetes.world import served
from tests.sources.builders import flowcon
from tests.sources.cadvisor_server import Stub, refused, serving

DELAY_SECONDS = 0.3
QUERIES = 4
"""A FlowCon cycle's: the loss, the CPU, the steps and the progress ratio."""


class ListingSeen:
    """The API's CoreV1Api, noting at its pod list what the fake Prometheus was doing."""

    def __init__(self, core: Any, prometheus: Stub) -> None:
        self.core, self.prometheus = core, prometheus
        self.seen: list[tuple[bool, int]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.core, name)

    def list_pod_for_all_namespaces(self, **kwargs: Any) -> Any:
        self.seen.append(self.prometheus.seen_beside(QUERIES))
        return self.core.list_pod_for_all_namespaces(**kwargs)


@contextmanager
def cluster(prometheus: Stub, workers: int) -> Iterator[tuple[KubernetesPodSource, ListingSeen,
                                                               Any]]:
    """The source on the fake API server (rs-done running on w2) and on `prometheus`."""
    with served() as (server, _), serving(prometheus) as url, server.api_client() as api:
        world.node_w2(server.cluster)
        world.resize_pod(server.cluster, "rs-done")
        core = ListingSeen(k8s.CoreV1Api(api), prometheus)
        yield KubernetesPodSource(url, KubernetesSettings(host=server.url), core=core,
                                  retries=0, max_concurrent_queries=workers), core, server


@pytest.mark.parametrize(("workers", "at_once", "seen"), [
    pytest.param(1, 1, (False, QUERIES), id="one-after-the-other"),
    pytest.param(4, QUERIES, (True, 0), id="together")])
def test_the_queries_go_together_up_to_the_bound_and_the_pods_are_listed_meanwhile(
        workers: int, at_once: int, seen: tuple[bool, int]) -> None:
    prometheus = Stub(prometheus=world.rs_done_loss, query_delay_seconds=DELAY_SECONDS,
                      gather_queries=at_once)
    with cluster(prometheus, workers) as (source, core, _):
        snap = source.snapshot([flowcon()])
    assert prometheus.most_in_flight == at_once and prometheus.answered == QUERIES
    assert core.seen == [seen]  # together: the pods listed while the queries are out
    (job,) = snap.containers
    assert (job.id, job.node) == (f"{world.NS}/rs-done/trainer", "w2")
    assert source.last_warnings == ()


def test_the_evaluation_querys_failure_wins_though_the_cpu_query_and_the_api_fail_first(
) -> None:
    prometheus = Stub(prometheus=world.rs_done_loss, query_faults={
        "policyd_training_loss": refused("the loss, late", DELAY_SECONDS),
        "container_cpu_usage_seconds_total": refused("the CPU, at once")})
    with cluster(prometheus, 4) as (source, _, server):
        server.route("GET", "/api/v1/pods", (500, {"kind": "Status", "code": 500}))
        with pytest.raises(SourceError) as caught:
            source.snapshot([flowcon()])
    assert caught.value.query == "policyd_training_loss"
    assert "the loss, late" in str(caught.value)


def test_a_failed_progress_query_is_still_a_warning_with_the_queries_together() -> None:
    prometheus = Stub(prometheus=world.rs_done_loss, query_delay_seconds=0.05,
                      query_faults={"policyd_training_steps_total": refused("no steps")})
    with cluster(prometheus, 4) as (source, _, _):
        snap = source.snapshot([flowcon()])
    (job,) = snap.containers
    assert job.total_steps is None
    (warning,) = [w for w in source.last_warnings if "progress" in w]
    assert warning.startswith("no job's progress this cycle (forecasts say so): ")
    assert "no steps" in warning
