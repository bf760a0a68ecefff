"""The Docker engines polled: each managed container's facts and its CPU counter, kept in a
ring per container and turned into cores between polls.

For Docker hosts without cAdvisor (the docker-stats source, `docker_stats`).
`DockerStats.poll()` asks every host at once (one thread per host) and, on each host, every
managed container at once (a thread pool per host): `inspect` (start time, labels, CPU
settings) and `stats(stream=False, one_shot=True)` (API >= 1.41: one sample, no 1-2 s wait for
a second one); and, once per host, `info` (its CPUs, its `policyd.io/speed` label), plus the
held containers (`docker_held`). A host that fails is left out of the poll with a warning; a
container that stopped between the list and the inspect is simply not there.

The cumulative `cpu_stats.cpu_usage.total_usage` (ns) and the sample's `read` time are kept in
a ring per container id, with the cycle time `at` of the poll. Cores = delta(total_usage) /
delta(read) between consecutive polls, timed at the later poll's cycle time: "cores averaged
over the sample's preceding interval", which is what the engine reads in (t_{m-1}, t_m] when
the source polls once per cycle (the daemon's rhythm). A counter that went down (a restarted
container) gives no sample for that pair. A poll is read first and kept second (`read`,
`keep`), so that a cycle that fails after reading leaves the rings as they were. The rings
are memory only: a restart of policyd loses them, and its first cycle has no CPU samples.
Node usage is the sum over the managed containers only (other containers are not polled).

Settings are read through `DockerTargets`, a structural Protocol that the actuator's
`DockerSettings` satisfies: sources never import actuators (the layer contract); the SDK
client comes from `policyd.clients.docker_engine`, which both use.

Must not: read Prometheus, build the snapshot (`docker_stats`), or read markers.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Protocol, TypeVar

import docker
import docker.errors

from policyd.clients.docker_engine import EngineAddress, connect
from policyd.model import Series
from policyd.sources.cadvisor_info import parse_timestamp
from policyd.sources.docker_held import HELD_STATUS, HeldFacts, held_of, listed_name
from policyd.sources.speed_label import engine_speed

_R = TypeVar("_R")


class DockerTargets(Protocol):
    """What the Docker sources read from the settings (the actuator's DockerSettings)."""

    @property
    def hosts(self) -> Mapping[str, EngineAddress]: ...
    @property
    def managed_label(self) -> str: ...
    @property
    def api_version(self) -> str: ...
    @property
    def timeout_seconds(self) -> float: ...
    @property
    def stats_workers_per_host(self) -> int: ...


@dataclass(frozen=True, kw_only=True)
class ContainerFacts:
    """One running managed container as its engine describes it."""

    id: str
    name: str
    node: str
    started_at: float
    labels: Mapping[str, str]
    created_at: float | None = None
    cpu_shares: int = 0
    cpu_quota: int = 0
    cpu_period: int = 0


@dataclass(frozen=True, kw_only=True)
class HostReading:
    """One host's answer to a poll: its CPUs and its managed containers."""

    node: str
    cores: float
    containers: tuple[ContainerFacts, ...]
    held: tuple[HeldFacts, ...] = ()
    speed: float | None = None
    """Its `policyd.io/speed` engine label (None: not stated, or not a positive number)."""
    samples: tuple[tuple[str, float, float], ...] = ()
    """Each container's CPU counter: (id, the stats' read time s, total_usage ns)."""


@dataclass
class Poll:
    """Every host that answered, and what went wrong with the others (and with containers),
    for the cycle at time `at`."""

    at: float = 0.0
    hosts: list[HostReading] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def facts_of(attrs: Mapping[str, Any], node: str) -> ContainerFacts:
    """An inspect result -> ContainerFacts (pure)."""
    state, host, config = (attrs.get("State") or {}, attrs.get("HostConfig") or {},
                           attrs.get("Config") or {})
    return ContainerFacts(
        id=str(attrs["Id"]), name=str(attrs.get("Name", "")).lstrip("/"), node=node,
        started_at=parse_timestamp(state.get("StartedAt") or "1970-01-01T00:00:00Z"),
        labels=dict(config.get("Labels") or {}),
        created_at=parse_timestamp(attrs["Created"]) if attrs.get("Created") else None,
        cpu_shares=int(host.get("CpuShares") or 0), cpu_quota=int(host.get("CpuQuota") or 0),
        cpu_period=int(host.get("CpuPeriod") or 0))


class DockerStats:
    """Polls the engines; keeps each container's cumulative CPU counter in a ring."""

    def __init__(self, targets: DockerTargets, *,
                 clients: Mapping[str, docker.DockerClient] | None = None,
                 ring_samples: int = 2048) -> None:
        self.targets = targets
        self._clients = dict(clients or {})
        self._made: list[docker.DockerClient] = []
        self._cores: dict[str, float] = {}
        self._speed: dict[str, float | None] = {}
        self.rings: dict[str, deque[tuple[float, float, float]]] = {}
        self._ring_samples = ring_samples
        nodes = sorted(set(targets.hosts) | set(self._clients))
        self._hosts_pool = ThreadPoolExecutor(max(1, len(nodes)), "docker-stats")
        self._pools = {n: ThreadPoolExecutor(targets.stats_workers_per_host, f"stats-{n}")
                       for n in nodes}

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted(self._pools))

    def client(self, node: str) -> docker.DockerClient:
        if node not in self._clients:
            t = self.targets
            made = connect(t.hosts[node], api_version=t.api_version,
                           timeout_seconds=t.timeout_seconds)
            self._made.append(made)
            self._clients[node] = made
        return self._clients[node]

    def close(self) -> None:
        """Stop the thread pools and close the clients made here (not the ones passed in)."""
        self._hosts_pool.shutdown(wait=True, cancel_futures=True)
        for pool in self._pools.values():
            pool.shutdown(wait=True, cancel_futures=True)
        for client in self._made:
            client.close()
        self._made.clear()

    def poll(self, at: float) -> Poll:
        """Every host at once, for the cycle at time `at`, its samples kept in the rings."""
        return self.keep(self.read(at))

    def read(self, at: float) -> Poll:
        """Every host at once, for the cycle at time `at`; a host that fails is left out with
        a warning. The rings are left as they were (`keep` folds the samples in), so a cycle
        that fails after reading leaves no trace."""
        result = Poll(at=at)
        for reading, warnings in self._each_host(self._poll_host, result.warnings,
                                                 left_out="its containers"):
            result.hosts.append(reading)
            result.warnings.extend(warnings)
        return result

    def keep(self, poll: Poll) -> Poll:
        """`poll`'s samples folded into the rings (at its cycle time; none for a cycle no
        later than the ring's last), and the containers it did not see forgotten when every
        host answered; returns `poll`."""
        for host in poll.hosts:
            for cid, read_seconds, total in host.samples:
                ring = self.rings.setdefault(cid, deque(maxlen=self._ring_samples))
                if not ring or poll.at > ring[-1][0]:
                    ring.append((poll.at, read_seconds, total))
        alive = {c.id for h in poll.hosts for c in h.containers}
        polled = {h.node for h in poll.hosts}
        for cid in list(self.rings):
            if cid not in alive and polled == set(self.nodes):
                del self.rings[cid]  # gone (forget it only when every host answered)
        return poll

    def held(self) -> tuple[list[HeldFacts], set[str], list[str]]:
        """Every host's held containers and the names of its running managed ones (two lists
        an engine, no container inspected, no stats read), and what went wrong: a host that
        fails is left out with a warning, as in `read`."""
        held: list[HeldFacts] = []
        running: set[str] = set()
        warnings: list[str] = []
        for names, found in self._each_host(self._listed, warnings,
                                            left_out="its held containers"):
            running |= names
            held += found
        return held, running, warnings

    def _each_host(self, call: Callable[[str], _R], warnings: list[str], *,
                   left_out: str) -> Iterator[_R]:
        """`call(node)` on every host at once, the answers in the hosts' order; a host that
        fails is left out with a warning in `warnings` (saying `left_out` of it is)."""
        futures = {n: self._hosts_pool.submit(call, n) for n in self.nodes}
        for node, future in futures.items():
            try:
                answer = future.result()
            except (docker.errors.DockerException, OSError, KeyError, ValueError) as exc:
                warnings.append(f"node {node}: engine unreachable or unreadable "
                                f"({type(exc).__name__}: {exc}); {left_out} left out")
                continue
            yield answer

    def _listed(self, node: str) -> tuple[set[str], list[HeldFacts]]:
        client = self.client(node)
        label = self.targets.managed_label
        running = {listed_name(c) for c in client.api.containers(filters={"label": label})}
        held = client.api.containers(all=True, filters={"label": label, "status": HELD_STATUS})
        return running, [held_of(h, node) for h in held]

    def _poll_host(self, node: str) -> tuple[HostReading, list[str]]:
        client = self.client(node)
        warnings: list[str] = []
        if node not in self._cores:
            info = client.info()
            self._cores[node] = float(info["NCPU"])
            self._speed[node], problem = engine_speed(info.get("Labels") or [])
            if problem:
                warnings.append(f"node {node}: {problem}")
        listed = client.api.containers(filters={"label": self.targets.managed_label})
        held = client.api.containers(all=True, filters={"label": self.targets.managed_label,
                                                        "status": HELD_STATUS})
        pool = self._pools[node]
        jobs = [pool.submit(self._one, client, node, str(c["Id"])) for c in listed]
        found: list[ContainerFacts] = []
        samples: list[tuple[str, float, float]] = []
        for job in jobs:
            try:
                facts_found, sample = job.result()
            except docker.errors.NotFound:
                continue  # it stopped between the list and the inspect
            except (docker.errors.DockerException, OSError, KeyError, ValueError) as exc:
                warnings.append(f"node {node}: a container could not be read "
                                f"({type(exc).__name__}: {exc})")
                continue
            found.append(facts_found)
            samples.append(sample)
        return HostReading(node=node, cores=self._cores[node], containers=tuple(found),
                           held=tuple(held_of(h, node) for h in held),
                           speed=self._speed.get(node), samples=tuple(samples)), warnings

    def _one(self, client: docker.DockerClient, node: str, cid: str
             ) -> tuple[ContainerFacts, tuple[str, float, float]]:
        """A container's facts and its CPU counter sample (id, read time s, total ns)."""
        attrs = client.api.inspect_container(cid)
        stats = client.api.stats(cid, stream=False, one_shot=True)
        total = float(stats["cpu_stats"]["cpu_usage"]["total_usage"])
        read = stats.get("read")
        read_seconds = parse_timestamp(read) if read else time.time()
        return facts_of(attrs, node), (cid, read_seconds, total)

    def cores(self, container_id: str) -> Series:
        """Cores between consecutive polls, timed at the later poll's cycle time."""
        return cores_of(tuple(self.rings.get(container_id, ())))

    def latest_cores(self, container_id: str) -> float:
        """Cores between the last two polls (0 when there are fewer)."""
        series = self.cores(container_id)
        return float(series.values[-1]) if len(series) else 0.0


def cores_of(ring: Sequence[tuple[float, float, float]]) -> Series:
    """(cycle time, read time s, total_usage ns) samples -> cores per poll pair (pure)."""
    times: list[float] = []
    values: list[float] = []
    for (_, read_a, total_a), (at_b, read_b, total_b) in pairwise(ring):
        dt, du = read_b - read_a, total_b - total_a
        if dt > 0 and du >= 0:
            times.append(at_b)
            values.append(du / 1e9 / dt)
    return Series.of(times, values)
