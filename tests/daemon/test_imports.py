"""The daemon's start-up path loads no backend SDK it does not use: the simulated backend and
`policyd validate | plan | simulate` never import docker or kubernetes."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import policyd.cli, policyd.daemon
from policyd.daemon.settings_file import load_settings
from policyd.actuators.docker import DockerHost, DockerSettings
DockerSettings(hosts={"w1": DockerHost(url="unix:///run/docker.sock")})
print(sorted({"docker", "kubernetes"} & set(sys.modules)))
"""


def test_settings_and_cli_load_no_backend_sdk() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          check=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
