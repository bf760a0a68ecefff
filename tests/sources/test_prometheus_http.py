"""FastPrometheusConnect against the client it stands in for: the same requests (retries
included), the same results and the same exceptions, answer for answer (`responses`; nothing
leaves the process)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
import requests
import responses
from prometheus_api_client.prometheus_connect import PrometheusConnect

from policyd.clients.http_access import HttpAccess
from policyd.sources.http import retry_policy
from policyd.sources.matrix import Matrix, read_matrix
from policyd.sources.prometheus_connect import connect_prometheus
from policyd.sources.prometheus_http import FastPrometheusConnect
from tests.sources.builders import envelope, series

URL = "http://prometheus.test:9090"
RANGE, INSTANT = f"{URL}/api/v1/query_range", f"{URL}/api/v1/query"
START, END = datetime(2024, 1, 1, 0, 0, 0, 400_000, tzinfo=UTC), datetime(2024, 1, 1, 0, 1, 40,
                                                                          tzinfo=UTC)
MATRIX = envelope([series({"pod": "p1"}, [2.0, 1.5, float("nan")], [1.0, 2.0, 3.0])])

ANSWERS = [
    pytest.param([(200, json.dumps(MATRIX))], id="matrix"),
    pytest.param([(200, json.dumps(envelope([], "vector")))], id="empty-vector"),
    pytest.param([(200, '{"status": "success", "data": {"result": [NaN]}}')],
                 id="NaN-only-the-stdlib-decodes"),
    pytest.param([(200, "<html>proxy</html>")], id="not-json"),
    pytest.param([(200, "")], id="empty-body"),
    pytest.param([(200, json.dumps({"status": "success"}))], id="no-data"),
    pytest.param([(200, "[1, 2]")], id="a-list"),
    pytest.param([(400, json.dumps({"status": "error", "errorType": "bad_data",
                                    "error": "parse error"}))], id="400"),
    pytest.param([(503, "busy"), (200, json.dumps(MATRIX))], id="503-then-retried"),
    pytest.param([(500, "oops")] * 3, id="500-until-retries-run-out"),
]


def client(kind: type[PrometheusConnect]) -> PrometheusConnect:
    return kind(url=URL, retry=retry_policy(2, 0), timeout=5)  # type: ignore[arg-type]


def outcome(call: Any) -> tuple[str, Any]:
    try:
        return "result", call()
    except Exception as exc:  # the kind and message are what is compared
        return type(exc).__name__, str(exc)


def run(kind: type[PrometheusConnect], answers: list[tuple[int, str]], instant: bool
        ) -> tuple[tuple[str, Any], list[str], list[Any]]:
    """The answers in order, to requests for Prometheus only: `responses` patches every
    session of the process, so a request of another test's thread still winding down is
    refused without taking an answer (an ordered registry would have given it one)."""
    left = list(answers)

    def answer(request: Any) -> tuple[int, dict[str, str], str]:
        status, body = left.pop(0)
        return status, {}, body

    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        rsps.add_callback(responses.GET, INSTANT if instant else RANGE, callback=answer)
        c = client(kind)
        if instant:
            got = outcome(lambda: c.custom_query("up", params={"time": "1700000000"}))
        else:
            got = outcome(lambda: c.custom_query_range(
                "rate(x[1m])", start_time=START, end_time=END, step="20",
                params={"end": "1704067300.5"}))
        ours = [call for call in rsps.calls if str(call.request.url).startswith(URL)]
        urls = [str(call.request.url) for call in ours]
        timeouts = [call.request.req_kwargs.get("timeout") for call in ours]
    return got, urls, timeouts


@pytest.mark.parametrize("instant", [False, True], ids=["query_range", "query"])
@pytest.mark.parametrize("answers", ANSWERS)
def test_same_requests_results_and_errors_as_the_client(
        answers: list[tuple[int, str]], instant: bool) -> None:
    expected = run(PrometheusConnect, answers, instant)
    got = run(FastPrometheusConnect, answers, instant)
    assert repr(got) == repr(expected)  # repr: NaN samples compare equal, types are shown


def test_a_compact_range_answer_is_read_from_its_bytes_as_the_client_decodes_it() -> None:
    """Servers write answers compactly: the range result is then a Matrix read from the bytes
    (`matrix_body`), the same series as `read_matrix` makes of the client's own result."""
    answer = [(200, json.dumps(MATRIX, separators=(",", ":")))]
    (kind, theirs), _, _ = run(PrometheusConnect, answer, instant=False)
    (_, ours), _, _ = run(FastPrometheusConnect, answer, instant=False)
    assert kind == "result" and isinstance(ours, Matrix)
    expected = read_matrix(theirs)
    assert ours.labels == expected.labels and ours.offsets.tolist() == [0, 3]
    assert ours.times.tobytes() == expected.times.tobytes()
    assert ours.values.tobytes() == expected.values.tobytes()


def test_a_body_that_is_not_json_raises_requests_own_error() -> None:
    with responses.RequestsMock() as rsps:
        rsps.add(responses.GET, INSTANT, body="<html>proxy</html>")
        with pytest.raises(requests.exceptions.JSONDecodeError, match="Expecting value"):
            client(FastPrometheusConnect).custom_query("up")


@pytest.mark.parametrize(("headers", "sent"), [
    pytest.param({}, "identity", id="uncompressed-by-default"),
    pytest.param({"accept-encoding": "gzip"}, "gzip", id="the-settings-headers-win"),
])
def test_answers_are_asked_uncompressed_unless_the_settings_say(headers: dict[str, str],
                                                                sent: str) -> None:
    with responses.RequestsMock() as rsps:
        rsps.add(responses.GET, INSTANT, status=200, body=json.dumps(envelope([], "vector")))
        made = connect_prometheus(URL, timeout_seconds=5, retries=0,
                                  access=HttpAccess(headers=headers))
        assert made.custom_query("up") == []
        assert rsps.calls[0].request.headers["Accept-Encoding"] == sent
