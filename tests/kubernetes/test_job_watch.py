"""The Job watch: a Job submitted held is reported at once as "submitted", named as the
snapshot names it, with the real client against the local fake API server and the recorded
Jobs; and `MergedEvents`, which runs it beside the pod watch."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kubernetes import client as k8s  # type: ignore[import-untyped]

from policyd.model import PendingJob
from policyd.model.events import ContainerEvent
from policyd.sources.kubernetes_jobs import JobWatch, held, held_jobs
from policyd.sources.merged_events import MergedEvents
from tests.kubernetes import world
from tests.kubernetes.fake_apiserver import FakeApiServer
from tests.kubernetes.fake_cluster import response
from tests.kubernetes.world import NS, served


class Scope:
    namespaces: tuple[str, ...] = ()
    label_selector = "policyd.io/managed=true"


class Namespaced(Scope):
    namespaces = (NS,)


class Seen:
    """The events reported, and a wait for the n-th."""

    def __init__(self) -> None:
        self.events: list[ContainerEvent] = []
        self.changed = threading.Condition()

    def __call__(self, event: ContainerEvent) -> None:
        with self.changed:
            self.events.append(event)
            self.changed.notify_all()

    def wait(self, count: int, timeout: float = 5.0) -> list[tuple[str, str, str]]:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.events) >= count, timeout), \
                self.events
            return [(e.kind, e.container, e.node) for e in self.events]


def watch_open(server: FakeApiServer, count: int = 1) -> None:
    """Until `count` watch requests have been made."""
    deadline = time.monotonic() + 5
    while len([r for r in server.requests if r["query"].get("watch")]) < count:
        assert time.monotonic() < deadline, "no watch request"
        time.sleep(0.01)


@contextmanager
def watching(server: FakeApiServer, scope: Any = None, **options: Any
             ) -> Iterator[tuple[JobWatch, Seen]]:
    """A JobWatch on its own thread, its watch open; stopped (and joined) on the way out."""
    seen, stop = Seen(), threading.Event()
    with server.api_client() as api:
        watcher = JobWatch(k8s.BatchV1Api(api), scope or Scope(), **options)
        thread = threading.Thread(target=watcher.watch, args=(seen, stop))
        thread.start()
        try:
            watch_open(server)
            yield watcher, seen
        finally:
            stop.set()
            thread.join(5)
            assert not thread.is_alive()


@pytest.mark.parametrize("scope", [Scope(), Namespaced()], ids=["all-namespaces", "namespaced"])
def test_a_job_submitted_held_is_one_submitted_event_named_as_the_snapshot_names_it(
        scope: Scope) -> None:
    with served() as (server, _), watching(server, scope) as (_, seen):
        created = world.job(server.cluster, "job-a", suspend=True)
        assert seen.wait(1) == [("submitted", f"{NS}/job-a", "")]
        (pending,) = held_jobs([created], [])
        assert seen.events[0].container == pending.id  # what an Admit names
    watches = [r["path"] for r in server.requests if r["query"].get("watch")]
    assert set(watches) == {"/apis/batch/v1/jobs" if not scope.namespaces
                            else f"/apis/batch/v1/namespaces/{NS}/jobs"}


def test_running_unmanaged_moving_and_already_held_jobs_are_not_submissions() -> None:
    """Only a Job that becomes held after the first list is reported: the one held at start,
    a running one, one without policyd's label and one being moved are not; the last Job
    created (held) shows that the others' events were seen before it."""
    with served() as (server, _):
        world.job(server.cluster, "job-norepl", suspend=True)  # held before the watch
        with watching(server) as (_, seen):
            world.job(server.cluster, "job-a")  # running
            world.job(server.cluster, "job-ns", suspend=True,
                      labels={"policyd.io/managed": None})
            world.job(server.cluster, "job-a", suspend=True, named="moving",
                      labels={"policyd.io/migrating": "true"})
            world.job(server.cluster, "job-a", suspend=True, named="last")
            assert seen.wait(1) == [("submitted", f"{NS}/last", "")]
            time.sleep(0.2)  # nothing else comes
            assert len(seen.events) == 1


def test_a_job_is_reported_once_per_time_it_becomes_held() -> None:
    """Its later changes while held are not new submissions; once admitted (running) and
    suspended again with no pod left, it is held anew and reported again."""
    with served() as (server, clock), watching(server) as (_, seen):
        world.job(server.cluster, "job-a", suspend=True)
        seen.wait(1)
        patch = server.cluster.handle
        patch("PATCH", f"/apis/batch/v1/namespaces/{NS}/jobs/job-a", {},
              {"metadata": {"annotations": {"note": "x"}}})
        patch("PATCH", f"/apis/batch/v1/namespaces/{NS}/jobs/job-a", {},
              {"spec": {"suspend": False}})
        patch("PATCH", f"/apis/batch/v1/namespaces/{NS}/jobs/job-a", {},
              {"spec": {"suspend": True}})
        server.cluster.advance(10, clock)  # its pod's grace period: then no pod is left
        assert seen.wait(2) == [("submitted", f"{NS}/job-a", "")] * 2


