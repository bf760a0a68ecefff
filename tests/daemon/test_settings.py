"""The settings file: every field parsed, every problem reported at once, exactly, and the
documentation listing every field of the models with its default."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticUndefined

from policyd.daemon import (
    AlertmanagerSection,
    DaemonSettings,
    DockerHost,
    DockerSection,
    HttpSettings,
    KubernetesSection,
    PrometheusSettings,
    SettingsError,
    SimulationSettings,
    load_settings,
    load_settings_text,
)
from policyd.daemon.settings import LeaseSection

ROOT = Path(__file__).resolve().parents[2]


def problems(text: str) -> list[str]:
    with pytest.raises(SettingsError) as caught:
        load_settings_text(text, "s.yaml", base=Path("/etc/policyd"))
    return [str(p) for p in caught.value.problems]


def test_the_documented_example_is_valid_and_complete() -> None:
    settings = load_settings(ROOT / "deploy" / "settings.example.yaml")
    assert settings.policies == (ROOT / "policies" / "flowcon.yaml",)
    assert settings.backend == "simulated"
    assert settings.prometheus.url == "http://127.0.0.1:9090"
    assert settings.prometheus.node_names == {"127.0.0.1:8080": "w1"}
    assert settings.docker.hosts["w1"] == DockerHost(url="unix:///var/run/docker.sock")
    assert settings.docker.hosts["w2"].tls_key == ROOT / "deploy" / "certs" / "key.pem"
    assert settings.alertmanager == AlertmanagerSection(url="http://127.0.0.1:9093")
    assert settings.http == HttpSettings()
    assert settings.simulation == SimulationSettings()
    # Every field of the file is documented (the table test below checks the defaults too).
    docs = (ROOT / "docs" / "settings.md").read_text()
    for field in ("--node", "--leader-elect"):
        assert f"`{field}`" in docs, field


# --- docs/settings.md says exactly what the models say ------------------------------------

def section_tables(markdown: str) -> dict[str, dict[str, str]]:
    """`## \\`section\\`` (or `## Top level`: "") -> {field: its default cell}."""
    tables: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in markdown.splitlines():
        heading = re.match(r"## (?:`(\w+)`|Top level)", line)
        if heading:
            current = tables.setdefault(heading[1] or "", {})
        elif current is not None and (row := re.match(r"\| `(\w+)` \| (.*?) \|", line)):
            current[row[1]] = row[2]
    return tables


def as_yaml(value: object) -> str:
    """A default as the docs write it: `10`, `true`, `[]`, `{}`, `policyd.io/managed=true`."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, tuple | list):
        return "[" + ", ".join(map(as_yaml, value)) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {as_yaml(v)}" for k, v in value.items()) + "}"
    return str(value)


def section_model(annotation: object) -> type[BaseModel] | None:
    for member in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(member, type) and issubclass(member, BaseModel):
            return member
    return None


def documented_fields() -> list[tuple[str, str, Any]]:
    """(section, field, default) for every field a settings file may hold."""
    found = []
    for name, info in DaemonSettings.model_fields.items():
        model = section_model(info.annotation)
        if model is None:
            found.append(("", name, info.get_default(call_default_factory=True)))
            continue
        found.append(("", name, model))
        found.extend((name, field, sub.get_default(call_default_factory=True))
                     for field, sub in model.model_fields.items())
    return found


