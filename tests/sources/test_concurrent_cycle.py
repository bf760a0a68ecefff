"""A PrometheusSource cycle with its queries in flight together (`max_concurrent_queries`):
a fake client whose calls block until the test releases them shows the queries overlapping,
the first failure in the old order being the cycle's one SourceError, progress and metric
failures staying warnings, and nothing of a cycle running after it returned."""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import requests
import responses

from policyd.clients.http_access import HttpAccess
from policyd.engine.qoe import QoEPolicy
from policyd.engine.spec import API_VERSION, PolicyDocument
from policyd.model.codec import snapshot_to_dict
from policyd.sources import SourceError, kubernetes
from policyd.sources.prometheus import PrometheusSource
from policyd.sources.promql import build_queries
from tests.sources.builders import NOW, fact, flowcon, series

URL = "http://prometheus.test:9090"
Refused = requests.exceptions.ConnectionError
POD = {"namespace": "ns", "pod": "p1", "container": "train", "node": "w1"}
WAIT_SECONDS = 10.0


def qoe(**metrics: str) -> QoEPolicy:
    return QoEPolicy.model_validate({
        "apiVersion": API_VERSION, "kind": "QoE", "metadata": {"name": "q"},
        "spec": {"interval_seconds": 20, "window_intervals": 5, "alert_after_seconds": 100,
                 "metrics": metrics}})


def answer_to(query: str) -> Any:
    """A healthy one-job cluster's answer to `query` (range results as lists)."""
    if query.startswith("policyd_training_loss"):
        return [series(POD, [2, 1.8, 1.6, 1.5, 1.4, 1.3])]
    if "container_cpu_usage_seconds_total" in query:
        return [series({**POD, "cpu": "total"}, [1.0] * 6)]
    if query.startswith("policyd_training_steps_total"):
        return [series(POD, [0, 40, 80, 120, 160, 200])]
    if query.startswith("policyd_training_progress_ratio"):
        return [{"metric": {"__name__": "policyd_training_progress_ratio", **POD},
                 "value": [NOW, "0.1"]}]
    if "machine_cpu_cores" in query:
        return [fact("capacity", {"node": "w1"}, 16)[1]]
    if "container_start_time_seconds" in query and "kube_pod_annotations" not in query:
        return [fact("started_at", POD, 1.0)[1]]
    return []


class GatedClient:
    """A Prometheus client whose every call waits for `release` (unless `gated` is False),
    then answers `answer_to(query)` or raises what `failing` holds for a query containing its
    key. It records the queries asked, in the order they arrived, how many were in flight at
    most, the threads that asked, and whether the garbage collector was on during a call."""

    def __init__(self, *, gated: bool = True,
                 failing: dict[str, Exception] | None = None,
                 held: set[str] | None = None) -> None:
        self.gated = gated
        self.failing = failing or {}
        self.held = held
        """With `gated`, only queries containing one of these wait (None: every query)."""
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.asked: list[str] = []
        self.done: list[str] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.threads: set[str] = set()
        self.gc_enabled: list[bool] = []

    def _call(self, query: str) -> Any:
        with self.lock:
            self.asked.append(query)
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            self.threads.add(threading.current_thread().name)
            self.gc_enabled.append(gc.isenabled())
        try:
            if self.gated and (self.held is None or any(h in query for h in self.held)):
                assert self.release.wait(WAIT_SECONDS), "never released"
            for key, error in self.failing.items():
                if key in query:
                    raise error
            return answer_to(query)
        finally:
            with self.lock:
                self.in_flight -= 1
                self.done.append(query)

    def custom_query(self, query: str, params: dict[str, Any] | None = None) -> Any:
        return self._call(query)

    def custom_query_range(self, query: str, start_time: Any, end_time: Any, step: str,
                           params: dict[str, Any] | None = None) -> Any:
        return self._call(query)

    def wait_for(self, test: Callable[[], bool]) -> None:
        deadline = time.monotonic() + WAIT_SECONDS
        while not test():
            assert time.monotonic() < deadline, f"waited in vain; asked {self.asked}"
            time.sleep(0.005)


def source(client: GatedClient, workers: int = 4) -> PrometheusSource:
    return PrometheusSource(URL, kubernetes(), client=client, clock=lambda: NOW,
                            max_concurrent_queries=workers)