def test_after_a_410_the_relist_reports_the_job_submitted_meanwhile() -> None:
    """The watch's version expires (as after a long outage) in the same instant a held Job is
    created: the watch never sees it, the relist does."""
    with served() as (server, _), watching(server) as (watcher, seen):
        with server.cluster.lock:
            world.job(server.cluster, "job-a", suspend=True)
            server.cluster.store.oldest = server.cluster.store.version
        assert seen.wait(1) == [("submitted", f"{NS}/job-a", "")]
        assert watcher.relists == 2


def test_stop_returns_at_once_not_at_the_end_of_the_window() -> None:
    with served() as (server, _):
        seen, stop = Seen(), threading.Event()
        with server.api_client() as api:
            watcher = JobWatch(k8s.BatchV1Api(api), Scope(), window_seconds=30)
            thread = threading.Thread(target=watcher.watch, args=(seen, stop))
            thread.start()
            watch_open(server)
            started = time.monotonic()
            stop.set()
            thread.join(5)
        assert not thread.is_alive() and time.monotonic() - started < 1.5


def test_the_watch_keeps_the_jobs_held_now_as_a_list_would_show_them() -> None:
    """What the manager's source reads instead of listing every Job (`held_now`): nothing
    until the watch has listed, then the held Jobs as they change (held before the watch,
    submitted during it, annotated while held, admitted), nothing again once it stops."""
    with served() as (server, _):
        world.job(server.cluster, "job-norepl", suspend=True)  # held before the watch
        with server.api_client() as api:
            assert JobWatch(k8s.BatchV1Api(api), Scope()).held_now() is None  # not running
        with watching(server) as (watcher, seen):
            world.job(server.cluster, "job-a", suspend=True)
            seen.wait(1)
            def seen_as(jobs: tuple[PendingJob, ...] | None) -> list[tuple[Any, ...]]:
                return [(p.id, p.submitted_at, dict(p.labels), dict(p.annotations))
                        for p in jobs or ()]

            assert seen_as(watcher.held_now()) == seen_as(
                held_jobs(server.cluster.items("jobs"), []))
            assert [p.id for p in watcher.held_now() or ()] == [f"{NS}/job-a",
                                                                 f"{NS}/job-norepl"]
            patch = server.cluster.handle
            patch("PATCH", f"/apis/batch/v1/namespaces/{NS}/jobs/job-a", {},
                  {"metadata": {"annotations": {"policyd.io/deadline": "2h"}}})
            wait_until(lambda: any(dict(p.annotations).get("policyd.io/deadline") == "2h"
                                   for p in watcher.held_now() or ()))
            patch("PATCH", f"/apis/batch/v1/namespaces/{NS}/jobs/job-a", {},
                  {"spec": {"suspend": False}})  # admitted
            wait_until(lambda: [p.id for p in watcher.held_now() or ()] == [
                f"{NS}/job-norepl"])
        assert watcher.held_now() is None  # stopped: no longer kept up to date


class TwoNamespaces(Scope):
    namespaces = (NS, "other")


def test_with_several_namespaces_watched_in_turn_the_held_jobs_are_listed_not_read() -> None:
    """One watch call per namespace, watched in turn: a Job admitted in one namespace would
    stay held in the view up to a window while the other is watched, so the source lists
    (as the pod watch's view: `ListWatch.view`), though the watch still reports
    submissions."""
    with served() as (server, _), watching(server, TwoNamespaces()) as (watcher, seen):
        world.job(server.cluster, "job-a", suspend=True)
        seen.wait(1)
        assert [e.container for e in seen.events] == [f"{NS}/job-a"]
        assert watcher.tracked() is not None  # kept, but not to be read
        assert watcher.held_now() is None


def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "not within the timeout"
        time.sleep(0.01)


def test_held_is_the_snapshots_rule_and_id() -> None:
    body = response("job_get_job-a.json")
    assert held(body) is None  # running (active 1, not suspended)
    body["spec"]["suspend"], body["status"] = True, {}
    tracked = held(body)
    assert tracked is not None
    assert (tracked.uid, tracked.container, tracked.node) == (
        body["metadata"]["uid"], f"{NS}/job-a", "")
    body["metadata"]["labels"]["policyd.io/migrating"] = "true"
    assert held(body) is None


def test_a_delivered_job_suspended_by_its_stop_is_never_offered_again() -> None:
    # What the stop leaves when the trainer did not exit 0 after its SIGTERM: the Job
    # annotated delivered, suspended, its pod gone (actuators/kubernetes/stop.py).
    body = response("job_get_job-a.json")
    body["spec"]["suspend"], body["status"] = True, {}
    body["metadata"].setdefault("annotations", {})["policyd.io/delivered"] = "1700000000"
    warnings: list[str] = []
    assert held(body) is None
    assert held_jobs([body], warnings) == () and warnings == []


