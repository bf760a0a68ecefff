"""The settings file: YAML in, `DaemonSettings` (or every problem with the file) out.

The file is one YAML mapping (docs/settings.md). It is parsed with `policyd.policy.yamlpos`, so
every problem carries the line of the key it concerns, and problems read exactly like policy
problems (`FILE:LINE: FIELD: MESSAGE`, `policyd.policy.errors.Problem`). Every problem of the
file is collected before giving up; `load_settings` raises them together in `SettingsError`.

Relative paths (policy files, TLS files) are resolved against the settings file's directory,
so a settings file and its policies can move together. This module reads one file and the
scenario table; it never reads the environment.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from policyd.actuators.docker.settings import DockerHost
from policyd.daemon.settings import (
    BACKENDS,
    LOG_LEVELS,
    PROFILES,
    AlertmanagerSection,
    Backend,
    DaemonSettings,
    DockerSection,
    HttpSettings,
    KubernetesSection,
    PrometheusSettings,
    SimulationSettings,
    lease_timing_problem,
)
from policyd.policy import yamlpos
from policyd.policy.errors import Problem
from policyd.policy.messages import did_you_mean, field_name, show, unknown_key

_Path = tuple[Hashable, ...]
_MISSING = object()

_KEYS: Mapping[_Path, tuple[str, ...]] = {
    (): ("policies", "backend", "prometheus", "docker", "kubernetes", "alertmanager", "http",
         "simulation", "log_level"),
    ("prometheus",): ("url", "profile", "timeout_seconds", "scrape_interval_seconds",
                      "node_names", "capacity_cores", "process_job"),
    ("docker",): ("hosts", "managed_label", "grace_seconds", "start_timeout_seconds",
                  "state_path"),
    ("kubernetes",): ("namespace", "qps", "burst", "namespaces", "label_selector", "lease_name",
                      "lease_duration_seconds", "renew_deadline_seconds",
                      "retry_period_seconds"),
    ("alertmanager",): ("url", "resend_interval_seconds", "timeout_seconds"),
    ("http",): ("enabled", "addr", "port"),
    ("simulation",): ("scenario", "seed", "speed"),
}
_HOST_KEYS = ("url", "tls")
_TLS_KEYS = ("ca", "cert", "key")


class SettingsError(Exception):
    """A settings file that cannot be used; `problems` lists every reason, in line order."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        if not problems:
            raise ValueError("SettingsError needs at least one problem")
        self.problems: tuple[Problem, ...] = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


def load_settings(path: str | os.PathLike[str]) -> DaemonSettings:
    """The settings in the file at `path`; `SettingsError` lists every problem if any."""
    source = os.fspath(path)
    try:
        text = Path(source).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise SettingsError([Problem(file=source, message="no such settings file")]) from None
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else f"not UTF-8 ({error.reason})"
        raise SettingsError([Problem(file=source, message=f"cannot read: {reason}")]) from None
    return load_settings_text(text, source, base=Path(source).resolve().parent)


def load_settings_text(text: str, source: str = "<string>", *,
                       base: Path | None = None) -> DaemonSettings:
    """Settings from YAML `text`; relative paths are resolved against `base` (default: the
    current directory). Raises `SettingsError` listing every problem."""
    stream = yamlpos.parse(text)
    problems: list[Problem] = []
    if stream.syntax_error is not None:
        error = stream.syntax_error
        problems.append(Problem(file=source, line=error.line, column=error.column,
                                message=error.message))
    if len(stream.documents) > 1:
        problems.append(Problem(file=source, line=stream.documents[1].line,
                                message="a settings file holds one YAML document"))
    if problems or not stream.documents:
        if problems:
            raise SettingsError(problems)
        return DaemonSettings(source_file=Path(source) if source != "<string>" else None)
    reader = _Reader(source, stream.documents[0], base or Path.cwd())
    settings = reader.settings()
    if reader.problems:
        raise SettingsError(sorted(reader.problems, key=lambda p: p.line or 0))
    assert settings is not None
    return settings