class Cycle:
    """`source.observe(policies)` in a thread of its own, so the test can hold its queries."""

    def __init__(self, src: PrometheusSource, policies: list[PolicyDocument]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(src, policies))
        self.thread.start()

    def _run(self, src: PrometheusSource, policies: list[PolicyDocument]) -> None:
        try:
            self.result = src.observe(policies)
        except BaseException as exc:  # handed to the test
            self.error = exc

    def join(self) -> Any:
        self.thread.join(WAIT_SECONDS)
        assert not self.thread.is_alive(), "the cycle did not end"
        if self.error is not None:
            raise self.error
        return self.result


def order_of(policies: list[PolicyDocument]) -> list[str]:
    """The cycle's queries in the order the sequential source sends them."""
    q = build_queries(policies, kubernetes(), now_seconds=NOW)
    facts = [query for _, query in q.facts]
    progress = [q.steps, q.progress] if q.steps and q.progress else []
    cpu = [q.cpu] if q.cpu else []
    return [q.evaluation, *cpu, *facts, *progress, *(query for _, query in q.metrics)]


def test_the_queries_are_in_flight_together_up_to_the_bound() -> None:
    client = GatedClient()
    cycle = Cycle(source(client, workers=4), [flowcon()])
    client.wait_for(lambda: client.in_flight == 4)  # four sent before any answer came back
    time.sleep(0.05)
    assert client.in_flight == 4 and len(client.asked) == 4  # and no more than four
    assert sorted(client.asked) == sorted(order_of([flowcon()])[:4])  # the first four
    client.release.set()
    parsed = cycle.join()
    assert sorted(client.asked) == sorted(order_of([flowcon()]))  # all eight, each once
    assert client.most_in_flight == 4 and len(client.threads) == 4
    (job,) = parsed.snapshot.containers
    assert job.total_steps == 2000.0 and parsed.warnings == ()


def test_one_worker_is_the_old_sequential_cycle_in_the_calling_thread() -> None:
    client = GatedClient(gated=False)
    src = source(client, workers=1)
    parsed = src.observe([flowcon()])
    assert client.asked == order_of([flowcon()]) and client.most_in_flight == 1
    assert client.threads == {threading.current_thread().name}
    assert len(parsed.snapshot.containers) == 1


def test_the_answers_are_the_sequential_cycles_whatever_the_order_they_arrive_in() -> None:
    sequential = source(GatedClient(gated=False), workers=1).observe([flowcon()])
    client = GatedClient(held={"policyd_training_loss"})  # the first query answers last
    cycle = Cycle(source(client, workers=4), [flowcon()])
    client.wait_for(lambda: len(client.done) == 7)
    client.release.set()
    together = cycle.join()
    assert client.done[-1] == "policyd_training_loss"
    assert together.warnings == sequential.warnings
    assert snapshot_to_dict(together.snapshot) == snapshot_to_dict(sequential.snapshot)


REQUIRED = [pytest.param(key, id=name) for name, key in (
    ("evaluation", "policyd_training_loss"), ("cpu", "container_cpu_usage_seconds_total"),
    ("capacity", "machine_cpu_cores"), ("started-at", "container_start_time_seconds"),
    ("shares", "container_spec_cpu_shares"), ("annotations", "kube_pod_annotations"))]


@pytest.mark.parametrize("failing", REQUIRED)
def test_a_failed_required_query_is_the_same_one_source_error_as_one_at_a_time(
        failing: str, caplog: pytest.LogCaptureFixture) -> None:
    def refused() -> dict[str, Exception]:
        return {failing: Refused("refused")}

    errors: list[str] = []
    for workers in (1, 4):
        src = source(GatedClient(gated=False, failing=refused()), workers=workers)
        caplog.clear()
        with caplog.at_level(logging.ERROR), pytest.raises(SourceError) as caught:
            src.observe([flowcon()])
        assert caught.value.kind == "connection" and src.errors_total == {"connection": 1}
        assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 1
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and URL in errors[0]