@pytest.mark.parametrize(("section", "field", "default"), documented_fields(),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_docs_list_every_field_with_its_default(section: str, field: str,
                                                default: object) -> None:
    docs = (ROOT / "docs" / "settings.md").read_text()
    tables = section_tables(docs)
    if isinstance(default, type):  # a section: it has a heading and a table of its own
        assert tables.get(field), f"no `## \\`{field}\\`` table"
        return
    cell = tables[section].get(field)
    assert cell is not None, f"{section}.{field} is not in its table"
    if default is PydanticUndefined:
        assert cell == "required"
    elif default is None:  # said in words: none, this machine's cores, the scenario's own
        assert not cell.startswith("`"), cell
    else:
        assert cell == f"`{as_yaml(default)}`"
    example = (ROOT / "deploy" / "settings.example.yaml").read_text()
    assert re.search(rf"^[ #]*{field}:", example, re.MULTILINE), f"{field} not in the example"


# --- good files -------------------------------------------------------------------------------

def test_empty_file_means_defaults() -> None:
    settings = load_settings_text("# nothing\n", "s.yaml")
    assert settings.backend == "simulated" and settings.policies == ()
    assert settings.simulation.speed == 20.0 and settings.http.port == 9097
    assert settings == DaemonSettings()


def test_null_means_the_default() -> None:
    settings = load_settings_text(
        "policies:\nprometheus:\n  timeout_seconds:\n  node_names: ~\nkubernetes:\n"
        "http: {port: null}\nsimulation: {speed: null, seed: null}\nalertmanager: null\n",
        "s.yaml")
    assert settings == DaemonSettings()


def test_paths_are_relative_to_the_settings_file(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "settings.yaml"
    path.parent.mkdir()
    path.write_text("policies: [p.yaml, ../q.yaml, /abs/r.yaml]\nsimulation: {speed: max}\n"
                    "docker:\n  state_path: state/docker.json\n  hosts:\n"
                    "    w1: {url: 'tcp://h:2376', tls: {ca: ca.pem, cert: c.pem, key: k.pem}}\n")
    settings = load_settings(path)
    assert settings.policies == (tmp_path / "conf" / "p.yaml", tmp_path / "q.yaml",
                                 Path("/abs/r.yaml"))
    assert settings.simulation.speed is None
    assert settings.docker.state_path == tmp_path / "conf" / "state" / "docker.json"
    host = settings.docker.hosts["w1"]
    assert (host.tls_ca, host.tls_cert, host.tls_key) == (
        tmp_path / "conf" / "ca.pem", tmp_path / "conf" / "c.pem", tmp_path / "conf" / "k.pem")


def test_docker_backend() -> None:
    settings = load_settings_text(
        "policies: [p.yaml]\nbackend: docker\nprometheus: {url: 'http://prom:9090'}\n"
        "docker:\n  hosts:\n    w1: {url: 'tcp://h:2376', tls: {ca: ca.pem}}\n",
        "s.yaml", base=Path("/etc/policyd"))
    assert settings.backend == "docker"
    assert settings.docker.hosts["w1"].tls_ca == Path("/etc/policyd/ca.pem")


def test_cadvisor_rest_profile() -> None:
    settings = load_settings_text(
        "policies: [p.yaml]\nbackend: docker\nprometheus:\n  url: http://prom:9090\n"
        "  profile: cadvisor-rest\n  cadvisor: {w1: 'http://10.0.0.1:8080', "
        "w2: 'https://10.0.0.2:8443'}\n"
        "docker: {hosts: {w1: 'tcp://10.0.0.1:2376', w2: 'tcp://10.0.0.2:2376'}}\n", "s.yaml")
    assert settings.prometheus.profile == "cadvisor-rest"
    assert settings.prometheus.cadvisor == {"w1": "http://10.0.0.1:8080",
                                            "w2": "https://10.0.0.2:8443"}


def test_kubernetes_backend() -> None:
    settings = load_settings_text(
        "policies: [p.yaml]\nbackend: kubernetes\n"
        "prometheus: {url: 'http://prom:9090', profile: kubernetes}\n"
        "kubernetes:\n  namespace: ops\n  qps: 20\n  burst: 40\n"
        "  namespaces: [training, research]\n  label_selector: team=ml,policyd.io/managed\n"
        "  lease_name: mine\n  lease_duration_seconds: 30\n  renew_deadline_seconds: 20\n"
        "  retry_period_seconds: 4\n",
        "s.yaml", base=Path("/etc/policyd"))
    assert settings.backend == "kubernetes"
    assert settings.kubernetes == KubernetesSection(
        namespace="ops", qps=20, burst=40, namespaces=("training", "research"),
        label_selector="team=ml,policyd.io/managed", lease_name="mine",
        lease_duration_seconds=30, renew_deadline_seconds=20, retry_period_seconds=4)


def test_kubernetes_defaults() -> None:
    settings = load_settings_text(
        "policies: [p.yaml]\nbackend: kubernetes\nprometheus: {url: 'http://prom:9090'}\n",
        "s.yaml")
    assert settings.kubernetes == KubernetesSection()
    assert (settings.kubernetes.namespace, settings.kubernetes.lease_name,
            settings.kubernetes.label_selector, settings.kubernetes.namespaces) == (
        "policyd", "policyd-specon", "policyd.io/managed=true", ())
    assert (settings.kubernetes.lease_duration_seconds,
            settings.kubernetes.renew_deadline_seconds,
            settings.kubernetes.retry_period_seconds) == (15, 10, 2)


@pytest.mark.parametrize("name", ["manager.yaml", "node-agent.yaml"])
def test_the_kubernetes_deployments_settings(name: str) -> None:
    settings = load_settings(ROOT / "deploy" / "kubernetes" / "settings" / name)
    assert settings.backend == "kubernetes" and settings.prometheus.profile == "kubernetes"
    assert settings.kubernetes.namespace == "policyd"
    assert (settings.kubernetes.qps, settings.kubernetes.burst) == (
        (20, 40) if name == "manager.yaml" else (5, 10))
    assert settings.kubernetes.lease_name == "policyd-specon"


# --- bad files: every problem at once, with file, line and field ------------------------------

LEASE_RULE = ("leader election needs lease_duration_seconds > renew_deadline_seconds > 1.2 x "
              "retry_period_seconds; got ")
SCENARIOS = ("flowcon-fixed-3, flowcon-random-5, flowcon-random-10, flowcon-random-15, "
             "specon-fixed-20, specon-random-20-vae, specon-random-20, specon-random-30, "
             "specon-random-50-8w, deadline-sufficient, deadline-insufficient, flowcon2-4w-20, "
             "flowcon2-8w-60-hetero, specon-random-20-hetero, specon-random-50-8w-hetero, "
             "qoe-fixed-8, qoe-random-12, qoe-random-32-4w, qoe-burst-16-2w")

ERRORS = {
    "unknown-backend": (
        "backend: dokcer\n",
        ["s.yaml:1: backend: 'dokcer' is not one of: simulated, docker, kubernetes; did you "
         "mean 'docker'?"]),
    "kubernetes-needs-prometheus": (  # policies may all be resources (policy_resources)
        "backend: kubernetes\n",
        ["s.yaml:1: backend: the kubernetes backend needs prometheus.url (where the training "
         "jobs' loss and CPU are scraped)"]),
    "kubernetes-needs-policies-without-resources": (
        "backend: kubernetes\nprometheus: {url: 'http://p:9090'}\n"
        "kubernetes: {policy_resources: false}\n",
        ["s.yaml:1: backend: the kubernetes backend needs at least one policy file in "
         "policies, or kubernetes.policy_resources: true"]),
    "kubernetes-profile": (
        "policies: [p.yaml]\nbackend: kubernetes\nprometheus:\n  url: http://p:9090\n"
        "  profile: cadvisor-docker\n",
        ["s.yaml:5: prometheus.profile: 'cadvisor-docker': the kubernetes backend reads the "
         "kubernetes profile (kubelet cAdvisor, pods from the API); set profile: kubernetes "
         "or leave it out"]),
    "kubernetes-fields": (
        "kubernetes:\n  namespace: ''\n  qps: 0\n  burst: 2.5\n  namespaces: [a, 3]\n"
        "  label_selector: '=x'\n  lease_nam: l\n",
        ["s.yaml:2: kubernetes.namespace: '' is not allowed: must not be empty",
         "s.yaml:3: kubernetes.qps: 0 is not allowed: must be greater than 0",
         "s.yaml:4: kubernetes.burst: 2.5 is not allowed: must be a whole number",
         "s.yaml:5: kubernetes.namespaces[1]: 3 is not allowed: must be a string",
         "s.yaml:6: kubernetes.label_selector: '=x' must be a label selector (key, key=value, "
         "key!=value, comma-separated)",
         "s.yaml:7: kubernetes.lease_nam: unknown field; did you mean 'lease_name'?"]),
    "kubernetes-not-a-mapping": (
        "kubernetes: policyd\n",
        ["s.yaml:1: kubernetes: 'policyd' is not allowed: must be a mapping"]),
    "lease-not-longer-than-renew-deadline": (
        "kubernetes:\n  lease_name: l\n  lease_duration_seconds: 10\n",
        [f"s.yaml:3: kubernetes.lease_duration_seconds: {LEASE_RULE}10, 10, 2 (a leader "
         "must stop acting before another replica may take over)"]),
    "renew-deadline-too-short-for-retries": (
        "kubernetes:\n  lease_duration_seconds: 20\n  renew_deadline_seconds: 2.4\n"
        "  retry_period_seconds: 2\n",
        [f"s.yaml:3: kubernetes.renew_deadline_seconds: {LEASE_RULE}20, 2.4, 2 (1.2 x 2 = "
         "2.4: a leader must get a retry in before its renew deadline)"]),
    "retry-period-alone-breaks-the-rule": (
        "kubernetes:\n  retry_period_seconds: 9\n",
        [f"s.yaml:2: kubernetes.retry_period_seconds: {LEASE_RULE}15, 10, 9 (1.2 x 9 = 10.8: "
         "a leader must get a retry in before its renew deadline)"]),
    "unknown-fields": (
        "polices: [a.yaml]\nsimulation:\n  sped: 3\n",
        ["s.yaml:1: polices: unknown field; did you mean 'policies'?",
         "s.yaml:3: simulation.sped: unknown field; did you mean 'speed'?"]),
    "every-problem-at-once": (
        "http:\n  port: 70000\n  enabled: yes please\nsimulation:\n  speed: fast\n"
        "  seed: -1\n  scenario: flowcon-fixd-3\nlog_level: loud\n",
        ["s.yaml:2: http.port: 70000 is not allowed: must be at most 65535",
         "s.yaml:3: http.enabled: 'yes please' is not allowed: must be true or false",
         "s.yaml:5: simulation.speed: 'fast' must be a positive number of virtual seconds "
         "per wall second, or max",
         "s.yaml:6: simulation.seed: -1 is not allowed: must be at least 0",
         f"s.yaml:7: simulation.scenario: 'flowcon-fixd-3' is not one of: {SCENARIOS}; "
         "did you mean 'flowcon-fixed-3'?",
         "s.yaml:8: log_level: 'loud' is not one of: debug, info, warning, error"]),
    "docker-needs-hosts-policies-prometheus": (
        "backend: docker\n",
        ["s.yaml:1: backend: the docker backend needs at least one policy file in policies",
         "s.yaml:1: backend: the docker backend needs docker.hosts (node -> Docker engine "
         "URL)",
         "s.yaml:1: backend: the docker backend needs prometheus.url (where the training "
         "jobs' loss is scraped)"]),
    "numbers-and-urls": (
        "prometheus:\n  url: prom:9090\n  timeout_seconds: 0\n"
        "alertmanager:\n  resend_interval_seconds: 10\n",
        ["s.yaml:2: prometheus.url: 'prom:9090' must start with http:// or https://",
         "s.yaml:3: prometheus.timeout_seconds: 0 is not allowed: must be greater than 0",
         "s.yaml:4: alertmanager.url: required field is missing"]),
    "queries-out-at-once": (
        "prometheus:\n  max_concurrent_queries: 0\n",
        ["s.yaml:2: prometheus.max_concurrent_queries: 0 is not allowed: must be at least 1"]),
    "docker-hosts": (
        "docker:\n  hosts:\n    w1: 3\n    w2: {url: 'tcp://h:2376', tls: {cert: c.pem}}\n",
        ["s.yaml:3: docker.hosts.w1: must be a Docker engine URL or a mapping with url (and "
         "tls); got 3",
         "s.yaml:4: docker.hosts.w2.tls: cert and key go together"]),
    "not-a-mapping": (
        "- a\n- b\n",
        ["s.yaml:1: the settings file must be a mapping of sections; got a list"]),
    "policies-not-a-list": (
        "policies: p.yaml\n",
        ["s.yaml:1: policies: 'p.yaml' is not allowed: must be a list"]),
    "key-twice": (
        "log_level: info\nlog_level: debug\n",
        ["s.yaml:2: log_level: given twice (lines 1 and 2); YAML would silently keep the "
         "last one"]),
    "syntax": (
        "http: {port: 1\n",
        ["s.yaml:2:1: YAML syntax error: expected ',' or '}', but got '<stream end>' "
         "(while parsing a flow mapping that starts on line 1)"]),
    "two-documents": (
        "backend: docker\n---\nbackend: simulated\n",
        ["s.yaml:3: a settings file holds one YAML document"]),
    # Several problems in one file, of every kind: a backend's needs are reported next to the
    # fields at fault (pydantic alone would run the cross-section rules only once every field
    # is valid), and a value given but invalid is not reported a second time as missing.
    "docker-backend-with-bad-fields": (
        "policies: [p.yaml, '']\nbackend: docker\nprometheus:\n  url: prom:9090\n"
        "  scrape_interval_seconds: -15\n  node_names: {'10.0.0.1:8080': 3}\n"
        "docker:\n  hosts:\n    w1: ''\n  managed_label: '=true'\n  grace_seconds: .inf\n"
        "  start_timout_seconds: 30\nhttp: {port: 9097, addr: ''}\n",
        ["s.yaml:1: policies[1]: '' is not allowed: must be a file path",
         "s.yaml:4: prometheus.url: 'prom:9090' must start with http:// or https://",
         "s.yaml:5: prometheus.scrape_interval_seconds: -15 is not allowed: must be greater "
         "than 0",
         "s.yaml:6: prometheus.node_names.10.0.0.1:8080: 3 is not allowed: must be a string",
         "s.yaml:9: docker.hosts.w1: must be a Docker engine URL or a mapping with url (and "
         "tls); got ''",
         "s.yaml:10: docker.managed_label: '=true' must be key or key=value",
         "s.yaml:11: docker.grace_seconds: inf is not allowed: must be a finite number",
         "s.yaml:12: docker.start_timout_seconds: unknown field; did you mean "
         "'start_timeout_seconds'?",
         "s.yaml:13: http.addr: '' is not allowed: must not be empty"]),
    "backend-needs-reported-with-field-problems": (
        "backend: kubernetes\nhttp:\n  port: -1\nkubernetes:\n  burst: 0\n"
        "  renew_deadline_seconds: 30\nalertmanager: {url: 'http://am:9093', retries: 3}\n",
        ["s.yaml:1: backend: the kubernetes backend needs prometheus.url (where the training "
         "jobs' loss and CPU are scraped)",
         "s.yaml:3: http.port: -1 is not allowed: must be at least 0",
         "s.yaml:5: kubernetes.burst: 0 is not allowed: must be at least 1",
         f"s.yaml:6: kubernetes.renew_deadline_seconds: {LEASE_RULE}15, 30, 2 (a leader must "
         "stop acting before another replica may take over)",
         "s.yaml:7: alertmanager.retries: unknown field; allowed: bearer_token_file, "
         "basic_auth, tls_config, headers, url, resend_interval_seconds, timeout_seconds"]),
    "cadvisor-rest-names-every-docker-host": (
        "policies: [p.yaml]\nbackend: docker\nprometheus:\n  url: http://prom:9090\n"
        "  profile: cadvisor-rest\n  cadvisor:\n    w1: http://10.0.0.1:8080\n"
        "    w3: http://10.0.0.3:8080\n    w4: 10.0.0.4:8080\n"
        "docker:\n  hosts: {w1: 'tcp://10.0.0.1:2376', w2: 'tcp://10.0.0.2:2376'}\n",
        ["s.yaml:6: prometheus.cadvisor: the cadvisor-rest profile needs a cAdvisor URL for "
         "every docker.hosts node; missing: w2",
         "s.yaml:8: prometheus.cadvisor.w3: 'w3' is not one of the docker.hosts nodes: w1, w2",
         "s.yaml:9: prometheus.cadvisor.w4: '10.0.0.4:8080' must start with http:// or "
         "https://"]),
    "cadvisor-rest-without-cadvisor": (
        "policies: [p.yaml]\nbackend: docker\nprometheus:\n  url: http://prom:9090\n"
        "  profile: cadvisor-rest\ndocker:\n  hosts: {w1: 'tcp://10.0.0.1:2376'}\n",
        ["s.yaml:5: prometheus.profile: the cadvisor-rest profile needs a cAdvisor URL for "
         "every docker.hosts node; missing: w1"]),
    "cadvisor-rest-needs-docker": (
        "prometheus:\n  profile: cadvisor-rest\n  cadvisor: {w1: 'http://h:8080'}\n",
        ["s.yaml:2: prometheus.profile: 'cadvisor-rest': reads the cAdvisor of each Docker "
         "host: it needs backend docker, not simulated"]),
    "cadvisor-read-only-by-cadvisor-rest": (
        "prometheus:\n  profile: docker-stats\n  cadvisor: {w1: 'http://h:8080'}\n",
        ["s.yaml:3: prometheus.cadvisor: only the cadvisor-rest profile reads it (profile is "
         "docker-stats)"]),
    "sections-of-the-wrong-shape": (
        "prometheus: [http://p:9090]\ndocker: {hosts: [w1]}\nsimulation: 3\n"
        "alertmanager: http://am:9093\nlog_level: 2\n",
        ["s.yaml:1: prometheus: a list is not allowed: must be a mapping",
         "s.yaml:2: docker.hosts: a list is not allowed: must be a mapping",
         "s.yaml:3: simulation: 3 is not allowed: must be a mapping",
         "s.yaml:4: alertmanager: 'http://am:9093' is not allowed: must be a mapping",
         "s.yaml:5: log_level: 2 is not one of: debug, info, warning, error"]),
}


@pytest.mark.parametrize("case", ERRORS.values(), ids=ERRORS.keys())
def test_problems_name_file_line_and_field(case: tuple[str, list[str]]) -> None:
    text, expected = case
    assert problems(text) == expected


def test_missing_file() -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings("/nonexistent/settings.yaml")
    assert str(caught.value) == "/nonexistent/settings.yaml: no such settings file"


def errors_of(caught: pytest.ExceptionInfo[ValidationError]) -> list[tuple[object, ...]]:
    return [(*e["loc"], e["type"]) for e in caught.value.errors()]


def test_values_check_themselves() -> None:
    with pytest.raises(ValueError, match=r"the docker backend needs docker\.hosts"):
        DaemonSettings(backend="docker", policies=(Path("p.yaml"),))
    with pytest.raises(ValidationError) as caught:
        HttpSettings(port=-1)
    assert errors_of(caught) == [("port", "greater_than_equal")]
    with pytest.raises(ValueError, match=r"the kubernetes backend needs at least one policy"):
        DaemonSettings(backend="kubernetes",
                       kubernetes=KubernetesSection(policy_resources=False))
    with pytest.raises(ValueError, match=r"got 5, 10, 2 \(a leader must stop acting"):
        KubernetesSection(lease_duration_seconds=5)
    with pytest.raises(ValueError, match=r"got 5, 10, 2 \(a leader must stop acting"):
        LeaseSection(lease_duration_seconds=5)
    with pytest.raises(ValidationError) as caught:
        PrometheusSettings(url="prom:9090", profile="cadvisor", timeout_seconds=0)  # type: ignore[arg-type]
    assert errors_of(caught) == [("url", "value_error"), ("profile", "value_error"),
                                 ("timeout_seconds", "greater_than")]


def test_the_bound_on_queries_out_at_once_is_the_sources_own() -> None:
    from policyd.sources.prometheus_connect import MAX_CONCURRENT_QUERIES  # noqa: PLC0415
    from policyd.sources.query_pool import MAX_WORKERS  # noqa: PLC0415

    assert PrometheusSettings().max_concurrent_queries == MAX_CONCURRENT_QUERIES
    PrometheusSettings(max_concurrent_queries=MAX_WORKERS)
    with pytest.raises(ValidationError) as caught:
        PrometheusSettings(max_concurrent_queries=MAX_WORKERS + 1)
    assert errors_of(caught) == [("max_concurrent_queries", "less_than_equal")]


def test_values_are_frozen() -> None:
    settings = DaemonSettings(docker=DockerSection(hosts={"w1": DockerHost(url="unix:///s")}))
    with pytest.raises(ValidationError):
        settings.backend = "docker"  # type: ignore[misc]
    with pytest.raises(TypeError):
        settings.docker.hosts["w2"] = DockerHost(url="unix:///t")  # type: ignore[index]
    with pytest.raises(TypeError):
        settings.prometheus.node_names["x"] = "y"  # type: ignore[index]


# --- any YAML at all: settings or problems, never a traceback ----------------------------------

def field_names() -> list[str]:
    names = {"cadvisor", "w1", "url", "tls", "ca", "cert", "key", "max"}
    for _, field, default in documented_fields():
        names.add(field)
        if isinstance(default, type):
            names.update(default.model_fields)
    return sorted(names)


SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-70_000, 70_000),
                    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(
                        ["", "max", "docker", "kubernetes", "cadvisor-rest", "http://h:1",
                         "unix:///s", "=x", "a=b", "p.yaml", "~/p.yaml"]),
                    st.text(max_size=8))
KEYS = st.one_of(st.sampled_from(field_names()), st.text(max_size=6), st.integers(0, 3))
TREES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=5)), max_leaves=25)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from(list(DaemonSettings.model_fields)), TREES, max_size=6))
def test_any_yaml_gives_settings_or_problems_with_lines(data: dict[str, Any]) -> None:
    text = yaml.safe_dump(data)
    try:
        load_settings_text(text, "s.yaml", base=Path("/etc/policyd"))
    except SettingsError as error:
        assert all(p.line is not None for p in error.problems), error
