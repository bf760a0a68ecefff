"""A Python base image for deploy/docker/Dockerfile, made without any registry.

`python_base(engine)` writes a root filesystem holding this machine's Python (the interpreter,
its shared library, the standard library and pip; no site-packages), the shared libraries they,
the Dockerfile's tools (`sh`, `rm`, `groupadd`, `useradd`) and manylinux wheels load (found with
`ldd`), the
account files those tools edit, and a wheelhouse of policyd's dependencies downloaded by pip
from the package index this machine uses; then `docker import`s it. The image's environment
points pip at the wheelhouse only (`PIP_NO_INDEX`, `PIP_FIND_LINKS`), so the Dockerfile's
`pip install .` runs unchanged and offline, as it would on `python:3.11-slim` with an index.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from pathlib import Path

from tests.integration.docker_engines import ROOT, Engine

BASE_TAG = "policyd-python-base:local"
TOOLS = ("/bin/sh", "/bin/rm", "/bin/mkdir", "/usr/sbin/groupadd", "/usr/sbin/useradd")
ACCOUNTS = ("passwd", "group", "shadow", "gshadow", "login.defs")
PIP = Path(sys.prefix) / "bin" / "pip"
MANYLINUX = ("libstdc++.so.6", "libgcc_s.so.1", "libpthread.so.0", "libdl.so.2", "librt.so.1",
             "libutil.so.1", "libresolv.so.2")
"""System libraries manylinux wheels (numpy, pydantic-core) may load without shipping them."""


def _system_library(name: str) -> Path:
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    found = re.search(rf"^\s*{re.escape(name)} \(libc6,x86-64\) => (\S+)$", out, re.MULTILINE)
    if found is None:
        raise RuntimeError(f"{name} is not installed on this machine")
    return Path(found.group(1))


def _libraries(binaries: list[Path]) -> set[Path]:
    """Every shared object `ldd` says the binaries load (the loader included)."""
    found: set[Path] = set()
    for chunk in range(0, len(binaries), 200):
        out = subprocess.run(["ldd", *map(str, binaries[chunk:chunk + 200])],
                             capture_output=True, text=True, check=False).stdout
        found |= {Path(p) for p in re.findall(r"(/\S+\.so[.\w-]*)", out)}
    return found


def _copy(source: Path, root: Path) -> None:
    """`source` into `root` at the same path, through the rootfs's merged-/usr links."""
    target = root / source.relative_to("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target, follow_symlinks=True)


def _rootfs(root: Path, wheels: Path) -> None:
    for d in ("usr/bin", "usr/sbin", "usr/lib", "usr/lib64", "etc", "tmp", "var/tmp", "root"):
        (root / d).mkdir(parents=True, exist_ok=True)
    for link in ("bin", "sbin", "lib", "lib64"):
        if os.path.islink(f"/{link}"):
            (root / link).symlink_to(os.readlink(f"/{link}"))
    (root / "tmp").chmod(0o1777)
    prefix = Path(sys.base_prefix)
    stdlib = Path(sysconfig.get_paths(vars={"base": str(prefix)})["stdlib"])
    skip = shutil.ignore_patterns("site-packages", "test", "__pycache__", "config-*",
                                  "idlelib", "tkinter", "turtledemo")
    shutil.copytree(stdlib, root / stdlib.relative_to("/"), ignore=skip, symlinks=True)
    site = stdlib / "site-packages"
    for entry in site.iterdir():  # pip only: policyd's own dependencies come from the wheels
        if entry.name == "pip" or re.match(r"pip-[\d.]+\.dist-info$", entry.name):
            shutil.copytree(entry, root / entry.relative_to("/"), symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__"))
    python = prefix / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    _copy(python, root)
    bin_dir = root / prefix.relative_to("/") / "bin"
    for name in ("python3", "python"):
        (bin_dir / name).symlink_to(python.name)
    for name in ("pip", "pip3"):  # what python:3.11-slim has on its PATH
        (bin_dir / name).write_text('#!/bin/sh\nexec python3 -m pip "$@"\n')
        (bin_dir / name).chmod(0o755)
    tools, system = list(map(Path, TOOLS)), list(map(_system_library, MANYLINUX))
    binaries = [python, *tools, *system, *(stdlib / "lib-dynload").glob("*.so")]
    for path in (*tools, *system, *_libraries(binaries)):
        _copy(path, root)
    for name in ACCOUNTS:
        _copy(Path("/etc") / name, root)
    shutil.copytree(wheels, root / "wheels")


def download_wheels(directory: Path) -> Path:
    """policyd's dependencies and its build backend as wheels, through this machine's pip
    configuration (the package index and its local mirrors)."""
    wheels = directory / "wheels"
    done = subprocess.run(
        [str(PIP), "download", "--quiet", "--disable-pip-version-check", "--only-binary=:all:",
         "--dest", str(wheels), str(ROOT), "setuptools>=68"],
        capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"pip download failed ({done.returncode}):\n{done.stderr[-4000:]}")
    for own in wheels.glob("policyd*"):  # pip saves the project itself too: the build makes it
        own.unlink()
    return wheels


def python_base(engine: Engine, directory: Path, tag: str = BASE_TAG) -> str:
    """Build the base image into `engine`; its id."""
    wheels = download_wheels(directory)
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        root = Path(tmp) / "rootfs"
        _rootfs(root, wheels)
        archive = Path(tmp) / "rootfs.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(root, arcname=".")
        bin_dir = Path(sys.base_prefix) / "bin"
        changes = [f"ENV PATH={bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin",
                   "ENV PIP_NO_INDEX=1", "ENV PIP_FIND_LINKS=/wheels", "WORKDIR /"]
        argv = ["docker", "-H", engine.url, "import"]
        for change in changes:
            argv += ["--change", change]
        done = subprocess.run([*argv, str(archive), tag], capture_output=True, text=True,
                              timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"docker import failed: {done.stderr}")
    return done.stdout.strip()
