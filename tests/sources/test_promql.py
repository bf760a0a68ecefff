"""The queries of one cycle: exact strings per profile, escaping, steps and ranges."""

from __future__ import annotations

import pytest

from policyd.sources import promql
from policyd.sources.settings import Matcher, cadvisor_docker, kubernetes, process
from tests.sources.builders import NOW, flowcon, queries, specon

TAGGED = 'label_replace({0}, "policyd_fact", "{1}", "__name__", ".*")'


def test_kubernetes_queries_are_exact() -> None:
    q = queries(kubernetes())
    sel = '{container!="",container!="POD"}'
    assert q.evaluation == "policyd_training_loss"
    assert q.cpu == ('rate(container_cpu_usage_seconds_total{container!="",container!="POD",'
                     'cpu="total"}[30s])')
    assert q.facts == " or ".join([
        TAGGED.format("machine_cpu_cores", "capacity"),
        TAGGED.format("container_start_time_seconds" + sel, "started_at"),
        TAGGED.format("container_spec_cpu_shares" + sel, "shares"),
        TAGGED.format("container_spec_cpu_quota" + sel, "quota"),
        TAGGED.format("container_spec_cpu_period" + sel, "period"),
        TAGGED.format("kube_pod_annotations", "annotations"),
    ])
    assert (q.steps, q.progress) == ("policyd_training_steps_total",
                                     "policyd_training_progress_ratio")
    assert (q.start_seconds, q.now_seconds, q.step_seconds, q.count) == (NOW - 100, NOW, 20, 5)


def test_docker_queries_are_exact() -> None:
    q = queries(cadvisor_docker())
    assert q.cpu == 'rate(container_cpu_usage_seconds_total{name!="",cpu="total"}[30s])'
    assert q.facts.startswith(TAGGED.format("machine_cpu_cores", "capacity") + " or ")
    assert TAGGED.format('container_spec_cpu_shares{name!=""}', "shares") in q.facts
    assert "kube_pod_annotations" not in q.facts


def test_process_queries_are_exact() -> None:
    q = queries(process(capacity_cores=4, job="train"))
    assert q.cpu == 'rate(process_cpu_seconds_total{job="train"}[30s])'
    assert q.facts == TAGGED.format('process_start_time_seconds{job="train"}', "started_at")


def test_rate_window_is_the_interval_when_it_holds_two_scrapes() -> None:
    assert queries(kubernetes(), interval_seconds=60).cpu.endswith("[60s])")
    assert queries(kubernetes(scrape_interval_seconds=5)).cpu.endswith("[20s])")


HOSTILE = [
    pytest.param('a"} or vector(1) or {x="', id="closes-the-matcher"),
    pytest.param("a\\\"} or vector(1)", id="backslash-then-quote"),
    pytest.param("line\nbreak\r\t", id="newlines"),
    pytest.param("ns.*|kube-system", id="regex-metacharacters"),
]


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_label_values_stay_one_string(value: str) -> None:
    text = promql.quote(value)
    assert text.startswith('"') and text.endswith('"')
    inner = text[1:-1]
    # Every quote inside is escaped, and no raw newline remains: the string cannot end early.
    assert "\n" not in inner and "\r" not in inner
    unescaped = inner.replace("\\\\", "")
    assert '"' not in unescaped.replace('\\"', "")
    assert bytes(inner, "utf-8").decode("unicode_escape") == value


def test_hostile_matcher_in_a_profile() -> None:
    settings = process(capacity_cores=4, job='a"} or vector(1) or {x="')
    q = queries(settings)
    assert q.cpu == r'rate(process_cpu_seconds_total{job="a\"} or vector(1) or {x=\""}[30s])'


def test_namespaces_become_an_escaped_regex_alternative() -> None:
    q = queries(kubernetes(), selector={"namespaces": ["team-a", 'x.*"} or vector(1)']})
    assert r'namespace=~"team-a|x\\.\\*\"\\} or vector\\(1\\)"' in q.cpu
    assert promql.regex_literal("a.b|c") == r"a\.b\|c"


def test_namespaces_are_ignored_when_one_policy_manages_all() -> None:
    q = promql.build_queries([flowcon(selector={"namespaces": ["a"]}), specon()], kubernetes(),
                             now_seconds=NOW)
    assert "namespace=~" not in q.cpu


def test_several_policies_share_step_and_longest_range() -> None:
    q = promql.build_queries([flowcon(), specon(interval_seconds=30, window_intervals=10)],
                             kubernetes(), now_seconds=NOW, intervals={"fc": 40.0})
    # fc backed off to 40 s; sc at 30 s: the step is the shorter, the range the longer, and it
    # is a whole number of steps so that the last step is `now`.
    assert q.step_seconds == 30
    assert q.start_seconds == NOW - 300
    assert q.allocation_mode == "shares"


def test_policies_with_different_evaluation_queries_are_refused() -> None:
    with pytest.raises(ValueError, match=r"must share spec\.evaluation\.query"):
        promql.build_queries([flowcon(), specon(evaluation={"query": "accuracy"})],
                             kubernetes(), now_seconds=NOW)


def test_quota_mode_reads_quota() -> None:
    assert queries(kubernetes(), mode="quota").allocation_mode == "quota"


@pytest.mark.parametrize(("seconds", "text"), [(20, "20s"), (20.0, "20s"), (1.5, "1500ms")])
def test_duration(seconds: float, text: str) -> None:
    assert promql.duration(seconds) == text


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="not a Prometheus label name"):
        Matcher('x"', "=", "y")
    with pytest.raises(ValueError, match="pair one to one"):
        promql.SourceSettings(profile="x", identity_labels=("a",),
                              evaluation_identity_labels=())
