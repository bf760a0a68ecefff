"""The actuator's view of its engines: one SDK client per node, made lazily, and calls that
go through the retry policy (`calls.Caller`). A missing container is None, not an error."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import docker
import docker.errors
from docker.models.containers import Container

from policyd.actuators.docker.calls import Caller
from policyd.actuators.docker.settings import DockerSettings, is_managed
from policyd.actuators.errors import ActuationError
from policyd.actuators.opt_out import OptOutKeys
from policyd.clients.docker_engine import connect

T = TypeVar("T")


class Engines:
    """node name -> client, plus the few lookups every action needs."""

    def __init__(self, settings: DockerSettings, caller: Caller,
                 clients: Mapping[str, docker.DockerClient] | None = None) -> None:
        self.settings = settings
        self.caller = caller
        self._clients: dict[str, docker.DockerClient] = dict(clients or {})
        self._made: list[docker.DockerClient] = []
        self._cores: dict[str, float] = {}
        self._lock = threading.Lock()
        self.opt_out = OptOutKeys()
        """What opts a container out of the decision being applied (`DockerActuator.apply`)."""

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.settings.hosts) | set(self._clients)))

    def client(self, node: str) -> docker.DockerClient:
        with self._lock:
            found = self._clients.get(node)
        if found is not None:
            return found
        host = self.settings.hosts.get(node)
        if host is None:
            raise ActuationError(f"node {node!r} is not one of the Docker hosts: "
                                 f"{', '.join(self.nodes) or '(none)'}")
        made = self.call(node, f"connect to {host.url}", lambda: connect(
            host, api_version=self.settings.api_version,
            timeout_seconds=self.settings.timeout_seconds))
        with self._lock:
            self._made.append(made)
            return self._clients.setdefault(node, made)

    def close(self) -> None:
        """Close the clients made here (not the ones passed in)."""
        with self._lock:
            made, self._made = self._made, []
            for node in [n for n, c in self._clients.items() if c in made]:
                del self._clients[node]
        for client in made:
            client.close()

    def call(self, node: str, what: str, fn: Callable[[], T]) -> T:
        return self.caller.call(f"node {node}", what, fn)

    def get(self, node: str, name: str) -> Container | None:
        """The container `name` (or id) on `node`, or None when the engine has none."""
        client = self.client(node)
        try:
            return self.call(node, f"inspect container {name}",
                             lambda: client.containers.get(name))
        except docker.errors.NotFound:
            return None

    def managed(self, node: str, name: str, found: Container | None = None) -> Container:
        """The container, which must exist and carry the managed label (`found`: as already
        read by the caller, else read now)."""
        found = found if found is not None else self.get(node, name)
        if found is None:
            raise ActuationError(f"container {name} not found on node {node}")
        if not is_managed(found.labels, self.settings.managed_label):
            raise ActuationError(f"container {name} on node {node} lacks the label "
                                 f"{self.settings.managed_label}; policyd leaves it alone")
        return found

    def actionable(self, node: str, name: str, found: Container | None = None) -> Container:
        """The container an action is about to change: managed (`managed`), and not opted out
        (a label `policyd.io/opt-out=true`, or the deciding policy's own opt-out key:
        `opt_out`), checked on the container as read now (`found`, when the caller has just
        read it), as the Kubernetes actuator checks the pod: the engine selects on its
        source's labels, which a profile may have read wrong or before the label was there."""
        found = self.managed(node, name, found)
        key = self.opt_out.which(found.labels)
        if key is not None:
            raise ActuationError(f"container {name} on node {node} is opted out "
                                 f"({key}=true); left alone")
        return found

    def list_managed(self, node: str, *, all_states: bool) -> list[Container]:
        client = self.client(node)
        found: list[Container] = self.call(node, "list containers", lambda: client.containers.list(
            all=all_states, filters={"label": self.settings.managed_label}))
        return found

    def cores(self, node: str) -> float:
        """The node's CPUs (`info()["NCPU"]`), asked once per node."""
        cached = self._cores.get(node)
        if cached is not None:
            return cached
        client = self.client(node)
        info: dict[str, Any] = self.call(node, "read engine info", client.info)
        cores = float(info.get("NCPU") or 0)
        if not cores > 0:
            raise ActuationError(f"node {node}: the engine reports no CPU count (NCPU)")
        self._cores[node] = cores
        return cores