def test_the_first_failure_in_the_old_order_wins_not_the_first_to_arrive() -> None:
    # The annotations query fails at once; the evaluation query, held, fails after it: the
    # cycle's error is the evaluation's, as when they were sent one after the other.
    client = GatedClient(held={"policyd_training_loss"},
                         failing={"kube_pod_annotations": Refused("reset"),
                                  "policyd_training_loss": Refused("refused")})
    src = source(client)
    cycle = Cycle(src, [flowcon()])
    client.wait_for(lambda: "kube_pod_annotations" in " ".join(client.done))
    client.release.set()
    with pytest.raises(SourceError) as caught:
        cycle.join()
    assert caught.value.query == "policyd_training_loss" and "refused" in str(caught.value)
    assert src.errors_total == {"connection": 1}


def test_a_failed_cycle_returns_only_once_its_other_queries_are_done(
        caplog: pytest.LogCaptureFixture) -> None:
    # The evaluation query fails at once while the CPU query is still out: the cycle waits
    # for it (nothing of a cycle runs after it returned), and the queries no thread had
    # started are not sent at all.
    client = GatedClient(held={"container_cpu_usage_seconds_total", "machine_cpu_cores"},
                         failing={"policyd_training_loss": Refused("refused")})
    with caplog.at_level(logging.ERROR):
        cycle = Cycle(source(client, workers=2), [flowcon()])
        client.wait_for(lambda: any(r.levelno == logging.ERROR for r in caplog.records))
        time.sleep(0.2)  # the cycle's thread, past its log line, cancels what is not started
        assert cycle.thread.is_alive() and client.in_flight >= 1
        client.release.set()
        with pytest.raises(SourceError) as caught:
            cycle.join()
    assert caught.value.query == "policyd_training_loss"
    assert client.in_flight == 0
    order = order_of([flowcon()])
    # Two threads send the first two queries at once, so either may reach the client first
    # (a CI run saw the CPU query recorded before the loss query).
    assert order[0] in client.asked[:2] and set(client.asked) <= set(order[:3])


def test_progress_and_metric_failures_stay_warnings_with_the_queries_together() -> None:
    policies: list[PolicyDocument] = [flowcon(), qoe(rps="rate(requests_total[1m])")]
    client = GatedClient(failing={"policyd_training_steps_total": Refused("reset"),
                                  "requests_total": Refused("refused")})
    src = source(client)
    cycle = Cycle(src, policies)
    client.wait_for(lambda: client.in_flight == 4)
    client.release.set()
    parsed = cycle.join()
    assert len(client.asked) == len(order_of(policies)) == 9
    (job,) = parsed.snapshot.containers
    assert job.total_steps is None and not job.metrics
    assert parsed.warnings[0].startswith("no job's progress this cycle (forecasts say so): ")
    assert any(w.startswith("metric rps: not measured this cycle: ") for w in parsed.warnings)
    assert src.errors_total == {}


def test_the_collector_stays_paused_in_every_query_thread_and_is_back_after() -> None:
    assert gc.isenabled()
    client = GatedClient(gated=False)
    for _ in range(3):
        source(client).observe([flowcon()])
    assert client.gc_enabled == [False] * 24 and gc.isenabled()


def test_a_rotated_bearer_token_is_sent_by_every_query_thread(tmp_path: Any) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    src = PrometheusSource(URL, kubernetes(), clock=lambda: NOW, retries=0,
                           access=HttpAccess(bearer_token_file=token), max_concurrent_queries=4)
    sent: list[tuple[str, str]] = []

    def answer(request: Any) -> tuple[int, dict[str, str], str]:
        sent.append((threading.current_thread().name, request.headers["Authorization"]))
        time.sleep(0.01)  # long enough for the threads to overlap
        return 200, {}, '{"status":"success","data":{"resultType":"vector","result":[]}}'

    with responses.RequestsMock() as rsps:
        for endpoint in ("query", "query_range"):
            rsps.add_callback(responses.GET, f"{URL}/api/v1/{endpoint}", callback=answer)
        src.observe([flowcon()])
        token.write_text("second\n")  # rotated between two cycles: no restart
        src.observe([flowcon()])
    first, second = sent[:8], sent[8:]
    assert {header for _, header in first} == {"Bearer first"}
    assert {header for _, header in second} == {"Bearer second"} and len(second) == 8
    assert len({thread for thread, _ in sent}) == 4  # four threads, each its own session
