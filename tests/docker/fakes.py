"""Hand-made fakes of the Docker SDK objects the actuator and sources use: engines that keep
containers and images in dicts and can be told to fail. Passed in at our own seam
(`clients=`), never patched in by dotted path."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import docker
import docker.errors
import requests

_ids = itertools.count(1)


def api_error(status: int, text: str = "boom") -> docker.errors.APIError:
    response = requests.Response()
    response.status_code = status
    return docker.errors.APIError(text, response=response, explanation=text)


def not_found(what: str) -> docker.errors.NotFound:
    response = requests.Response()
    response.status_code = 404
    return docker.errors.NotFound(f"No such {what}", response=response,
                                  explanation=f"No such {what}")


class FakeContainer:
    def __init__(self, engine: FakeEngine, name: str, *, image: str = "sha256:img",
                 labels: dict[str, str] | None = None, status: str = "running",
                 binds: list[str] | None = None, env: list[str] | None = None,
                 host: dict[str, Any] | None = None, exit_on_stop: int = 0,
                 crash_on_start: bool = False, ref: str = "trainer:local") -> None:
        self.engine = engine
        self.id = f"{next(_ids):064x}"
        self.name = name
        self.exit_on_stop = exit_on_stop
        self.crash_on_start = crash_on_start
        self.stall_on_start = False
        self.exit_on_kill = False
        self.updates: list[dict[str, Any]] = []
        self.stopped_with: list[int] = []
        self.attrs: dict[str, Any] = {
            "Id": self.id, "Name": f"/{name}", "Image": image,
            "Config": {"Image": ref, "Cmd": ["python", "train.py"], "Entrypoint": None,
                       "Env": list(env or ["A=1", "POLICYD_CONTAINER=old"]),
                       "Labels": dict(labels if labels is not None
                                      else {"policyd.io/managed": "true"}),
                       "WorkingDir": "", "User": ""},
            "HostConfig": {"Binds": list(binds or ["/srv/ckpt:/ckpt"]), "NetworkMode": "host",
                           "CpuShares": 0, "CpuQuota": 0, "CpuPeriod": 0, "NanoCpus": 0,
                           **(host or {})},
            "State": {"Status": status, "Running": status == "running", "ExitCode": 0,
                      "StartedAt": "2026-11-22T02:00:00.5Z"},
        }

    @property
    def labels(self) -> dict[str, str]:
        return cast(dict[str, str], self.attrs["Config"]["Labels"])

    @property
    def status(self) -> str:
        return cast(str, self.attrs["State"]["Status"])

    def _set(self, status: str, code: int = 0) -> None:
        self.attrs["State"].update(Status=status, Running=status == "running", ExitCode=code)

    def reload(self) -> None:
        self.engine.hit("reload")
        if self.engine.containers.by_name.get(self.name) is not self:
            raise not_found(f"container: {self.name}")

    def stop(self, timeout: int = 10) -> None:
        self.engine.hit("stop")
        self.engine.log.append(f"stop {self.name} {timeout}")
        self.stopped_with.append(timeout)
        self._set("exited", self.exit_on_stop)

    def kill(self, signal: str = "SIGKILL") -> None:
        """The stop signal: logged; the job exits on the `stop` that follows (or at once
        when `exit_on_kill`, a job that checkpoints before policyd asks again)."""
        self.engine.hit("kill")
        self.engine.log.append(f"kill {self.name} {signal}")
        if self.exit_on_kill:
            self._set("exited", self.exit_on_stop)

    def start(self) -> None:
        self.engine.hit("start")
        self.engine.log.append(f"start {self.name}")
        if self.stall_on_start:
            return
        if self.crash_on_start:
            self._set("exited", 1)
        else:
            self._set("running")

    def remove(self, force: bool = False, v: bool = False) -> None:
        self.engine.hit("remove")
        self.engine.log.append(f"remove {self.name}")
        self.engine.containers.by_name.pop(self.name, None)

    def update(self, **kwargs: Any) -> dict[str, Any]:
        self.engine.hit("update")
        self.updates.append(kwargs)
        return {}

    def logs(self, tail: int = 3) -> bytes:
        return b"Traceback\nImportError: no torch\n"


class FakeContainers:
    def __init__(self, engine: FakeEngine) -> None:
        self.engine = engine
        self.by_name: dict[str, FakeContainer] = {}
        self.created: list[dict[str, Any]] = []

    def add(self, name: str, **kw: Any) -> FakeContainer:
        c = FakeContainer(self.engine, name, **kw)
        self.by_name[name] = c
        return c

    def get(self, name: str) -> FakeContainer:
        self.engine.hit("get")
        for c in self.by_name.values():
            if name in (c.name, c.id):
                return c
        raise not_found(f"container: {name}")

    def create(self, **spec: Any) -> FakeContainer:
        self.engine.hit("create")
        if spec["name"] in self.by_name:
            raise api_error(409, f'Conflict. The container name "/{spec["name"]}" is already '
                                 "in use")
        self.engine.log.append(f"create {spec['name']}")
        self.created.append(spec)
        c = self.add(spec["name"], image=spec["image"], labels=spec["labels"], status="created",
                     binds=spec["volumes"], env=spec["environment"])
        c.crash_on_start = self.engine.crash_new
        c.stall_on_start = self.engine.stall_new
        if self.engine.lose_create_answers:  # made, but the answer never arrives
            self.engine.lose_create_answers -= 1
            raise requests.exceptions.ConnectionError("Connection aborted: RemoteDisconnected")
        return c

    def list(self, all: bool = False, filters: dict[str, Any] | None = None
             ) -> list[FakeContainer]:
        self.engine.hit("list")
        key, _, value = str((filters or {}).get("label", "")).partition("=")
        return [c for c in self.by_name.values()
                if (all or c.status == "running") and (not key or c.labels.get(key) == value)]


@dataclass
class FakeImage:
    id: str
    tags: list[str] = field(default_factory=list)

    def save(self, named: bool = False) -> Iterator[bytes]:
        yield b"tar:" + self.id.encode()


class FakeImages:
    def __init__(self, engine: FakeEngine) -> None:
        self.engine = engine
        self.images: dict[str, FakeImage] = {}
        self.loaded: list[bytes] = []

    def get(self, ref: str) -> FakeImage:
        self.engine.hit("image")
        for image in self.images.values():
            if ref == image.id or ref in image.tags:
                return image
        raise not_found(f"image: {ref}")

    def load(self, data: bytes) -> list[FakeImage]:
        self.engine.hit("load")
        if self.engine.refuse_load:
            raise api_error(500, "no space left on device")
        self.loaded.append(data)
        image_id = data.decode().removeprefix("tar:")
        self.images[image_id] = FakeImage(image_id, ["trainer:local"])
        return [self.images[image_id]]


class FakeEngine:
    """A docker.DockerClient look-alike; `fail[op]` is a list of exceptions raised in turn."""

    def __init__(self, ncpu: int = 4, *, images: tuple[str, ...] = ("sha256:img",)) -> None:
        self.containers = FakeContainers(self)
        self.images = FakeImages(self)
        for image in images:
            self.images.images[image] = FakeImage(image, ["trainer:local"])
        self.ncpu = ncpu
        self.info_calls = 0
        self.fail: dict[str, list[Exception]] = {}
        self.calls: dict[str, int] = {}
        self.log: list[str] = []
        self.crash_new = False
        self.stall_new = False
        self.refuse_load = False
        self.lose_create_answers = 0

    def hit(self, op: str) -> None:
        self.calls[op] = self.calls.get(op, 0) + 1
        pending = self.fail.get(op)
        if pending:
            raise pending.pop(0)

    def info(self) -> dict[str, Any]:
        self.hit("info")
        self.info_calls += 1
        return {"NCPU": self.ncpu}


def as_clients(**engines: FakeEngine) -> dict[str, docker.DockerClient]:
    return cast(dict[str, docker.DockerClient], engines)
