"""The Docker actuator: FlowCon's CPU limits and SpeCon's migrations on Docker engines.

Layout: `settings` (hosts, timings, label names, `ActuationError`), `calls` (SDK clients and
the retry policy), `engines` (per-node clients and lookups), `cpu` (SetCpu as update
arguments, pure), `state` (what Docker cannot hold on a running container), `migration` (the
checkpoint protocol), `recovery` (half-done migrations), `actuator` (`DockerActuator`).
Imports no source, simulator, daemon or CLI.
"""

from policyd.actuators.docker.actuator import DockerActuator
from policyd.actuators.docker.recovery import RULES, Recovered
from policyd.actuators.docker.settings import ActuationError, DockerHost, DockerSettings

__all__ = ["RULES", "ActuationError", "DockerActuator", "DockerHost", "DockerSettings",
           "Recovered"]
