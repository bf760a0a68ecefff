"""The pod and node watches as the source's views of the pods and nodes (`PodWatch.running_now`,
`NodeWatch.nodes_now`, as an informer's cache): kept as a list would show them, forgotten when
the API server is lost, the pods' not used when several namespaces are watched in turn; and
the source and the daemon reading them instead of listing every pod and node each cycle."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kubernetes import client as k8s  # type: ignore[import-untyped]

from policyd.model.codec import snapshot_to_dict
from policyd.model.events import ContainerEvent
from policyd.sources.kubernetes_node_watch import NodeWatch
from policyd.sources.kubernetes_pod_facts import PodFacts, list_nodes, pod_facts
from policyd.sources.kubernetes_pod_watch import PodWatch
from policyd.sources.kubernetes_pods import KubernetesPodSource
from policyd.sources.merged_events import MergedEvents
from tests.kubernetes import world
from tests.kubernetes.builders import answer, apis, node, pod, raw
from tests.kubernetes.fake_apiserver import FakeApiServer
from tests.kubernetes.test_job_watch import NoSeries, wait_until, watch_open
from tests.kubernetes.test_source import FakePrometheus, FakeWatch
from tests.kubernetes.world import NS, served
from tests.sources.builders import flowcon


class Scope:
    namespaces: tuple[str, ...] = ()
    label_selector = ""
    container_name: str | None = None
    node_name: str | None = None


class TwoNamespaces(Scope):
    namespaces = ("ml", "other")


def listed(server: FakeApiServer) -> list[PodFacts]:
    """The running pods as one list shows them."""
    found = (pod_facts(p, None) for p in server.cluster.items("pods"))
    return sorted((f for f in found if f is not None and f.running), key=lambda f: f.id)


def seen(facts: list[PodFacts] | None) -> list[PodFacts]:
    return sorted(facts or [], key=lambda f: f.id)


@contextmanager
def watching(server: FakeApiServer) -> Iterator[PodWatch]:
    stop = threading.Event()
    with server.api_client() as api:
        watcher = PodWatch(k8s.CoreV1Api(api), Scope())
        thread = threading.Thread(target=watcher.watch, args=(lambda e: None, stop))
        thread.start()
        try:
            watch_open(server)
            yield watcher
        finally:
            stop.set()
            thread.join(5)
            assert not thread.is_alive()


def test_the_pod_watch_keeps_the_running_pods_as_a_list_would_show_them() -> None:
    with served() as (server, _):
        world.node_w2(server.cluster)
        world.resize_pod(server.cluster, "rs-done")
        with server.api_client() as api:
            assert PodWatch(k8s.CoreV1Api(api), Scope()).running_now() is None  # not running
        with watching(server) as watcher:
            assert seen(watcher.running_now()) == listed(server) != []
            world.resize_pod(server.cluster, "rs-stale")  # a pod created while watched
            wait_until(lambda: seen(watcher.running_now()) == listed(server))
            assert len(listed(server)) == 2
            path = f"/api/v1/namespaces/{NS}/pods/rs-done"
            server.cluster.handle("PATCH", path, {}, {"metadata": {"annotations": {
                "policyd.io/migrated": "true"}}})  # a marker the actuator writes
            wait_until(lambda: any(f.annotations.get("policyd.io/migrated") == "true"
                                   for f in watcher.running_now() or ()))
            assert seen(watcher.running_now()) == listed(server)
            server.cluster.handle("DELETE", path, {}, None)
            wait_until(lambda: [f.pod for f in seen(watcher.running_now())] == ["rs-stale"])
        assert watcher.running_now() is None  # stopped: no longer kept up to date


def test_a_lost_api_server_forgets_the_view_until_the_next_list() -> None:
    core, _, _ = apis()
    lists = [[pod("a")], [pod("b")]]
    answer(core.list_pod_for_all_namespaces, lambda **k: raw(
        {"metadata": {"resourceVersion": "10"}, "items": lists.pop(0)}))
    FakeWatch.calls = []
    FakeWatch.scripts = [[ConnectionResetError("the API server went away")]]
    stop = threading.Event()
    views: list[list[str] | None] = []
    watcher = PodWatch(core, Scope(), make_watch=FakeWatch)
    real_wait = stop.wait

    def wait(seconds: float | None = None) -> bool:
        if seconds is None:  # the helper thread that closes the watch on stop
            return real_wait()
        view = watcher.running_now()  # in the back-off, before the relist
        views.append(None if view is None else [f.pod for f in view])
        stop.set()
        return real_wait(0)
    stop.wait = wait  # type: ignore[method-assign,assignment]
    events: list[ContainerEvent] = []
    watcher.watch(events.append, stop)
    assert views == [None]


def test_what_the_watch_saw_before_a_loss_still_yields_the_difference_after_it() -> None:
    core, _, _ = apis()
    lists = [[pod("a")], [pod("b")]]
    answer(core.list_pod_for_all_namespaces, lambda **k: raw(
        {"metadata": {"resourceVersion": "10"}, "items": lists.pop(0)}))
    FakeWatch.calls = []
    FakeWatch.scripts = [[ConnectionResetError("gone")]]
    stop = threading.Event()
    seen_events: list[ContainerEvent] = []
    views: list[list[str] | None] = []
    watcher = PodWatch(core, Scope(), make_watch=FakeWatch, backoff_seconds=0.0)

    def on_event(event: ContainerEvent) -> None:
        seen_events.append(event)
        view = watcher.running_now()
        views.append(None if view is None else [f.pod for f in view])
        if len(seen_events) == 2:
            stop.set()
    watcher.watch(on_event, stop)
    assert [(e.kind, e.container) for e in seen_events] == [
        ("stopped", "ml/a/trainer"), ("started", "ml/b/trainer")]
    assert views == [["b"], ["b"]]  # the relist's view, current again


def test_with_several_namespaces_watched_in_turn_the_view_is_not_read() -> None:
    core, _, _ = apis()
    answer(core.list_namespaced_pod, lambda *a, **k: raw(
        {"metadata": {"resourceVersion": "10"}, "items": [pod("a")] if a[0] == "ml" else []}))
    FakeWatch.calls = []
    FakeWatch.scripts = [[{"type": "ADDED", "raw_object": pod("c")}]]
    stop = threading.Event()
    views: list[Any] = []
    watcher = PodWatch(core, TwoNamespaces(), make_watch=FakeWatch)

    def on_event(event: ContainerEvent) -> None:
        views.append((watcher.tracked() is not None, watcher.running_now()))
        stop.set()
    watcher.watch(on_event, stop)
    assert views == [(True, None)]


def test_the_source_takes_the_pods_from_the_view_and_lists_only_the_nodes() -> None:
    core, _, _ = apis()
    pods = [pod(), pod("train-2")]
    answer(core.list_pod_for_all_namespaces, lambda **k: raw(
        {"kind": "PodList", "metadata": {"resourceVersion": "5"}, "items": pods}))
    answer(core.list_node, lambda **k: raw({"kind": "NodeList", "items": [node()]}))
    view = [f for f in (pod_facts(p, None) for p in reversed(pods)) if f is not None]
    listing = KubernetesPodSource("http://prom", Scope(), core=core,
                                  prometheus=FakePrometheus(), clock=lambda: 1030.0)
    nodes = list_nodes(core)
    viewing = KubernetesPodSource("http://prom", Scope(), core=core,
                                  prometheus=FakePrometheus(), clock=lambda: 1030.0,
                                  pods_from=lambda: view, nodes_from=lambda: nodes)
    policies = [flowcon(interval_seconds=30)]
    expected = snapshot_to_dict(listing.snapshot(policies))
    assert snapshot_to_dict(viewing.snapshot(policies)) == expected
    assert core.list_pod_for_all_namespaces.call_count == 1  # the listing source's only
    assert core.list_node.call_count == 2  # list_nodes' above and the listing source's
    unknown = KubernetesPodSource("http://prom", Scope(), core=core,
                                  prometheus=FakePrometheus(), clock=lambda: 1030.0,
                                  pods_from=lambda: None)  # the watch keeps none: list
    assert snapshot_to_dict(unknown.snapshot(policies)) == expected
    assert core.list_pod_for_all_namespaces.call_count == 2


def lists(server: FakeApiServer, resource: str) -> int:
    """The list calls (not watches) of `resource` the server has had."""
    return len([r for r in server.requests
                if r["path"].endswith(f"/{resource}") and not r["query"].get("watch")])


def ticks(registry: Any) -> int:
    return int(registry.get_sample_value("policyd_ticks_total",
                                         {"policy": "fc", "result": "ok"}) or 0)


def ticks_until(registry: Any, count: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    labels = {"policy": "fc", "result": "ok"}
    while (registry.get_sample_value("policyd_ticks_total", labels) or 0) < count:
        assert time.monotonic() < deadline, "too few ticks"
        time.sleep(0.02)


def test_the_daemons_ticks_list_no_pods_nor_nodes_once_the_watches_have_listed() -> None:
    """A FlowCon policy ticking every 0.05 s with the listener as `kubernetes_parts` builds it
    (the pod and node watches, their views the source's `pods_from` and `nodes_from`): after
    the watches' lists, its ticks make no list of their own."""
    from prometheus_client import CollectorRegistry  # noqa: PLC0415

    from policyd.daemon.metrics import DaemonMetrics  # noqa: PLC0415
    from policyd.daemon.scheduler import Daemon  # noqa: PLC0415

    policy = flowcon(name="fc", interval_seconds=1)
    with served() as (server, clock), server.api_client() as api:
        world.node_w2(server.cluster)
        world.resize_pod(server.cluster, "rs-done")
        core = k8s.CoreV1Api(api)
        actuator = world.actuator_on(server, clock)
        scope = actuator.settings
        pods, nodes = PodWatch(core, scope), NodeWatch(core)
        source = KubernetesPodSource("http://127.0.0.1:9", scope, core=core,
                                     prometheus=NoSeries(), pods_from=pods.running_now,
                                     nodes_from=nodes.nodes_now)
        registry = CollectorRegistry()
        daemon = Daemon([policy], source=source, actuator=actuator,
                        events=MergedEvents(pods, nodes),
                        metrics=DaemonMetrics(registry), loop_seconds=0.05,
                        interval_scale=0.05)
        daemon.start()
        try:
            watch_open(server, 2)  # the pods' and the nodes'
            # one tick may have started before the watch listed (and listed itself): one tick
            # more, and every tick after it starts with the watch's view
            ticks_until(registry, ticks(registry) + 1)
            before = lists(server, "pods"), lists(server, "nodes")
            ticks_until(registry, ticks(registry) + 3)
        finally:
            daemon.shutdown()
    assert max(before) <= 3  # the watches' lists, and ticks' that came sooner
    assert (lists(server, "pods"), lists(server, "nodes")) == before



def test_the_node_watch_keeps_the_nodes_as_a_list_would_show_them() -> None:
    with served() as (server, _):
        world.node_w2(server.cluster)
        with server.api_client() as api:
            core = k8s.CoreV1Api(api)
            assert NodeWatch(core).nodes_now() is None  # not running
            stop = threading.Event()
            watcher, mine = NodeWatch(core), NodeWatch(core, "w2")  # a manager's, an agent's
            threads = [threading.Thread(target=w.watch, args=(lambda e: None, stop))
                       for w in (watcher, mine)]
            for thread in threads:
                thread.start()
            try:
                watch_open(server, 2)
                assert watcher.nodes_now() == list_nodes(core) == mine.nodes_now()
                world.hollow_1(server.cluster, cpu="3")  # a node that joins
                server.cluster.handle("PATCH", "/api/v1/nodes/w2", {}, {"metadata": {
                    "labels": {"policyd.io/speed": "1.5"}}})
                wait_until(lambda: watcher.nodes_now() == list_nodes(core))
                allocatable, labels = watcher.nodes_now() or ({}, {})
                assert allocatable["hollow-1"] == 3.0
                assert labels["w2"]["policyd.io/speed"] == "1.5"
                wait_until(lambda: mine.nodes_now() == list_nodes(core, "w2"))
                assert list((mine.nodes_now() or ({}, {}))[0]) == ["w2"]  # its own only
            finally:
                stop.set()
                for thread in threads:
                    thread.join(5)
            assert watcher.nodes_now() is None  # stopped: no longer kept up to date


def test_a_watch_that_goes_silent_forgets_the_view() -> None:
    """A watch connection that stays open but carries nothing more (a half-open TCP
    connection: an API server or load balancer gone without closing it) is an API server
    lost too. Its window ends on the server's side, so nothing past it may be waited for:
    the read times out a window later, and the view is forgotten until a list succeeds,
    rather than read as current for as long as the connection hangs."""
    import json  # noqa: PLC0415
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: PLC0415

    hang = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if "watch=true" in self.path.lower():  # headers, then silence: no event, no end
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self.wfile.flush()
                hang.wait(30)
                return
            data = json.dumps({"kind": "PodList", "metadata": {"resourceVersion": "10"},
                               "items": [pod("a")]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    serving = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                               daemon=True)
    serving.start()
    conf = k8s.Configuration()
    conf.host = f"http://127.0.0.1:{httpd.server_address[1]}"
    stop = threading.Event()
    try:
        with k8s.ApiClient(conf) as api:
            watcher = PodWatch(k8s.CoreV1Api(api), Scope(), window_seconds=1,
                               backoff_seconds=60.0)
            thread = threading.Thread(target=watcher.watch, args=(lambda e: None, stop))
            thread.start()
            wait_until(lambda: watcher.running_now() is not None)
            wait_until(lambda: watcher.running_now() is None, timeout=8.0)
            stop.set()
            thread.join(5)
            assert not thread.is_alive()
    finally:
        stop.set()
        hang.set()
        httpd.shutdown()
        httpd.server_close()
