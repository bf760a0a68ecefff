"""The queries of one cycle: exact strings per profile, escaping, steps and ranges."""

from __future__ import annotations

import pytest

from policyd.sources import promql
from policyd.sources.settings import Matcher, cadvisor_docker, kubernetes, process
from tests.sources.builders import NOW, flowcon, queries, specon

K8S_KEPT = "namespace, pod, container, node, id"
ANNOTATIONS = ("max by (namespace, pod, annotation_policyd_io_migrated, "
               "annotation_policyd_io_rebalanced, annotation_policyd_io_converged_at, "
               "annotation_policyd_io_last_action_at) (kube_pod_annotations)")


def test_kubernetes_queries_are_exact() -> None:
    q = queries(kubernetes())
    sel = '{container!="",container!="POD"}'
    assert q.evaluation == "policyd_training_loss"
    assert q.cpu == ('rate(container_cpu_usage_seconds_total{container!="",container!="POD",'
                     'cpu="total"}[30s])')
    assert q.facts == (
        ("capacity", "max by (node) (machine_cpu_cores)"),
        ("started_at", f"max by ({K8S_KEPT}) (container_start_time_seconds{sel})"),
        ("shares", f"max by ({K8S_KEPT}) (container_spec_cpu_shares{sel})"),
        ("annotations", ANNOTATIONS))
    assert (q.steps, q.progress) == ("policyd_training_steps_total",
                                     "policyd_training_progress_ratio")
    assert (q.start_seconds, q.now_seconds, q.step_seconds, q.count) == (NOW - 100, NOW, 20, 8)


def test_quota_mode_asks_for_the_limit_in_cores_and_not_the_shares() -> None:
    sel = '{container!="",container!="POD"}'
    q = queries(kubernetes(), mode="quota")
    assert dict(q.facts)["limit_cores"] == (
        f"max by ({K8S_KEPT}) (container_spec_cpu_quota{sel}) / "
        f"max by ({K8S_KEPT}) (container_spec_cpu_period{sel})")
    assert [fact for fact, _ in q.facts] == ["capacity", "started_at", "limit_cores",
                                             "annotations"]


def test_docker_queries_keep_every_label_for_the_container_labels() -> None:
    q = queries(cadvisor_docker())
    assert q.cpu == 'rate(container_cpu_usage_seconds_total{name!="",cpu="total"}[30s])'
    assert q.facts == (("capacity", "max by (instance) (machine_cpu_cores)"),
                       ("started_at", 'container_start_time_seconds{name!=""}'),
                       ("shares", 'container_spec_cpu_shares{name!=""}'))


def test_process_queries_are_exact() -> None:
    q = queries(process(capacity_cores=4, job="train"))
    assert q.cpu == 'rate(process_cpu_seconds_total{job="train"}[30s])'
    assert q.facts == (("started_at",
                        'max by (job, instance) (process_start_time_seconds{job="train"})'),)


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


def test_a_node_agent_asks_for_its_node_only() -> None:
    q = promql.build_queries([flowcon()], kubernetes(evaluation_node_label="node"),
                             now_seconds=NOW, node="w1")
    assert q.evaluation == 'policyd_training_loss{node="w1"}'
    assert 'container!="POD",node="w1",cpu="total"' in (q.cpu or "")
    facts = dict(q.facts)
    assert facts["capacity"] == 'max by (node) (machine_cpu_cores{node="w1"})'
    assert 'node="w1"' in facts["started_at"] and 'node="w1"' in facts["shares"]
    # kube-state-metrics' series carry no node: the pods with a container on the node
    assert facts["annotations"] == (
        f"{ANNOTATIONS} and on (namespace, pod) "
        'container_start_time_seconds{container!="",container!="POD",node="w1"}')
    assert (q.steps, q.progress) == ('policyd_training_steps_total{node="w1"}',
                                     'policyd_training_progress_ratio{node="w1"}')


def test_without_the_exporters_node_label_the_agent_reads_every_loss() -> None:
    q = promql.build_queries([flowcon(evaluation={"query": "avg(loss)"})], kubernetes(),
                             now_seconds=NOW, node="w1")
    assert q.evaluation == "avg(loss)" and q.steps == "policyd_training_steps_total"
    assert 'node="w1"' in (q.cpu or "")


def test_a_docker_node_is_every_scrape_target_that_names_it() -> None:
    settings = cadvisor_docker(node_names={"10.0.0.5:8080": "w1", "10.0.0.6:8080": "w2"})
    q = promql.build_queries([flowcon()], settings, now_seconds=NOW, node="w1")
    assert r'instance=~"10\\.0\\.0\\.5:8080|w1|w1:[0-9]+|\\[w1\\]:[0-9]+"' in (q.cpu or "")
