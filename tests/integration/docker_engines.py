"""Real Docker engines for integration tests: N `dockerd` processes as N "hosts" on one machine.

Each engine has its own socket, data root, exec root and pid file (and its own containerd,
which dockerd starts under the exec root), and runs with `--bridge=none --iptables=false`: no
bridge, no NAT; containers use host networking, so all traffic stays on loopback. `cpus`
starts the engine under `taskset -c CPUS`: it then reports only those CPUs (`docker info`'s
NCPU counts the CPUs its process may run on), so it acts as a host of that many cores, and it
runs (with its containerd) on them, as a host's own daemons do. Paths live
under a short directory in /tmp, because unix socket paths are limited to 107 bytes (pytest's
tmp_path is often longer).

An engine that fails to start is a test failure with its log, never a skip: in CI dockerd comes
from scripts/install-test-deps (Debian's docker.io). Needs root, as dockerd does.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import docker

ROOT = Path(__file__).resolve().parents[2]
BUILD_IMAGE = ROOT / "deploy" / "trainer-image" / "build.sh"
TRAINER_TAG = "policyd-trainer:local"
MANAGED = "policyd.io/managed=true"


@dataclass
class Engine:
    """One running dockerd; `restart()` stops and starts it with the same state."""

    name: str
    base: Path
    log: Path
    process: subprocess.Popen[bytes] | None = None
    clients: list[docker.DockerClient] = field(default_factory=list)
    cpus: str | None = None
    """A CPU list (`taskset -c`): the engine's own CPUs, and its NCPU; None: all."""
    down: bool = False
    """Set from the moment `stop()` begins until `start()` has it answering again: pollers
    leave it alone meanwhile (docker-py leaks a socket for every connect that fails)."""

    @property
    def socket(self) -> Path:
        return self.base / "docker.sock"

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def command(self) -> list[str]:
        binary = shutil.which("dockerd")
        if binary is None:
            raise RuntimeError("dockerd is not installed: run scripts/install-test-deps as root")
        pinned = ["taskset", "-c", self.cpus] if self.cpus is not None else []
        return [*pinned, binary, "-H", self.url, "--data-root", str(self.base / "data"),
                "--exec-root", str(self.base / "exec"), "--pidfile", str(self.base / "docker.pid"),
                "--bridge=none", "--iptables=false", "--ip-masq=false", "--storage-driver=overlay2",
                "--log-level=warn"]

    def start(self, timeout_seconds: float = 30) -> None:
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        self.wait_ready(timeout_seconds)
        self.down = False

    def wait_ready(self, timeout_seconds: float) -> None:
        """Until `docker version` answers; fail with the log if dockerd dies or is slow."""
        assert self.process is not None
        cli = shutil.which("docker")
        deadline = time.monotonic() + timeout_seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"dockerd {self.name} exited with {self.process.returncode}:"
                                   f"\n{self.log.read_text(errors='replace')[-4000:]}")
            if self.socket.exists():
                if cli is not None:
                    done = subprocess.run([cli, "-H", self.url, "version"], capture_output=True,
                                          timeout=10, check=False)
                    if done.returncode == 0:
                        return
                else:
                    with contextlib.suppress(docker.errors.DockerException):
                        docker.DockerClient(base_url=self.url, version="auto").close()
                        return
            time.sleep(0.2)
        raise RuntimeError(f"dockerd {self.name} did not answer within {timeout_seconds} s:\n"
                           f"{self.log.read_text(errors='replace')[-4000:]}")

    def client(self) -> docker.DockerClient:
        made = docker.DockerClient(base_url=self.url, version="auto", timeout=120)
        self.clients.append(made)
        return made

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.down = True
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def kill(self) -> None:
        """Crash the engine: SIGKILL dockerd and its containerd (its process group, which
        holds no container's shim while none runs), so that it stops answering at once,
        connections already open included. `start()` brings it back with its state."""
        if self.process is None or self.process.poll() is not None:
            return
        self.down = True
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def restart(self) -> None:
        self.stop()
        self.start()

    def remove_all_containers(self) -> None:
        with contextlib.suppress(docker.errors.DockerException):
            api = docker.APIClient(base_url=self.url, version="auto", timeout=30)
            for c in api.containers(all=True):
                with contextlib.suppress(docker.errors.DockerException):
                    api.remove_container(c["Id"], force=True)
            api.close()


