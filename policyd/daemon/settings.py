"""The daemon's settings: the model of the settings file (docs/settings.md), section by section.

`DaemonSettings` is the file: frozen pydantic models that reject unknown keys and check
themselves, so a `DaemonSettings` handed to the daemon is always usable, whether it was read
by `settings_file` or built in code. Each field, its default and its check are written once:

* `prometheus`, `http`, `simulation` and the top-level fields here;
* `docker` is `policyd.actuators.docker.DockerSection` (the actuator's `DockerSettings` is
  built on it), `alertmanager` is `policyd.alerts.AlertmanagerSection` (`AlertSettings`
  likewise), and `kubernetes` is the actuator's `KubernetesScope` plus the Lease of
  `--leader-elect` (`LeaseSection`, which `leader.LeaseSettings` extends);
* the rules that span sections (what each backend needs) are `backend_problems`.

With no settings at all, policyd drives the simulated cluster. Paths are absolute when read
from a file (resolved against its directory). Nothing here reads the environment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, Self, get_args

from pydantic import (
    BeforeValidator,
    Field,
    NonNegativeInt,
    PositiveFloat,
    StringConstraints,
    ValidationInfo,
    model_validator,
)

from policyd.actuators.docker.settings import DockerHost, DockerSection
from policyd.actuators.kubernetes.settings import KubernetesScope
from policyd.alerts.settings import AlertmanagerSection
from policyd.clients.access_settings import HttpAccessFields
from policyd.clients.settings import (
    HttpUrl,
    NonEmptyStr,
    ReadOnly,
    SettingsModel,
    SettingsPath,
    field_problems,
    show,
)
from policyd.policy.messages import did_you_mean
from policyd.sources.prometheus_connect import MAX_CONCURRENT_QUERIES
from policyd.sources.query_pool import MAX_WORKERS

Backend = Literal["simulated", "docker", "kubernetes"]
BACKENDS: tuple[Backend, ...] = get_args(Backend)
Profile = Literal["cadvisor-docker", "cadvisor-rest", "docker-stats", "process", "kubernetes"]
PROFILES: tuple[Profile, ...] = get_args(Profile)
LogLevel = Literal["debug", "info", "warning", "error"]
LOG_LEVELS: tuple[LogLevel, ...] = get_args(LogLevel)
DEFAULT_SCENARIO = "flowcon-fixed-3"
REPAIRED = "repaired"
"""Validation context key: the paths the settings file gave but that were invalid (already
reported, and left out while the rest was checked: `policyd.policy.validate`)."""

Problems = list[tuple[tuple[str, ...], str]]


def _one_of(values: Callable[[], Sequence[str]]) -> BeforeValidator:
    """A check that the value is one of `values()`, saying which one was meant."""
    def check(value: Any) -> Any:
        allowed = values()
        if isinstance(value, str) and value in allowed:
            return value
        message = f"{show(value)} is not one of: {', '.join(allowed)}"
        close = did_you_mean(value, allowed) if isinstance(value, str) else None
        raise ValueError(f"{message}; did you mean '{close}'?" if close else message)
    return BeforeValidator(check)


def _scenario_names() -> Sequence[str]:
    from policyd.sim.scenarios import SCENARIOS  # noqa: PLC0415 - numpy only when named

    return tuple(SCENARIOS)


class PrometheusSettings(HttpAccessFields):
    """Where the snapshot comes from (docker and kubernetes backends).

    `profile` names a `policyd.sources.settings` profile, or one that reads the CPU elsewhere
    (`docker-stats`: the Docker engines' stats API; `cadvisor-rest`: each Docker host's
    cAdvisor REST API, at `cadvisor[node]`); the loss always comes from Prometheus at `url`.
    `node_names` maps a scrape target (`instance`) to a node name; `capacity_cores` and
    `process_job` apply to `process` only. `evaluation_node_label`: the node label the scrape
    puts on the exporter's series, so that a node agent asks for its node's loss only.
    `bearer_token_file`, `basic_auth`, `tls_config` and
    `headers` say how to get through to a Prometheus (or Thanos, Mimir, VictoriaMetrics) behind
    TLS and authentication (`policyd.clients.access_settings`). `max_concurrent_queries`: how
    many of a cycle's Prometheus queries are in flight at once, whatever the profile or backend
    (`policyd.sources.query_pool`; 1 sends them one after the other; at most
    `query_pool.MAX_WORKERS`, the default `prometheus_connect.MAX_CONCURRENT_QUERIES`).
    """

    url: HttpUrl | None = None
    profile: Annotated[Profile, _one_of(lambda: PROFILES)] = "cadvisor-docker"
    timeout_seconds: PositiveFloat = 10.0
    max_concurrent_queries: Annotated[int, Field(ge=1, le=MAX_WORKERS)] = MAX_CONCURRENT_QUERIES
    scrape_interval_seconds: PositiveFloat = 15.0
    node_names: Annotated[Mapping[str, str], ReadOnly] = {}
    capacity_cores: PositiveFloat | None = None
    process_job: NonEmptyStr | None = None
    cadvisor: Annotated[Mapping[str, HttpUrl], ReadOnly] = {}
    evaluation_node_label: Annotated[str, StringConstraints(
        pattern=r"^[a-zA-Z_][a-zA-Z0-9_]*$")] | None = None

    @model_validator(mode="after")
    def _cadvisor_only_for_its_profile(self) -> Self:
        if self.cadvisor and self.profile != "cadvisor-rest":
            raise field_problems([(("cadvisor",), f"only the cadvisor-rest profile reads it "
                                                  f"(profile is {self.profile})")])
        return self


class LeaseSection(SettingsModel):
    """The Lease of leader election (`policyd run --leader-elect`): its name, policyd's own
    namespace (where it lives), and the timings.

    A standby takes over once the Lease has not been renewed for `lease_duration_seconds`; a
    leader that could not renew for `renew_deadline_seconds` stops acting; every replica tries
    every `retry_period_seconds`. Needs lease > renew deadline > 1.2 x retry (client-go's rule):
    a leader stops acting before another replica may take over, and gets a retry in before its
    deadline. A broken rule is reported at the first field of the broken inequality that was
    given.
    """

    namespace: NonEmptyStr = "policyd"
    lease_name: NonEmptyStr = "policyd-specon"
    lease_duration_seconds: PositiveFloat = 15.0
    renew_deadline_seconds: PositiveFloat = 10.0
    retry_period_seconds: PositiveFloat = 2.0

    @model_validator(mode="after")
    def _lease_rule(self) -> Self:
        found = lease_timing_problem(self.lease_duration_seconds, self.renew_deadline_seconds,
                                     self.retry_period_seconds)
        if found is not None:
            keys, why = found
            given = [key for key in keys if key in self.model_fields_set]
            raise field_problems([((given[0],) if given else (), why)])
        return self


def lease_timing_problem(lease: float, renew: float, retry: float
                         ) -> tuple[tuple[str, str], str] | None:
    """When lease > renew deadline > 1.2 x retry does not hold: (the field at fault, the
    other field of the broken inequality) and why; else None."""
    rule = (f"leader election needs lease_duration_seconds > renew_deadline_seconds > "
            f"1.2 x retry_period_seconds; got {lease:g}, {renew:g}, {retry:g}")
    if not lease > renew:
        return (("lease_duration_seconds", "renew_deadline_seconds"),
                f"{rule} (a leader must stop acting before another replica may take over)")
    if not renew > 1.2 * retry:
        return (("renew_deadline_seconds", "retry_period_seconds"),
                f"{rule} (1.2 x {retry:g} = {1.2 * retry:g}: a leader must get a retry in "
                "before its renew deadline)")
    return None


class KubernetesSection(KubernetesScope, LeaseSection):
    """The settings file's `kubernetes` section: the pods policyd manages and its write rate
    (the actuator's `KubernetesScope`), and the Lease of `policyd run --leader-elect`
    (`LeaseSection`).

    `namespace` is policyd's own namespace (where the Lease and the move records live), not
    the training jobs': those are `namespaces` (empty: every namespace) matching
    `label_selector`. `policy_resources`: also run the policies found as custom resources
    (`kubectl apply -f policies/flowcon.yaml`; `policy_resources`), alongside `policies`.
    Turned into the actuator's settings by `backend.kubernetes_settings` and the elector's
    by `roles.lease_settings`.
    """

    policy_resources: bool = True


class HttpSettings(SettingsModel):
    """The `/metrics`, `/healthz`, `/readyz` listener; port 0 picks a free port."""

    enabled: bool = True
    addr: NonEmptyStr = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65535)] = 9097


def _speed(value: Any) -> Any:
    if value == "max":
        return None
    if isinstance(value, str | bool):
        raise ValueError(f"{show(value)} must be a positive number of virtual seconds per "
                         "wall second, or max")
    return value


class SimulationSettings(SettingsModel):
    """The simulated cluster: a named scenario, its seed (None: the scenario's own), and
    `speed` in virtual seconds per wall second (None: as fast as possible, `max` in the file)."""

    scenario: Annotated[str, _one_of(_scenario_names)] = DEFAULT_SCENARIO
    seed: NonNegativeInt | None = None
    speed: Annotated[PositiveFloat | None, BeforeValidator(_speed)] = 20.0


class DaemonSettings(SettingsModel):
    """Everything `policyd run` needs (see docs/settings.md, field by field)."""

    policies: tuple[SettingsPath, ...] = ()
    backend: Annotated[Backend, _one_of(lambda: BACKENDS)] = "simulated"
    prometheus: PrometheusSettings = Field(default_factory=PrometheusSettings)
    docker: DockerSection = Field(default_factory=DockerSection)
    kubernetes: KubernetesSection = Field(default_factory=KubernetesSection)
    alertmanager: AlertmanagerSection | None = None
    http: HttpSettings = Field(default_factory=HttpSettings)
    simulation: SimulationSettings = Field(default_factory=SimulationSettings)
    log_level: Annotated[LogLevel, _one_of(lambda: LOG_LEVELS)] = "info"
    node_reports: bool = False
    """Split the cluster-wide kinds that can (SpeCon) the way the thesis runs them: node agents
    (`--node`) publish their node's report on /metrics, and the manager decides from every
    node's report, read from Prometheus in one query, instead of every container's series."""

    @model_validator(mode="after")
    def _backend_needs(self, info: ValidationInfo) -> Self:
        repaired = frozenset((info.context or {}).get(REPAIRED, ()))
        problems = backend_problems(self, repaired)
        if problems:
            raise field_problems(problems)
        return self


def backend_problems(settings: DaemonSettings,
                     repaired: frozenset[tuple[str, ...]] = frozenset()) -> Problems:
    """What the chosen backend needs from the other sections and does not get. `repaired`:
    paths the file gave but were invalid (reported already; not reported again as missing)."""
    def missing(*path: str) -> bool:  # and not given-but-invalid, in part or as a whole
        return not any(path[:len(r)] == r or r[:len(path)] == path for r in repaired)

    problems: Problems = []
    backend, prometheus = settings.backend, settings.prometheus
    if backend in ("docker", "kubernetes"):
        resources = backend == "kubernetes" and settings.kubernetes.policy_resources
        if not settings.policies and missing("policies") and not resources:
            where = ("in policies, or kubernetes.policy_resources: true"
                     if backend == "kubernetes" else "in policies")
            problems.append((("backend",), f"the {backend} backend needs at least one policy "
                                           f"file {where}"))
        if backend == "docker" and not settings.docker.hosts and missing("docker", "hosts"):
            problems.append((("backend",), "the docker backend needs docker.hosts (node -> "
                                           "Docker engine URL)"))
        if prometheus.url is None and missing("prometheus", "url"):
            scraped = "loss is" if backend == "docker" else "loss and CPU are"
            problems.append((("backend",), f"the {backend} backend needs prometheus.url "
                                           f"(where the training jobs' {scraped} scraped)"))
    given = "profile" in prometheus.model_fields_set
    if backend == "kubernetes" and given and prometheus.profile != "kubernetes":
        problems.append((("prometheus", "profile"), f"{show(prometheus.profile)}: the "
                         "kubernetes backend reads the kubernetes profile (kubelet cAdvisor, "
                         "pods from the API); set profile: kubernetes or leave it out"))
    elif prometheus.profile == "cadvisor-rest" and backend != "docker":
        problems.append((("prometheus", "profile"), "'cadvisor-rest': reads the cAdvisor of "
                         f"each Docker host: it needs backend docker, not {backend}"))
    elif prometheus.profile == "cadvisor-rest":
        problems.extend(_cadvisor_problems(prometheus, settings.docker))
    return problems


def _cadvisor_problems(prometheus: PrometheusSettings, docker: DockerSection) -> Problems:
    """The cadvisor-rest profile: one cAdvisor URL per Docker host, and no other."""
    hosts = list(docker.hosts)
    unnamed = [node for node in hosts if node not in prometheus.cadvisor]
    problems: Problems = [
        (("prometheus", "cadvisor", node), f"{node!r} is not one of the docker.hosts nodes: "
                                           f"{', '.join(hosts) or '(none)'}")
        for node in prometheus.cadvisor if node not in docker.hosts]
    if unnamed:
        at = ("prometheus", "cadvisor") if prometheus.cadvisor else ("prometheus", "profile")
        problems.append((at, "the cadvisor-rest profile needs a cAdvisor URL for every "
                             f"docker.hosts node; missing: {', '.join(unnamed)}"))
    return problems


__all__ = [
    "BACKENDS",
    "LOG_LEVELS",
    "PROFILES",
    "AlertmanagerSection",
    "Backend",
    "DaemonSettings",
    "DockerHost",
    "DockerSection",
    "HttpSettings",
    "KubernetesSection",
    "LeaseSection",
    "PrometheusSettings",
    "SimulationSettings",
    "backend_problems",
    "lease_timing_problem",
]
