"""A real Alertmanager on 127.0.0.1 for integration tests (Debian's prometheus-alertmanager).

`alertmanager(directory)` writes a minimal configuration (one route to a receiver with no
integrations: nothing is notified, alerts are only stored), starts the server with gossip off
(`--cluster.listen-address=`), waits for `/-/ready` and stops it afterwards. A server that
cannot start is a failure with its log, never a skip: scripts/install-test-deps installs it.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.integration.servers import LOOPBACK, Server, free_port, launch, running

BINARIES = ("/usr/bin/prometheus-alertmanager", "alertmanager", "prometheus-alertmanager")

CONFIG = """\
route:
  receiver: blackhole
  group_by: ['...']
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: blackhole
"""


@dataclass
class Alertmanager(Server):
    def alerts(self, **filters: str) -> list[dict[str, Any]]:
        """`GET /api/v2/alerts` (active, silenced and inhibited ones by default)."""
        query = "&".join(f"{k}={v}" for k, v in filters.items())
        with urllib.request.urlopen(f"{self.url}/api/v2/alerts?{query}", timeout=5) as response:
            result: list[dict[str, Any]] = json.load(response)
            return result


def find_binary() -> str:
    for name in BINARIES:
        found = shutil.which(name)
        if found is not None:
            return found
    raise RuntimeError("prometheus-alertmanager is not installed: run scripts/install-test-deps "
                       "as root")


@contextlib.contextmanager
def alertmanager(directory: Path, *, config: str = CONFIG) -> Iterator[Alertmanager]:
    """A real Alertmanager listening on 127.0.0.1 (a free port), storing into `directory`."""
    binary = find_binary()
    port = free_port()
    config_file = directory / "alertmanager.yml"
    config_file.write_text(config)
    log = directory / "alertmanager.log"
    process = launch(
        [binary, f"--config.file={config_file}", f"--storage.path={directory / 'data'}",
         f"--web.listen-address={LOOPBACK}:{port}", "--cluster.listen-address=",
         "--log.level=debug"], log)
    with running(Alertmanager(url=f"http://{LOOPBACK}:{port}", process=process, log=log)) as am:
        yield am