def _unmount_under(path: Path) -> None:
    """Unmount what dockerd may leave mounted (netns, overlay), deepest first."""
    with open("/proc/self/mounts") as mounts:
        points = [line.split()[1] for line in mounts]
    for point in sorted((p for p in points if p.startswith(str(path) + "/")),
                        key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


EngineCpus = str | Sequence[str | None] | None
"""The CPUs of a set of engines: one CPU list (`taskset -c`) for all, one per engine (None:
all CPUs), or None (every engine on every CPU)."""


def per_engine(cpus: EngineCpus, count: int) -> list[str | None]:
    """Each of `count` engines' CPU list from `cpus` (`EngineCpus`); a sequence must name one
    per engine (a ValueError otherwise)."""
    if cpus is None or isinstance(cpus, str):
        return [cpus] * count
    listed = list(cpus)
    if len(listed) != count:
        raise ValueError(f"cpus names {len(listed)} CPU lists for {count} engines: give one "
                         "per engine, or one string for all")
    return listed


@contextlib.contextmanager
def docker_engines(count: int, *, prefix: str = "pd-dk-",
                   cpus: EngineCpus = None) -> Iterator[list[Engine]]:
    """`count` engines named e1..eN (on the CPUs `cpus`, one list for all or one per engine:
    `per_engine`, `Engine.cpus`), started in parallel; stopped and deleted afterwards."""
    lists = per_engine(cpus, count)
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    engines = [Engine(name=f"e{i}", base=base / f"e{i}", log=base / f"e{i}.log",
                      cpus=lists[i - 1]) for i in range(1, count + 1)]
    for e in engines:
        e.base.mkdir()
    try:
        with ThreadPoolExecutor(count) as pool:
            for future in [pool.submit(e.start) for e in engines]:
                future.result()
        yield engines
    finally:
        for e in engines:
            for c in e.clients:
                c.close()
            e.remove_all_containers()
        with ThreadPoolExecutor(max(1, count)) as pool:
            list(pool.map(lambda e: e.stop(), engines))
        _unmount_under(base)
        shutil.rmtree(base, ignore_errors=True)


def build_trainer_image(engine: Engine, tag: str = TRAINER_TAG) -> str:
    """deploy/trainer-image/build.sh against `engine`; the image id."""
    env = {**os.environ, "DOCKER_HOST": engine.url}
    done = subprocess.run(["bash", str(BUILD_IMAGE), tag], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"build.sh failed ({done.returncode}): {done.stderr}")
    return done.stdout.strip().splitlines()[-1]


def host_binds(*extra: str) -> list[str]:
    """The read-only binds a trainer container needs (deploy/trainer-image/README.md)."""
    paths = ["/usr", "/etc", sys.base_prefix, str(ROOT)]
    for d in ("/bin", "/sbin", "/lib", "/lib64"):
        if os.path.isdir(d) and not os.path.islink(d):
            paths.append(d)
    return [f"{p}:{p}:ro" for p in dict.fromkeys(paths)] + list(extra)


def trainer_command(port: int, *, steps: int = 1_000_000, step_sleep: float = 0.0,
                    extra: Sequence[str] = ()) -> list[str]:
    python = str(ROOT / ".venv" / "bin" / "python")
    if not Path(python).exists():
        python = sys.executable
    return [python, str(ROOT / "exporters" / "examples" / "train_mnist_like.py"),
            "--addr", "127.0.0.1", "--port", str(port), "--steps", str(steps),
            "--checkpoint-dir", "/ckpt", "--threads", "1", "--print-every", "50",
            "--step-sleep", str(step_sleep), "--grace-seconds", "10", *extra]