class _Reader:
    """Reads typed fields out of one document, collecting a `Problem` for each bad one."""

    def __init__(self, source: str, document: yamlpos.Document, base: Path) -> None:
        self.source = source
        self.document = document
        self.base = base
        self.problems: list[Problem] = []
        for issue in document.issues:
            self.problems.append(Problem(
                file=source, line=issue.line, column=issue.column, message=issue.message,
                field=field_name(issue.path) if issue.path else None))

    # --- the file, section by section ------------------------------------------------------

    def settings(self) -> DaemonSettings | None:
        data = self.document.data
        if data is None:
            return DaemonSettings(source_file=Path(self.source))
        if not isinstance(data, dict):
            self.problem((), f"the settings file must be a mapping of sections; got {show(data)}")
            return None
        self.check_keys(())
        backend = self.backend()
        policies = self.policies()
        prometheus = self.prometheus()
        docker = self.docker()
        kubernetes = self.kubernetes()
        alertmanager = self.alertmanager()
        http = self.http()
        simulation = self.simulation()
        log_level = self.choice(("log_level",), LOG_LEVELS, "info")
        if backend == "docker":
            if not policies:
                self.problem(("backend",), "the docker backend needs at least one policy file "
                             "in policies")
            if not docker.hosts:
                self.problem(("backend",), "the docker backend needs docker.hosts (node -> "
                             "Docker engine URL)")
            if prometheus.url is None:
                self.problem(("backend",), "the docker backend needs prometheus.url (where "
                             "the training jobs' loss is scraped)")
        if backend == "kubernetes":
            if not policies:
                self.problem(("backend",), "the kubernetes backend needs at least one policy "
                             "file in policies")
            if prometheus.url is None:
                self.problem(("backend",), "the kubernetes backend needs prometheus.url (where "
                             "the training jobs' loss and CPU are scraped)")
            profile = self.get(("prometheus", "profile"))
            if profile not in (_MISSING, None, "kubernetes") and profile in PROFILES:
                self.problem(("prometheus", "profile"), f"{show(profile)}: the kubernetes "
                             "backend reads the kubernetes profile (kubelet cAdvisor, pods "
                             "from the API); set profile: kubernetes or leave it out")
        if self.problems:
            return None
        return DaemonSettings(policies=policies, backend=backend, prometheus=prometheus,
                              docker=docker, kubernetes=kubernetes, alertmanager=alertmanager,
                              http=http,
                              simulation=simulation, log_level=log_level,
                              source_file=Path(self.source))

    def backend(self) -> Backend:
        value = self.get(("backend",))
        if value is _MISSING:
            return "simulated"
        return cast(Backend, self.choice(("backend",), BACKENDS, "simulated"))

    def policies(self) -> tuple[Path, ...]:
        value = self.get(("policies",))
        if value is _MISSING or value is None:
            return ()
        if not isinstance(value, list):
            self.problem(("policies",), f"must be a list of policy files; got {show(value)}")
            return ()
        paths = []
        for index, item in enumerate(value):
            if not isinstance(item, str) or not item:
                self.problem(("policies", index), f"must be a file path; got {show(item)}")
            else:
                paths.append(self.path(item))
        return tuple(paths)

    def prometheus(self) -> PrometheusSettings:
        if not self.section(("prometheus",)):
            return PrometheusSettings()
        at = ("prometheus",)
        node_names = self.string_map((*at, "node_names"))
        capacity = self.number((*at, "capacity_cores"), None)
        url = self.string((*at, "url"), None)
        if url is not None and not url.startswith(("http://", "https://")):
            self.problem((*at, "url"), f"{show(url)} must start with http:// or https://")
        return PrometheusSettings(
            url=url,
            profile=self.choice((*at, "profile"), PROFILES, "cadvisor-docker"),
            timeout_seconds=self.number((*at, "timeout_seconds"), 10.0) or 10.0,
            scrape_interval_seconds=self.number((*at, "scrape_interval_seconds"), 15.0) or 15.0,
            node_names=node_names, capacity_cores=capacity,
            process_job=self.string((*at, "process_job"), None))

    def docker(self) -> DockerSection:
        if not self.section(("docker",)):
            return DockerSection()
        hosts_path = ("docker", "hosts")
        hosts = self.get(hosts_path)
        found = {}
        if isinstance(hosts, dict):
            for node in hosts:
                host = self.docker_host((*hosts_path, node))
                if host is not None:
                    found[str(node)] = host
        elif hosts is not _MISSING and hosts is not None:
            self.problem(hosts_path, f"must map node names to Docker engines; got {show(hosts)}")
        managed = self.string(("docker", "managed_label"), None) or "policyd.io/managed=true"
        if managed.startswith("="):
            self.problem(("docker", "managed_label"), f"{show(managed)} must be key or key=value")
            managed = "policyd.io/managed=true"
        state = self.string(("docker", "state_path"), None)
        return DockerSection(
            hosts=found, managed_label=managed,
            grace_seconds=self.number(("docker", "grace_seconds"), 60.0) or 60.0,
            start_timeout_seconds=self.number(("docker", "start_timeout_seconds"), 30.0)
            or 30.0,
            state_path=self.path(state) if state else None)

    def docker_host(self, at: _Path) -> DockerHost | None:
        value = self.get(at)
        if isinstance(value, str) and value:
            return DockerHost(url=value)
        if not isinstance(value, dict):
            self.problem(at, "must be a Docker engine URL or a mapping with url (and tls); "
                         f"got {show(value)}")
            return None
        self.check_keys(at, _HOST_KEYS)
        url = self.string((*at, "url"), None)
        if url is None:
            self.problem(at, "url: required field is missing (e.g. unix:///var/run/docker.sock)")
            return None
        files: dict[str, Path | None] = {k: None for k in _TLS_KEYS}
        tls = self.get((*at, "tls"))
        if isinstance(tls, dict):
            self.check_keys((*at, "tls"), _TLS_KEYS)
            for key in _TLS_KEYS:
                name = self.string((*at, "tls", key), None)
                files[key] = self.path(name) if name else None
            if (files["cert"] is None) != (files["key"] is None):
                self.problem((*at, "tls"), "cert and key go together")
                return None
        elif tls is not _MISSING and tls is not None:
            self.problem((*at, "tls"), f"must be a mapping of ca, cert, key; got {show(tls)}")
        return DockerHost(url=url, tls_ca=files["ca"], tls_cert=files["cert"],
                          tls_key=files["key"])

    def kubernetes(self) -> KubernetesSection:
        at = ("kubernetes",)
        default = KubernetesSection()
        if not self.section(at):
            return default
        namespace = self.string((*at, "namespace"), None) or default.namespace
        lease_name = self.string((*at, "lease_name"), None) or default.lease_name
        selector = self.string((*at, "label_selector"), None) or default.label_selector
        if selector.startswith(("=", ",")):
            self.problem((*at, "label_selector"), f"{show(selector)} must be a label selector "
                         "(key, key=value, key!=value, comma-separated)")
            selector = default.label_selector
        burst = self.get((*at, "burst"))
        if burst is _MISSING or burst is None:
            burst = default.burst
        elif isinstance(burst, bool) or not isinstance(burst, int) or burst < 1:
            self.problem((*at, "burst"), f"{show(burst)} must be a whole number >= 1")
            burst = default.burst
        timings = {key: self.number((*at, key), getattr(default, key)) or getattr(default, key)
                   for key in ("lease_duration_seconds", "renew_deadline_seconds",
                               "retry_period_seconds")}
        found = lease_timing_problem(timings["lease_duration_seconds"],
                                     timings["renew_deadline_seconds"],
                                     timings["retry_period_seconds"])
        if found is not None:  # on the first of the two fields the file gives, else the section
            keys, why = found
            given = [(*at, key) for key in keys if self.get((*at, key)) is not _MISSING]
            self.problem(given[0] if given else at, why)
            timings = {k: getattr(default, k) for k in timings}
        return KubernetesSection(
            namespace=namespace, qps=self.number((*at, "qps"), default.qps) or default.qps,
            burst=burst, namespaces=self.names((*at, "namespaces")), label_selector=selector,
            lease_name=lease_name, **timings)

    def names(self, at: _Path) -> tuple[str, ...]:
        value = self.get(at)
        if value is _MISSING or value is None:
            return ()
        if not isinstance(value, list):
            self.problem(at, f"must be a list of namespaces; got {show(value)}")
            return ()
        for index, item in enumerate(value):
            if not isinstance(item, str) or not item:
                self.problem((*at, index), f"must be a namespace name; got {show(item)}")
        return tuple(v for v in value if isinstance(v, str) and v)

    def alertmanager(self) -> AlertmanagerSection | None:
        at = ("alertmanager",)
        if not self.section(at):
            return None
        url = self.string((*at, "url"), None)
        if url is not None and not url.startswith(("http://", "https://")):
            self.problem((*at, "url"), f"{show(url)} must start with http:// or https://")
            url = None
        resend = self.number((*at, "resend_interval_seconds"), 60.0) or 60.0
        timeout = self.number((*at, "timeout_seconds"), 5.0) or 5.0
        if url is None:
            if self.get((*at, "url")) in (_MISSING, None):
                self.problem(at, "url: required field is missing (or leave alertmanager out)")
            return None
        return AlertmanagerSection(url=url, resend_interval_seconds=resend,
                                   timeout_seconds=timeout)

    def http(self) -> HttpSettings:
        at = ("http",)
        if not self.section(at):
            return HttpSettings()
        enabled = self.get((*at, "enabled"))
        if enabled is not _MISSING and not isinstance(enabled, bool):
            self.problem((*at, "enabled"), f"must be true or false; got {show(enabled)}")
        port = self.get((*at, "port"))
        if port is _MISSING:
            port = 9097
        elif isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            self.problem((*at, "port"), f"{show(port)} must be a whole number in 0 .. 65535 "
                         "(0: any free port)")
            port = 9097
        return HttpSettings(enabled=enabled if isinstance(enabled, bool) else True,
                            addr=self.string((*at, "addr"), "127.0.0.1") or "127.0.0.1",
                            port=port)

    def simulation(self) -> SimulationSettings:
        at = ("simulation",)
        if not self.section(at):
            return SimulationSettings()
        from policyd.sim.scenarios import SCENARIOS  # noqa: PLC0415 - numpy only when needed

        scenario = self.choice((*at, "scenario"), tuple(SCENARIOS), "flowcon-fixed-3")
        seed = self.get((*at, "seed"))
        if seed is _MISSING:
            seed = None
        elif seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)
                                   or seed < 0):
            self.problem((*at, "seed"), f"{show(seed)} must be a whole number >= 0 (or null: "
                         "the scenario's own seed)")
            seed = None
        speed = self.get((*at, "speed"))
        if speed is _MISSING:
            speed = 20.0
        elif speed == "max":
            speed = None
        elif isinstance(speed, bool) or not isinstance(speed, int | float) or not speed > 0:
            self.problem((*at, "speed"), f"{show(speed)} must be a positive number of virtual "
                         "seconds per wall second, or max")
            speed = 20.0
        return SimulationSettings(scenario=scenario, seed=seed,
                                  speed=None if speed is None else float(speed))

    # --- typed fields ----------------------------------------------------------------------

    def get(self, at: _Path) -> Any:
        value: Any = self.document.data
        for key in at:
            if not isinstance(value, dict) or key not in value:
                return _MISSING
            value = value[key]
        return value

    def problem(self, at: _Path, message: str) -> None:
        self.problems.append(Problem(file=self.source, line=self.document.line_of(at),
                                     field=field_name(at) or None, message=message))

    def check_keys(self, at: _Path, allowed: Sequence[str] | None = None) -> None:
        value = self.get(at) if at else self.document.data
        keys = list(allowed if allowed is not None else _KEYS[at])
        if isinstance(value, dict):
            for key in value:
                if key not in keys:
                    self.problem((*at, key), unknown_key(key, keys))

    def section(self, at: _Path) -> bool:
        """True when the section is present and a mapping (its keys are checked)."""
        value = self.get(at)
        if value is _MISSING or value is None:
            return False
        if not isinstance(value, dict):
            self.problem(at, f"must be a mapping with: {', '.join(_KEYS[at])}; got {show(value)}")
            return False
        self.check_keys(at)
        return True

    def string(self, at: _Path, default: str | None) -> str | None:
        value = self.get(at)
        if value is _MISSING or value is None:
            return default
        if not isinstance(value, str) or not value:
            self.problem(at, f"must be a non-empty string; got {show(value)}")
            return default
        return value

    def number(self, at: _Path, default: float | None) -> float | None:
        value = self.get(at)
        if value is _MISSING or value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            self.problem(at, f"{show(value)} must be a positive number")
            return default
        return float(value)

    def choice(self, at: _Path, allowed: Sequence[str], default: str) -> str:
        value = self.get(at)
        if value is _MISSING:
            return default
        if isinstance(value, str) and value in allowed:
            return value
        message = f"{show(value)} is not one of: {', '.join(allowed)}"
        close = did_you_mean(value, allowed) if isinstance(value, str) else None
        self.problem(at, f"{message}; did you mean '{close}'?" if close else message)
        return default

    def string_map(self, at: _Path) -> dict[str, str]:
        value = self.get(at)
        if value is _MISSING or value is None:
            return {}
        if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            self.problem(at, f"must map strings to strings (instance: node); got {show(value)}")
            return {}
        return dict(value)

    def path(self, name: str) -> Path:
        path = Path(name).expanduser()
        return path if path.is_absolute() else Path(os.path.normpath(self.base / path))
