"""The daemon's settings: frozen values, built from the settings file (`settings_file`) or in code.

Every section is a keyword-only frozen dataclass that checks itself on construction, so a
`DaemonSettings` handed to the daemon is always usable. Defaults are those documented in
`docs/settings.md` and `deploy/settings.example.yaml`: with no settings at all, policyd drives
the simulated cluster. Paths are absolute by the time they are stored here (the file reader
resolves them against the settings file's directory). Nothing here reads the environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal

# The one value class of an engine, shared with the actuator (its module loads no Docker SDK).
from policyd.actuators.docker.settings import DockerHost

Backend = Literal["simulated", "docker", "kubernetes"]
BACKENDS: tuple[Backend, ...] = ("simulated", "docker", "kubernetes")
PROFILES = ("cadvisor-docker", "docker-stats", "process", "kubernetes")
LOG_LEVELS = ("debug", "info", "warning", "error")
DEFAULT_SCENARIO = "flowcon-fixed-3"


def _positive(value: float, what: str) -> None:
    if not value > 0:
        raise ValueError(f"{what} must be positive, got {value}")


@dataclass(frozen=True, kw_only=True)
class PrometheusSettings:
    """Where the snapshot comes from when Prometheus is configured (`url` set).

    `profile` names a `policyd.sources.settings` profile, or `docker-stats` (the loss from
    Prometheus, CPU and facts from the Docker engines' stats API: no cAdvisor needed);
    `node_names` maps a scrape target (`instance`) to a node name; `capacity_cores` and
    `process_job` apply to `process` only.
    """

    url: str | None = None
    profile: str = "cadvisor-docker"
    timeout_seconds: float = 10.0
    scrape_interval_seconds: float = 15.0
    node_names: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    capacity_cores: float | None = None
    process_job: str | None = None

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise ValueError(f"profile {self.profile!r} is not one of: {', '.join(PROFILES)}")
        _positive(self.timeout_seconds, "timeout_seconds")
        _positive(self.scrape_interval_seconds, "scrape_interval_seconds")
        if self.capacity_cores is not None:
            _positive(self.capacity_cores, "capacity_cores")
        object.__setattr__(self, "node_names", MappingProxyType(dict(self.node_names)))


@dataclass(frozen=True, kw_only=True)
class DockerSection:
    """The Docker engines policyd acts on, by node name (the snapshot's node names), and the
    actuator's knobs (`policyd.actuators.docker.DockerSettings` has the details)."""

    hosts: Mapping[str, DockerHost] = field(default_factory=lambda: MappingProxyType({}))
    managed_label: str = "policyd.io/managed=true"
    grace_seconds: float = 60.0
    start_timeout_seconds: float = 30.0
    state_path: Path | None = None

    def __post_init__(self) -> None:
        _positive(self.grace_seconds, "grace_seconds")
        _positive(self.start_timeout_seconds, "start_timeout_seconds")
        if not self.managed_label or self.managed_label.startswith("="):
            raise ValueError(f"managed_label {self.managed_label!r} must be key or key=value")
        object.__setattr__(self, "hosts", MappingProxyType(dict(self.hosts)))


@dataclass(frozen=True, kw_only=True)
class KubernetesSection:
    """The kubernetes backend: the API client's rate limit, the pods policyd manages, and the
    Lease of `policyd run --leader-elect`.

    `namespace` is policyd's own namespace (where the Lease lives), not the training jobs':
    those are `namespaces` (empty: every namespace) matching `label_selector`. `qps` and
    `burst` are the client-side rate limit of the actuator's writes. Leader election needs
    lease_duration > renew_deadline > 1.2 x retry_period (client-go's rule). Mapped to
    `policyd.actuators.kubernetes.KubernetesSettings` and `policyd.daemon.leader.LeaseSettings`
    by `policyd.daemon.kubernetes`.
    """

    namespace: str = "policyd"
    qps: float = 5.0
    burst: int = 10
    namespaces: tuple[str, ...] = ()
    label_selector: str = "policyd.io/managed=true"
    lease_name: str = "policyd-specon"
    lease_duration_seconds: float = 15.0
    renew_deadline_seconds: float = 10.0
    retry_period_seconds: float = 2.0

    def __post_init__(self) -> None:
        if not self.namespace:
            raise ValueError("namespace must be policyd's own namespace (e.g. policyd)")
        if not self.lease_name:
            raise ValueError("lease_name must be set")
        if not self.label_selector:
            raise ValueError("label_selector must select the managed pods")
        _positive(self.qps, "qps")
        if self.burst < 1:
            raise ValueError(f"burst must be at least 1, got {self.burst}")
        for what, value in (("lease_duration_seconds", self.lease_duration_seconds),
                            ("renew_deadline_seconds", self.renew_deadline_seconds),
                            ("retry_period_seconds", self.retry_period_seconds)):
            _positive(value, what)
        problem = lease_timing_problem(self.lease_duration_seconds,
                                       self.renew_deadline_seconds, self.retry_period_seconds)
        if problem is not None:
            raise ValueError(problem[1])
        object.__setattr__(self, "namespaces", tuple(self.namespaces))


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


@dataclass(frozen=True, kw_only=True)
class AlertmanagerSection:
    """Alertmanager's base URL; alerts are re-sent every `resend_interval_seconds`."""

    url: str
    resend_interval_seconds: float = 60.0
    timeout_seconds: float = 5.0

    def __post_init__(self) -> None:
        if not self.url:
            raise ValueError("alertmanager needs a url")
        _positive(self.resend_interval_seconds, "resend_interval_seconds")
        _positive(self.timeout_seconds, "timeout_seconds")


@dataclass(frozen=True, kw_only=True)
class HttpSettings:
    """The `/metrics`, `/healthz`, `/readyz` listener; port 0 picks a free port."""

    enabled: bool = True
    addr: str = "127.0.0.1"
    port: int = 9097

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be in 0 .. 65535, got {self.port}")


@dataclass(frozen=True, kw_only=True)
class SimulationSettings:
    """The simulated cluster: a named scenario, its seed (None: the scenario's own), and
    `speed` in virtual seconds per wall second (None: as fast as possible, `max` in the file)."""

    scenario: str = DEFAULT_SCENARIO
    seed: int | None = None
    speed: float | None = 20.0

    def __post_init__(self) -> None:
        if self.speed is not None:
            _positive(self.speed, "speed")
        if self.seed is not None and self.seed < 0:
            raise ValueError("seed must be zero or more")


@dataclass(frozen=True, kw_only=True)
class DaemonSettings:
    """Everything `policyd run` needs (see docs/settings.md, field by field)."""

    policies: tuple[Path, ...] = ()
    backend: Backend = "simulated"
    prometheus: PrometheusSettings = field(default_factory=PrometheusSettings)
    docker: DockerSection = field(default_factory=DockerSection)
    kubernetes: KubernetesSection = field(default_factory=KubernetesSection)
    alertmanager: AlertmanagerSection | None = None
    http: HttpSettings = field(default_factory=HttpSettings)
    simulation: SimulationSettings = field(default_factory=SimulationSettings)
    log_level: str = "info"
    source_file: Path | None = None
    """The settings file these came from (None: built in code, or defaults)."""

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise ValueError(f"backend {self.backend!r} is not one of: {', '.join(BACKENDS)}")
        if self.log_level not in LOG_LEVELS:
            raise ValueError(f"log_level {self.log_level!r} is not one of: "
                             f"{', '.join(LOG_LEVELS)}")
        if self.backend == "docker":
            if not self.policies:
                raise ValueError("the docker backend needs at least one policy file")
            if not self.docker.hosts:
                raise ValueError("the docker backend needs docker.hosts")
            if self.prometheus.url is None:
                raise ValueError("the docker backend needs prometheus.url (the loss)")
        if self.backend == "kubernetes":
            if not self.policies:
                raise ValueError("the kubernetes backend needs at least one policy file")
            if self.prometheus.url is None:
                raise ValueError("the kubernetes backend needs prometheus.url (the loss)")
