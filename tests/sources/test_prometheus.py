"""PrometheusSource over HTTP (the `responses` library; nothing leaves the process): every error
path is one SourceError, counted by kind, and the next call simply works again."""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import requests
import responses

from policyd.sources import SourceError, kubernetes
from policyd.sources.prometheus import PrometheusSource
from tests.sources.builders import NOW, envelope, fact, flowcon, series

URL = "http://prometheus.test:9090"
POD = {"namespace": "ns", "pod": "p1", "container": "train", "node": "w1"}
RANGE, INSTANT = f"{URL}/api/v1/query_range", f"{URL}/api/v1/query"


def source() -> PrometheusSource:
    return PrometheusSource(URL, kubernetes(), retries=2, retry_backoff_seconds=0,
                            clock=lambda: NOW + 0.7)


def asked_query(request: Any) -> str:
    (query,) = parse_qs(urlparse(request.url).query)["query"]
    return str(query)


def range_answers(rsps: responses.RequestsMock, answers: dict[str, list[tuple[int, Any]]]
                  ) -> None:
    """Answer each range query with the (status, body) of the first metric of `answers` it
    names, whatever the order the source asks in (the cycle's queries are in flight together);
    where a metric has several, each call takes the next, the last one repeating."""
    def answer(request: Any) -> tuple[int, dict[str, str], str]:
        query = asked_query(request)
        found = next(given for metric, given in answers.items() if metric in query)
        status, body = found.pop(0) if len(found) > 1 else found[0]
        return status, {}, body if isinstance(body, str) else json.dumps(body)
    rsps.add_callback(responses.GET, RANGE, callback=answer)


LOSS, CPU, STEPS = ("policyd_training_loss", "container_cpu_usage_seconds_total",
                    "policyd_training_steps_total")


def instant_answers(rsps: responses.RequestsMock, answers: dict[str, list[Any]]) -> None:
    """Answer each instant query with the samples of the first metric of `answers` it names
    (none: the empty vector), whatever the order the source asks in."""
    def answer(request: Any) -> tuple[int, dict[str, str], str]:
        query = asked_query(request)
        found = next((v for metric, v in answers.items() if metric in query), [])
        return 200, {}, json.dumps(envelope(found, "vector"))
    rsps.add_callback(responses.GET, INSTANT, callback=answer)


FACTS = {"machine_cpu_cores": [fact("capacity", {"node": "w1"}, 16)[1]],
         "container_start_time_seconds": [fact("started_at", POD, 1.0)[1]]}


HEALTHY_RANGES = {
    LOSS: envelope([series(POD, [2, 1.8, 1.6, 1.5, 1.4, 1.3])]),
    CPU: envelope([series({**POD, "cpu": "total"}, [1.0] * 6)]),
    STEPS: envelope([series(POD, [0, 40, 80, 120, 160, 200])])}


def healthy(rsps: responses.RequestsMock) -> None:
    range_answers(rsps, {metric: [(200, body)] for metric, body in HEALTHY_RANGES.items()})
    ratio = {"metric": {"__name__": "policyd_training_progress_ratio", **POD},
             "value": [NOW, "0.1"]}
    instant_answers(rsps, {**FACTS, "policyd_training_progress_ratio": [ratio]})


@responses.activate
def test_one_cycle_is_eight_small_queries_on_whole_second_steps() -> None:
    healthy(responses.mock)
    snap = source().snapshot([flowcon()])
    # loss, CPU, four facts (capacity, start, shares, annotations), steps, progress ratio
    assert len(responses.calls) == 8
    assert snap.time == NOW and len(snap.containers) == 1
    asked = {q["query"][0]: q for q in (parse_qs(urlparse(c.request.url).query)
                                        for c in responses.calls)}
    evaluation = asked["policyd_training_loss"]
    assert (evaluation["start"], evaluation["end"], evaluation["step"]) == (
        [str(int(NOW - 100))], [str(int(NOW))], ["20"])
    instants = [q for q in asked.values() if "step" not in q]
    assert [q["time"] for q in instants] == [[str(int(NOW))]] * 5
    assert sorted(query.split(") (", 1)[0] + ")" for query in asked
                  if query.startswith("max by") and "rate(" not in query) == [
        "max by (namespace, pod, annotation_policyd_io_migrated, "
        "annotation_policyd_io_rebalanced, annotation_policyd_io_converged_at, "
        "annotation_policyd_io_last_action_at)",
        "max by (namespace, pod, container, node, id)",
        "max by (namespace, pod, container, node, id)", "max by (node)"]
    assert asked["policyd_training_steps_total"]["step"] == ["20"]
    (job,) = snap.containers
    assert job.steps.values.tolist() == [0, 40, 80, 120, 160, 200]
    assert job.total_steps == 2000.0  # 200 steps done at a progress ratio of 0.1


