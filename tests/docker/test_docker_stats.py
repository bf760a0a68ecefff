"""docker_stats: polling the engines (fake at the SDK seam) and the merged snapshot."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, cast

import docker
import pytest

from policyd.actuators.docker import DockerHost, DockerSettings
from policyd.model import Markers
from policyd.sources.docker_labels import label_markers
from policyd.sources.docker_poll import DockerStats, cores_of, facts_of
from policyd.sources.docker_stats import DockerSnapshotSource, merged_evaluation
from policyd.sources.errors import SourceError
from policyd.sources.matrix import read_matrix
from policyd.sources.speed_label import engine_speed
from tests.sources.builders import envelope, flowcon, series
from tests.sources.cadvisor_server import Stub, refused, serving


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%f000Z")


class FakeApi:
    """`client.api` of one engine: containers, inspect, one-shot stats (slow on purpose)."""

    def __init__(self, containers: Mapping[str, dict[str, Any]], delay: float = 0.0) -> None:
        self.containers_by_id = dict(containers)
        self.usage_ns = {cid: 0.0 for cid in containers}
        self.read_at = 1000.0
        self.delay = delay
        self.stats_calls: list[tuple[str, bool, bool]] = []
        self.active = 0
        self.max_active = 0
        self._lock = threading.Lock()

    def containers(self, filters: Mapping[str, str], all: bool = False
                   ) -> list[dict[str, Any]]:
        """As the engine lists them: running ones only unless `all`; `status` filters."""
        key, _, value = filters["label"].partition("=")
        status = filters.get("status")
        return [{"Id": cid, "Names": c["Name"] and [c["Name"]], "Created": c.get("CreatedAt"),
                 "Labels": c["Config"]["Labels"]}
                for cid, c in self.containers_by_id.items()
                if c["Config"]["Labels"].get(key) == value
                and (all or c["State"]["Running"])
                and (status is None or c["State"].get("Status", "running") == status)]

    def inspect_container(self, cid: str) -> dict[str, Any]:
        return self.containers_by_id[cid]

    def stats(self, cid: str, stream: bool, one_shot: bool) -> dict[str, Any]:
        with self._lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        time.sleep(self.delay)
        with self._lock:
            self.active -= 1
            self.stats_calls.append((cid, stream, one_shot))
        return {"read": rfc3339(self.read_at),
                "cpu_stats": {"cpu_usage": {"total_usage": self.usage_ns[cid]}},
                "precpu_stats": {}}


class FakeClient:
    def __init__(self, api: FakeApi, ncpu: int = 4, labels: list[str] | None = None) -> None:
        self.api = api
        self.ncpu = ncpu
        self.labels = labels

    def info(self) -> dict[str, Any]:
        return {"NCPU": self.ncpu, "Labels": self.labels}


def inspect(cid: str, name: str, *, labels: dict[str, str] | None = None, shares: int = 0,
            quota: int = 0, started: str = "2026-11-22T02:00:00.25Z") -> dict[str, Any]:
    return {"Id": cid, "Name": f"/{name}",
            "State": {"StartedAt": started, "Running": True, "Status": "running"},
            "Config": {"Labels": {"policyd.io/managed": "true", **(labels or {})}},
            "HostConfig": {"CpuShares": shares, "CpuQuota": quota,
                           "CpuPeriod": 100_000 if quota else 0}}


SETTINGS = DockerSettings(hosts={"a": DockerHost(url="unix:///a.sock"),
                                 "b": DockerHost(url="unix:///b.sock")})


def clients(**apis: FakeApi) -> dict[str, docker.DockerClient]:
    return cast(dict[str, docker.DockerClient], {n: FakeClient(a) for n, a in apis.items()})


def test_cores_of_differences_the_counter() -> None:
    ring = [(100.0, 100.2, 0.0), (120.0, 120.2, 10e9), (140.0, 140.2, 5e9), (160.0, 160.2, 9e9)]
    got = cores_of(ring)
    assert got.pairs() == [[120.0, 0.5], [160.0, 0.2]]  # the reset pair gives no sample


def test_facts_of_an_inspect_result() -> None:
    f = facts_of(inspect("c1", "job", shares=256), "a")
    assert (f.id, f.name, f.node, f.cpu_shares) == ("c1", "job", "a", 256)
    assert f.started_at == pytest.approx(datetime(2026, 11, 22, 2, 0, 0, 250000,
                                                  tzinfo=UTC).timestamp())


def test_markers_from_labels_merged_with_recorded_ones() -> None:
    warnings: list[str] = []
    labels = {"policyd.io/migrated": "true", "policyd.io/converged_at": "100",
              "policyd.io/last_action_at": "not-a-time"}
    got = label_markers(labels, Markers(rebalanced=True, last_action_at=50.0), warnings, "c")
    assert got == Markers(migrated=True, rebalanced=True, converged_at=100.0,
                          last_action_at=50.0)
    assert warnings == ["c: label policyd.io/last_action_at='not-a-time' is not an epoch "
                        "time; ignored"]
    assert label_markers({}, None, [], "c") == Markers()


def test_evaluation_series_of_one_name_are_joined_newest_last() -> None:
    old = series({"container": "job", "instance": "a:9108"}, [3.0, 2.0, 1.5], [10, 20, 30])
    new = series({"container": "job", "instance": "b:9108"}, [1.4, 1.3], [30, 40])
    got = merged_evaluation(read_matrix([new, old]))
    assert got["job"].pairs() == [[10.0, 3.0], [20.0, 2.0], [30.0, 1.4], [40.0, 1.3]]


def test_poll_is_concurrent_per_host_and_one_shot() -> None:
    api = FakeApi({f"c{i}": inspect(f"c{i}", f"job{i}") for i in range(6)}, delay=0.2)
    stats = DockerStats(SETTINGS, clients=clients(a=api, b=FakeApi({})))
    try:
        started = time.monotonic()
        poll = stats.poll(at=1000.0)
        took = time.monotonic() - started
    finally:
        stats.close()
    assert len(poll.hosts[0].containers) == 6 and not poll.warnings
    assert took < 0.6, f"six 0.2 s stats calls should overlap, took {took:.2f} s"
    assert api.max_active > 1
    assert {(s, o) for _, s, o in api.stats_calls} == {(False, True)}


class Prometheus:
    """The loss (and the jobs' steps and progress ratio, when given) as Prometheus answers."""

    def __init__(self, result: Any = None, error: Exception | None = None, *,
                 steps: Any = (), ratios: Any = ()) -> None:
        self.result = result
        self.error = error
        self.steps, self.ratios = list(steps), list(ratios)
        self.asked: list[tuple[str, str]] = []

    def custom_query(self, query: str, params: dict[str, Any] | None = None) -> Any:
        assert query == "policyd_training_progress_ratio", "the only instant query"
        return self.ratios

    def custom_query_range(self, query: str, start_time: datetime, end_time: datetime,
                           step: str, params: dict[str, Any] | None = None) -> Any:
        self.asked.append((query, step))
        if self.error is not None:
            raise self.error
        return self.steps if query == "policyd_training_steps_total" else self.result


def test_snapshot_merges_prometheus_loss_with_docker_facts() -> None:
    now = [1_700_000_400.0]
    a = FakeApi({"c1": inspect("c1", "job", shares=256,
                               labels={"policyd.io/migrated": "true"}),
                 "c2": inspect("c2", "no-loss")})
    b = FakeApi({"c3": inspect("c3", "other", quota=50_000)})
    loss = series({"container": "job", "job_name": "job"}, [2.0, 1.0],
                  [now[0] + 20 - 20, now[0] + 20])
    ghost = series({"container": "gone"}, [1.0], [now[0] + 20])
    other = series({"container": "other"}, [5.0], [now[0] + 20])
    steps = series({"container": "job", "job_name": "job"}, [100.0, 300.0],
                   [now[0] + 20 - 20, now[0] + 20])
    ratio = {"metric": {"__name__": "policyd_training_progress_ratio", "container": "job",
                        "job_name": "job"}, "value": [now[0] + 20, "0.25"]}
    prom = Prometheus([loss, ghost, other], steps=[steps], ratios=[ratio])
    source = DockerSnapshotSource(
        "http://127.0.0.1:9090", SETTINGS, clients=clients(a=a, b=b), prometheus=prom,
        extra_markers=lambda: {"c1": Markers(last_action_at=5.0)}, clock=lambda: now[0])
    try:
        source.snapshot([flowcon()])
        now[0] += 20
        a.read_at += 20
        a.usage_ns["c1"] += 10e9  # 10 s of CPU in 20 s: half a core
        snap = source.snapshot([flowcon()])
    finally:
        source.close()
    assert prom.asked[-2:] == [("policyd_training_loss", "20"),
                               ("policyd_training_steps_total", "20")]
    assert [n.name for n in snap.nodes] == ["a", "b"]
    assert snap.nodes[0].cpu_capacity == 4.0 and snap.nodes[0].cpu_usage == 0.5
    job, other_c = snap.containers
    assert (job.id, job.node, job.cpu_allocation) == ("job", "a", 0.25)
    assert job.cpu_usage.pairs() == [[now[0], 0.5]]
    assert job.evaluation.pairs()[-1] == [now[0], 1.0]
    assert job.markers == Markers(migrated=True, last_action_at=5.0)
    assert job.steps.values.tolist() == [100.0, 300.0] and job.total_steps == 1200.0
    assert other_c.steps.pairs() == [] and other_c.total_steps is None
    assert job.labels["policyd.io/managed"] == "true"
    assert other_c.cpu_allocation == 1.0  # shares mode: a quota is not the shares allocation
    assert any("gone" in w for w in source.last_warnings)


def test_prometheus_failure_is_a_source_error() -> None:
    import requests  # noqa: PLC0415

    prom = Prometheus(error=requests.exceptions.ConnectionError("refused"))
    source = DockerSnapshotSource("http://127.0.0.1:1", SETTINGS, prometheus=prom,
                                  clients=clients(a=FakeApi({}), b=FakeApi({})))
    try:
        with pytest.raises(SourceError, match=r"query_range .* failed \(connection\)"):
            source.snapshot([flowcon()])
    finally:
        source.close()


def test_an_unreachable_host_is_left_out_with_a_warning() -> None:
    class Down(FakeClient):
        def info(self) -> dict[str, Any]:
            raise docker.errors.APIError("engine restarting")

    stats = DockerStats(SETTINGS, clients=cast(Any, {"a": FakeClient(FakeApi({})),
                                                     "b": Down(FakeApi({}))}))
    try:
        poll = stats.poll(at=1.0)
    finally:
        stats.close()
    assert [h.node for h in poll.hosts] == ["a"]
    assert poll.warnings[0].startswith("node b: engine unreachable or unreadable (APIError")


def held(cid: str, name: str, *, created: float, labels: dict[str, str] | None = None
         ) -> dict[str, Any]:
    """A container created and never started (what `docker create` leaves)."""
    return {"Id": cid, "Name": f"/{name}", "CreatedAt": created,
            "Created": rfc3339(created),
            "State": {"StartedAt": "0001-01-01T00:00:00Z", "Running": False,
                      "Status": "created"},
            "Config": {"Labels": {"policyd.io/managed": "true", **(labels or {})}},
            "HostConfig": {"CpuShares": 0, "CpuQuota": 0, "CpuPeriod": 0}}


def test_held_containers_are_the_snapshots_pending_jobs() -> None:
    now = 1_700_000_400.0
    running = inspect("c1", "job")
    running["Created"] = rfc3339(now - 300)
    a = FakeApi({"c1": running,
                 "h1": held("h1", "wait", created=now - 60, labels={"policyd.io/deadline": "1h"}),
                 "h2": held("h2", "job", created=now - 400)})  # a started copy's original
    b = FakeApi({"h3": held("h3", "wait", created=now - 30),
                 "h4": held("h4", "other", created=now - 10)})
    loss = series({"container": "job"}, [2.0, 1.0], [now - 20, now])
    source = DockerSnapshotSource("http://127.0.0.1:9090", SETTINGS, clients=clients(a=a, b=b),
                                  prometheus=Prometheus([loss]), clock=lambda: now)
    try:
        snap = source.snapshot([flowcon()])
    finally:
        source.close()
    assert [(p.id, p.node, p.submitted_at, dict(p.labels)) for p in snap.pending] == [
        ("other", "b", now - 10, {"policyd.io/managed": "true"}),
        ("wait", "a", now - 60, {"policyd.io/managed": "true", "policyd.io/deadline": "1h"})]
    (job,) = snap.containers
    assert (job.id, job.submitted_at) == ("job", pytest.approx(now - 300))
    assert any("held container wait is on a and b" in w for w in source.last_warnings)


def test_the_held_jobs_alone_come_from_the_engines_lists() -> None:
    """What the manager deciding from node reports asks for (`ReportedSource`): the same
    pending jobs as a snapshot's, from the engines' lists alone: no container inspected, no
    stats read, nothing asked of Prometheus."""
    now = 1_700_000_400.0
    running = inspect("c1", "job")
    a = FakeApi({"c1": running, "h1": held("h1", "wait", created=now - 60),
                 "h2": held("h2", "job", created=now - 400)})
    b = FakeApi({"h4": held("h4", "other", created=now - 10)})
    source = DockerSnapshotSource("http://127.0.0.1:9090", SETTINGS, clients=clients(a=a, b=b),
                                  prometheus=Prometheus([]), clock=lambda: now)
    a.inspect_container = b.inspect_container = None  # type: ignore[method-assign,assignment]
    try:
        pending = source.held([flowcon()])
    finally:
        source.close()
    assert [(p.id, p.node, p.submitted_at) for p in pending] == [
        ("other", "b", now - 10), ("wait", "a", now - 60)]  # "job" runs: not held
    assert a.stats_calls == b.stats_calls == []


@pytest.mark.parametrize(("labels", "speed", "problem"), [
    (["other=1", "policyd.io/speed=1.5"], 1.5, ""),
    ([], None, ""),
    (["policyd.io/speed=fast"], None, "engine label policyd.io/speed='fast' is not a positive"),
    (["policyd.io/speed=0"], None, "is not a positive number"),
])
def test_an_engines_speed_label(labels: list[str], speed: float | None, problem: str) -> None:
    got, why = engine_speed(labels)
    assert got == speed and (problem in why if problem else why == "")


def test_the_engines_speed_reaches_the_snapshots_nodes() -> None:
    fast = cast(docker.DockerClient, FakeClient(FakeApi({}), labels=["policyd.io/speed=2"]))
    odd = cast(docker.DockerClient, FakeClient(FakeApi({}), labels=["policyd.io/speed=-1"]))
    stats = DockerStats(SETTINGS, clients={"a": fast, "b": odd})
    try:
        poll = stats.poll(at=1000.0)
    finally:
        stats.close()
    assert {h.node: h.speed for h in poll.hosts} == {"a": 2.0, "b": None}
    assert any("node b: engine label policyd.io/speed='-1'" in w for w in poll.warnings)


# --- the cycle's queries in flight together (prometheus.max_concurrent_queries) ---------------

DELAY_SECONDS = 0.3
QUERIES = 3
"""A FlowCon cycle's: the loss, the steps and the progress ratio (CPU and facts: the engines)."""


class StatsSeen(FakeApi):
    """An engine noting, at its stats call, what the fake Prometheus was doing."""

    def __init__(self, prometheus: Stub) -> None:
        super().__init__({"c1": inspect("c1", "job")})
        self.prometheus = prometheus
        self.seen: list[tuple[bool, int]] = []

    def stats(self, cid: str, stream: bool, one_shot: bool) -> dict[str, Any]:
        self.seen.append(self.prometheus.seen_beside(QUERIES))
        return super().stats(cid, stream, one_shot)


@contextmanager
def on_engines(prometheus: Stub, workers: int
               ) -> Iterator[tuple[DockerSnapshotSource, StatsSeen]]:
    """The source on `prometheus` (served on 127.0.0.1) and on the engine a it yields."""
    engine = StatsSeen(prometheus)
    with serving(prometheus) as url:
        source = DockerSnapshotSource(url, SETTINGS, clients=clients(a=engine, b=FakeApi({})),
                                      retries=0, max_concurrent_queries=workers,
                                      clock=lambda: 1_700_000_400.0)
        try:
            yield source, engine
        finally:
            source.close()


def job_loss() -> dict[str, Any]:
    return envelope([series({"container": "job"}, [2.0, 1.5])])


@pytest.mark.parametrize(("workers", "at_once", "seen"), [
    pytest.param(1, 1, (False, QUERIES), id="one-after-the-other"),
    pytest.param(4, QUERIES, (True, 0), id="together")])
def test_the_queries_go_together_up_to_the_bound_and_the_engines_are_polled_meanwhile(
        workers: int, at_once: int, seen: tuple[bool, int]) -> None:
    prometheus = Stub(prometheus=job_loss(), query_delay_seconds=DELAY_SECONDS,
                      gather_queries=at_once)
    with on_engines(prometheus, workers) as (source, engine):
        snap = source.snapshot([flowcon()])
    assert prometheus.most_in_flight == at_once and prometheus.answered == QUERIES
    assert engine.seen == [seen]
    assert [c.id for c in snap.containers] == ["job"] and "c1" in source.stats.rings


@pytest.mark.parametrize(("workers", "polled"), [(1, False), (4, True)])
def test_a_failed_evaluation_query_leaves_the_cpu_rings_as_they_were(
        workers: int, polled: bool) -> None:
    # Together, the engines were polled beside the queries; the samples are not kept.
    prometheus = Stub(prometheus=job_loss(), query_faults={
        "policyd_training_loss": refused("no loss", DELAY_SECONDS)})
    with on_engines(prometheus, workers) as (source, engine), \
            pytest.raises(SourceError, match="no loss"):
        source.snapshot([flowcon()])
    assert bool(engine.stats_calls) == polled and source.stats.rings == {}


def test_a_failed_progress_query_is_still_a_warning_with_the_queries_together() -> None:
    prometheus = Stub(prometheus=job_loss(), query_faults={
        "policyd_training_steps_total": refused("no steps")})
    with on_engines(prometheus, 4) as (source, _):
        snap = source.snapshot([flowcon()])
    assert [c.id for c in snap.containers] == ["job"]
    assert source.last_warnings[0].startswith("no job's progress this cycle (forecasts say so)")
