"""The Docker actuator: FlowCon's CPU limits and SpeCon's migrations on Docker engines.

Layout: `settings` (the settings file's `docker` section, hosts, timings), `calls` (SDK
clients and the retry policy), `engines` (per-node clients and lookups), `cpu` (SetCpu as update
arguments, pure), `state` (what Docker cannot hold on a running container), `steps` (stop,
start and confirm, remove), `migration` (the checkpoint protocol), `recovery` (half-done
migrations, by the shared table `policyd.actuators.move_recovery`), `actuator`
(`DockerActuator`).
Imports no source, simulator, daemon or CLI.

The settings values are imported here eagerly and import no Docker SDK, so the daemon's
settings file can hold `DockerHost` values without loading the SDK (the simulated backend
never needs it); everything that talks to an engine is loaded on first use (PEP 562).
"""

from typing import TYPE_CHECKING, Any

from policyd.actuators.docker.settings import DockerHost, DockerSection, DockerSettings, DockerTls
from policyd.actuators.errors import ActuationError

if TYPE_CHECKING:
    from policyd.actuators.docker.actuator import DockerActuator
    from policyd.actuators.docker.recovery import Recovered

__all__ = ["ActuationError", "DockerActuator", "DockerHost", "DockerSection",
           "DockerSettings", "DockerTls", "Recovered"]


def __getattr__(name: str) -> Any:
    if name == "DockerActuator":
        from policyd.actuators.docker.actuator import DockerActuator  # noqa: PLC0415

        return DockerActuator
    if name == "Recovered":
        from policyd.actuators.docker import recovery  # noqa: PLC0415

        return getattr(recovery, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