@responses.activate
def test_a_cycle_without_progress_still_decides_and_says_so() -> None:
    rsps = responses.mock
    range_answers(rsps, {LOSS: [(200, HEALTHY_RANGES[LOSS])], CPU: [(200, HEALTHY_RANGES[CPU])],
                         STEPS: [(400, {"status": "error", "errorType": "bad_data",
                                        "error": "unknown function"})]})
    instant_answers(rsps, FACTS)
    src = source()
    snap = src.snapshot([flowcon()])
    (job,) = snap.containers
    assert job.steps.pairs() == [] and job.total_steps is None
    assert src.last_warnings[0].startswith("no job's progress this cycle (forecasts say so): ")
    assert "policyd_training_steps_total" in src.last_warnings[0]


ERRORS = [
    pytest.param(requests.exceptions.ConnectionError("refused"), None, "connection",
                 id="connection-refused"),
    pytest.param(requests.exceptions.ReadTimeout("slow"), None, "timeout", id="timeout"),
    pytest.param(None, (500, "oops"), "http", id="500-until-retries-run-out"),
    pytest.param(None, (400, json.dumps({"status": "error", "errorType": "bad_data",
                                         "error": "parse error at char 3"})), "bad_data",
                 id="400-bad-data"),
    pytest.param(None, (200, "<html>proxy</html>"), "bad_response", id="garbage-body"),
    pytest.param(None, (200, json.dumps({"status": "success"})), "bad_response",
                 id="json-without-data"),
    pytest.param(None, (200, json.dumps(envelope("x"))), "bad_response", id="result-not-a-list"),
    pytest.param(None, (403, "forbidden"), "auth", id="403"),
    pytest.param(None, (401, "Unauthorized"), "auth", id="401"),
    pytest.param(requests.exceptions.SSLError("certificate verify failed"), None, "tls",
                 id="tls"),
]


@pytest.mark.parametrize(("raise_", "answer", "kind"), ERRORS)
def test_errors_become_one_source_error_and_the_next_call_recovers(
        raise_: Exception | None, answer: tuple[int, str] | None, kind: str,
        caplog: pytest.LogCaptureFixture) -> None:
    src = source()
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        for url in (RANGE, INSTANT):
            if raise_ is not None:
                rsps.add(responses.GET, url, body=raise_)
            else:
                assert answer is not None
                rsps.add(responses.GET, url, status=answer[0], body=answer[1])
        with caplog.at_level(logging.ERROR), pytest.raises(SourceError) as info:
            src.snapshot([flowcon()])
    err = info.value
    assert err.kind == kind and src.errors_total == {kind: 1}
    assert URL in str(err) and "'policyd_training_loss'" in str(err) and "\n" not in str(err)
    assert len([r for r in caplog.records if r.levelno == logging.ERROR]) == 1
    with responses.RequestsMock() as rsps:
        healthy(rsps)
        assert len(src.snapshot([flowcon()]).containers) == 1
    assert src.errors_total == {kind: 1}


def test_bad_data_message_quotes_prometheus() -> None:
    with responses.RequestsMock() as rsps:
        rsps.add(responses.GET, RANGE, status=400, json={
            "status": "error", "errorType": "bad_data",
            "error": "exceeded maximum resolution of 11,000 points per timeseries"})
        with pytest.raises(SourceError, match="HTTP 400 bad_data: exceeded maximum"):
            source().snapshot([flowcon()])


def test_500_then_success_is_retried() -> None:
    with responses.RequestsMock() as rsps:
        range_answers(rsps, {LOSS: [(500, "overloaded"), (200, HEALTHY_RANGES[LOSS])],
                             CPU: [(200, envelope([]))], STEPS: [(200, envelope([]))]})
        instant_answers(rsps, {"machine_cpu_cores": FACTS["machine_cpu_cores"]})
        src = source()
        snap = src.snapshot([flowcon()])
    assert len(snap.containers) == 1 and not src.errors_total
    assert any("no CPU series" in w for w in src.last_warnings)


def test_empty_results_are_an_empty_snapshot_not_an_error() -> None:
    with responses.RequestsMock() as rsps:
        rsps.add(responses.GET, RANGE, json=envelope([]))
        rsps.add(responses.GET, RANGE, json=envelope([]))
        rsps.add(responses.GET, INSTANT, json=envelope([], "vector"))
        snap = source().snapshot([flowcon()])
    assert snap.containers == () and snap.nodes == ()


class FakeClient:
    """A client passed in at our own seam: records the datetimes it receives."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def custom_query(self, query: str, params: dict[str, Any] | None = None) -> Any:
        return []

    def custom_query_range(self, query: str, start_time: Any, end_time: Any, step: str,
                           params: dict[str, Any] | None = None) -> Any:
        self.calls.append({"start": start_time, "end": end_time, "step": step})
        return []


def test_datetimes_are_utc_aware() -> None:
    client = FakeClient()
    PrometheusSource(URL, kubernetes(), client=client, clock=lambda: NOW).snapshot([flowcon()])
    start = client.calls[0]["start"]
    assert start.tzinfo is not None and start.utcoffset().total_seconds() == 0
    assert start.timestamp() == NOW - 100
