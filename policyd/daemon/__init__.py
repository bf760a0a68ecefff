"""The daemon: policies on a schedule, observe -> decide -> act, until stopped.

Layout, one concept a module:

* `settings` (the settings file's pydantic models, one per section: the Docker, Kubernetes,
  Alertmanager and Lease settings are built on them) and `settings_file` (the YAML file,
  every problem with its line, worded as policy problems are);
* `scheduler.Daemon`: APScheduler jobs per policy, the schedule's back-off, the listener,
  hot reload, orderly shutdown (its docstring is the theory of operation);
* `ports`: the outcome observer (sources and actuators meet the daemon through `policyd.tick`),
  `reload`: polling the policy files, `metrics`: policyd's own metrics, `health` + `http`: the
  endpoints;
* `simulated`: the same hooks observing the simulated world in virtual time;
* `backend`: the Docker/Kubernetes/Prometheus/Alertmanager parts, imported only when chosen;
* `roles`: a node agent (`--node`: the kinds of scope node, on one node) or an elected manager
  (`--leader-elect`: `leader`'s Lease election; only the leader applies);
* `app.run`: settings in, exit code out; `signals`: SIGTERM/SIGINT set the stop event.

The daemon may import sources, actuators, alerts, policy, sim, tick, engine and model; never
the CLI. Settings are passed in; nothing here reads the environment.
"""

from policyd.actuators.docker.settings import DockerHost
from policyd.daemon.app import StartupError, run
from policyd.daemon.health import Health
from policyd.daemon.http import StatusServer
from policyd.daemon.metrics import DaemonMetrics
from policyd.daemon.ports import OutcomeObserver
from policyd.daemon.reload import PolicyWatcher, Reload
from policyd.daemon.scheduler import Daemon, TickReport
from policyd.daemon.settings import (
    AlertmanagerSection,
    DaemonSettings,
    DockerSection,
    HttpSettings,
    KubernetesSection,
    PrometheusSettings,
    SimulationSettings,
)
from policyd.daemon.settings_file import SettingsError, load_settings, load_settings_text
from policyd.daemon.signals import stop_on_signals

__all__ = [
    "AlertmanagerSection",
    "Daemon",
    "DaemonMetrics",
    "DaemonSettings",
    "DockerHost",
    "DockerSection",
    "Health",
    "HttpSettings",
    "KubernetesSection",
    "OutcomeObserver",
    "PolicyWatcher",
    "PrometheusSettings",
    "Reload",
    "SettingsError",
    "SimulationSettings",
    "StartupError",
    "StatusServer",
    "TickReport",
    "load_settings",
    "load_settings_text",
    "run",
    "stop_on_signals",
]