# --- MergedEvents -------------------------------------------------------------------------

class Emits:
    """An event source that reports `containers` and then waits for `stop`, or fails."""

    def __init__(self, *containers: str, fail: bool = False) -> None:
        self.containers, self.fail = containers, fail
        self.returned = threading.Event()

    def watch(self, on_event: Callable[[ContainerEvent], None], stop: threading.Event) -> None:
        try:
            for name in self.containers:
                on_event(ContainerEvent(kind="submitted", container=name, node="", time=0.0))
            if self.fail:
                raise RuntimeError("broken")
            stop.wait()
        finally:
            self.returned.set()


def test_merged_events_run_every_source_until_stop_and_join_them() -> None:
    sources = (Emits("a", "b"), Emits("c", fail=True), Emits("d"))
    seen, stop = Seen(), threading.Event()
    thread = threading.Thread(target=MergedEvents(*sources).watch, args=(seen, stop))
    thread.start()
    seen.wait(4)
    assert sorted(e.container for e in seen.events) == ["a", "b", "c", "d"]
    assert sources[1].returned.is_set()  # the failing one is done; the others go on
    assert thread.is_alive() and not sources[0].returned.is_set()
    stop.set()
    thread.join(5)
    assert not thread.is_alive() and all(s.returned.is_set() for s in sources)


# --- the daemon ---------------------------------------------------------------------------

class NoSeries:
    """Prometheus with no training series yet (nothing runs): every query answers []."""

    def custom_query(self, query: str, params: Any = None) -> Any:
        return []

    def custom_query_range(self, query: str, start_time: Any, end_time: Any, step: str,
                           params: Any = None) -> Any:
        return []


def test_the_daemon_admits_a_job_submitted_held_at_once_not_an_hour_later() -> None:
    """A Deadline policy of a one-hour interval, the manager's listener (pod and Job watches)
    as `kubernetes_parts` builds it: its first cycle finds nothing held; a Job submitted held
    then is pinned and unsuspended within seconds, by the tick the watch's event ran, which
    read it from the watch (`held_from`), not from a list of every Job."""
    from prometheus_client import CollectorRegistry  # noqa: PLC0415

    from policyd.daemon.metrics import DaemonMetrics  # noqa: PLC0415
    from policyd.daemon.scheduler import Daemon  # noqa: PLC0415
    from policyd.engine.registry import KINDS  # noqa: PLC0415
    from policyd.engine.spec import API_VERSION  # noqa: PLC0415
    from policyd.sources.kubernetes_pod_watch import PodWatch  # noqa: PLC0415
    from policyd.sources.kubernetes_pods import KubernetesPodSource  # noqa: PLC0415

    policy = KINDS["Deadline"].document.model_validate({
        "apiVersion": API_VERSION, "kind": "Deadline", "metadata": {"name": "dl"},
        "spec": {"interval_seconds": 3600, "admission_cores": 0.5, "migrate": False}})
    with served() as (server, clock), server.api_client() as api:
        world.node_w2(server.cluster)
        core, batch = k8s.CoreV1Api(api), k8s.BatchV1Api(api)
        actuator = world.actuator_on(server, clock)
        scope = actuator.settings  # as kubernetes_parts: the actuator's settings are the scope
        jobs = JobWatch(batch, scope)
        source = KubernetesPodSource("http://127.0.0.1:9", scope, core=core, batch=batch,
                                     prometheus=NoSeries(), held_from=jobs.held_now)
        registry = CollectorRegistry()
        daemon = Daemon([policy], source=source, actuator=actuator,
                        metrics=DaemonMetrics(registry), loop_seconds=0.05,
                        events=MergedEvents(PodWatch(core, scope), jobs))
        daemon.start()
        try:
            ticks = {"policy": "dl", "result": "ok"}
            deadline = time.monotonic() + 10
            while not registry.get_sample_value("policyd_ticks_total", ticks):
                assert time.monotonic() < deadline, "no first cycle"
                time.sleep(0.02)
            watch_open(server, 2)  # the pods' and the Jobs'
            submitted = time.monotonic()
            world.job(server.cluster, "job-a", suspend=True,
                      annotations={"policyd.io/deadline": "2h"})
            while server.cluster.items("jobs", NS)[0]["spec"]["suspend"]:
                assert time.monotonic() - submitted < 10, "not admitted"
                time.sleep(0.02)
        finally:
            daemon.shutdown()
    assert (registry.get_sample_value("policyd_ticks_total", ticks) or 0) >= 2  # woken
    lists = [r for r in server.requests
             if r["path"].endswith("/jobs") and not r["query"].get("watch")]
    assert len(lists) <= 2  # the watch's first list, and the first cycle's if it came sooner
    job = server.cluster.get("jobs", NS, "job-a")
    assert job is not None and job["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["w2"]}]}]
