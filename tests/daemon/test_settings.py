"""The settings file: every field parsed, and every problem reported at once, exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from policyd.daemon import (
    AlertmanagerSection,
    DaemonSettings,
    DockerHost,
    HttpSettings,
    KubernetesSection,
    SettingsError,
    SimulationSettings,
    load_settings,
    load_settings_text,
)

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
    # Every field of the file is documented.
    docs = (ROOT / "docs" / "settings.md").read_text()
    for field in ("policies", "backend", "log_level", "url", "profile", "timeout_seconds",
                  "scrape_interval_seconds", "node_names", "capacity_cores", "process_job",
                  "hosts", "managed_label", "grace_seconds", "start_timeout_seconds",
                  "state_path", "resend_interval_seconds", "enabled", "addr", "port",
                  "scenario", "seed", "speed", "namespace", "qps", "burst", "namespaces",
                  "label_selector", "lease_name", "lease_duration_seconds",
                  "renew_deadline_seconds", "retry_period_seconds", "--node",
                  "--leader-elect"):
        assert f"`{field}`" in docs, field


def test_empty_file_means_defaults() -> None:
    settings = load_settings_text("# nothing\n", "s.yaml")
    assert settings.backend == "simulated" and settings.policies == ()
    assert settings.simulation.speed == 20.0 and settings.http.port == 9097


def test_paths_are_relative_to_the_settings_file(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "settings.yaml"
    path.parent.mkdir()
    path.write_text("policies: [p.yaml, ../q.yaml, /abs/r.yaml]\nsimulation: {speed: max}\n")
    settings = load_settings(path)
    assert settings.policies == (tmp_path / "conf" / "p.yaml", tmp_path / "q.yaml",
                                 Path("/abs/r.yaml"))
    assert settings.simulation.speed is None


def test_docker_backend() -> None:
    settings = load_settings_text(
        "policies: [p.yaml]\nbackend: docker\nprometheus: {url: 'http://prom:9090'}\n"
        "docker:\n  hosts:\n    w1: {url: 'tcp://h:2376', tls: {ca: ca.pem}}\n",
        "s.yaml", base=Path("/etc/policyd"))
    assert settings.backend == "docker"
    assert settings.docker.hosts["w1"].tls_ca == Path("/etc/policyd/ca.pem")


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


LEASE_RULE = ("leader election needs lease_duration_seconds > renew_deadline_seconds > 1.2 x "
              "retry_period_seconds; got ")

ERRORS = {
    "unknown-backend": (
        "backend: dokcer\n",
        ["s.yaml:1: backend: 'dokcer' is not one of: simulated, docker, kubernetes; did you "
         "mean 'docker'?"]),
    "kubernetes-needs-policies-prometheus": (
        "backend: kubernetes\n",
        ["s.yaml:1: backend: the kubernetes backend needs at least one policy file in "
         "policies",
         "s.yaml:1: backend: the kubernetes backend needs prometheus.url (where the training "
         "jobs' loss and CPU are scraped)"]),
    "kubernetes-profile": (
        "policies: [p.yaml]\nbackend: kubernetes\nprometheus:\n  url: http://p:9090\n"
        "  profile: cadvisor-docker\n",
        ["s.yaml:5: prometheus.profile: 'cadvisor-docker': the kubernetes backend reads the "
         "kubernetes profile (kubelet cAdvisor, pods from the API); set profile: kubernetes "
         "or leave it out"]),
    "kubernetes-fields": (
        "kubernetes:\n  namespace: ''\n  qps: 0\n  burst: 2.5\n  namespaces: [a, 3]\n"
        "  label_selector: '=x'\n  lease_nam: l\n",
        ["s.yaml:2: kubernetes.namespace: must be a non-empty string; got ''",
         "s.yaml:3: kubernetes.qps: 0 must be a positive number",
         "s.yaml:4: kubernetes.burst: 2.5 must be a whole number >= 1",
         "s.yaml:5: kubernetes.namespaces[1]: must be a namespace name; got 3",
         "s.yaml:6: kubernetes.label_selector: '=x' must be a label selector (key, key=value, "
         "key!=value, comma-separated)",
         "s.yaml:7: kubernetes.lease_nam: unknown field; did you mean 'lease_name'?"]),
    "kubernetes-not-a-mapping": (
        "kubernetes: policyd\n",
        ["s.yaml:1: kubernetes: must be a mapping with: namespace, qps, burst, namespaces, "
         "label_selector, lease_name, lease_duration_seconds, renew_deadline_seconds, "
         "retry_period_seconds; got 'policyd'"]),
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
        ["s.yaml:2: http.port: 70000 must be a whole number in 0 .. 65535 (0: any free port)",
         "s.yaml:3: http.enabled: must be true or false; got 'yes please'",
         "s.yaml:5: simulation.speed: 'fast' must be a positive number of virtual seconds "
         "per wall second, or max",
         "s.yaml:6: simulation.seed: -1 must be a whole number >= 0 (or null: the "
         "scenario's own seed)",
         "s.yaml:7: simulation.scenario: 'flowcon-fixd-3' is not one of: flowcon-fixed-3, "
         "flowcon-random-5, flowcon-random-10, flowcon-random-15, specon-fixed-20, "
         "specon-random-20-vae, specon-random-20, specon-random-30, specon-random-50-8w; "
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
         "s.yaml:3: prometheus.timeout_seconds: 0 must be a positive number",
         "s.yaml:4: alertmanager: url: required field is missing (or leave alertmanager "
         "out)"]),
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
        ["s.yaml:1: policies: must be a list of policy files; got 'p.yaml'"]),
    "key-twice": (
        "log_level: info\nlog_level: debug\n",
        ["s.yaml:2: log_level: given twice (lines 1 and 2); YAML would silently keep the "
         "last one"]),
    "syntax": (
        "http: {port: 1\n",
        ["s.yaml:2:1: YAML syntax error: expected ',' or '}', but got '<stream end>' "
         "(while parsing a flow mapping that starts on line 1)"]),
}


@pytest.mark.parametrize("case", ERRORS.values(), ids=ERRORS.keys())
def test_problems_name_file_line_and_field(case: tuple[str, list[str]]) -> None:
    text, expected = case
    assert problems(text) == expected


def test_missing_file() -> None:
    with pytest.raises(SettingsError) as caught:
        load_settings("/nonexistent/settings.yaml")
    assert str(caught.value) == "/nonexistent/settings.yaml: no such settings file"


def test_values_check_themselves() -> None:
    with pytest.raises(ValueError, match=r"the docker backend needs docker\.hosts"):
        DaemonSettings(backend="docker", policies=(Path("p.yaml"),))
    with pytest.raises(ValueError, match=r"port must be in 0 \.\. 65535"):
        HttpSettings(port=-1)
    with pytest.raises(ValueError, match=r"the kubernetes backend needs at least one policy"):
        DaemonSettings(backend="kubernetes")
    with pytest.raises(ValueError, match=r"got 5, 10, 2 \(a leader must stop acting"):
        KubernetesSection(lease_duration_seconds=5)
