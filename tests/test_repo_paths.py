"""The project stands alone: no tracked file names a path of the machine it was written on.

Such paths are computed here, never written down: the clone's own directory, the prefix of the
Python that runs the tests, and the home directory. A file that needs one says how to find it
(`PROJECT=$(pwd)`, `sys.base_prefix`), as deploy/trainer-image/README.md does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def machine_paths() -> list[str]:
    paths = [str(ROOT), sys.base_prefix]
    home = os.path.expanduser("~")
    if home not in ("", "/"):
        paths.append(home.rstrip("/") + "/")
    return paths


def test_no_tracked_file_names_this_machines_paths() -> None:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True,
                            timeout=60).stdout.decode()
    found = []
    for name in filter(None, listed.split("\0")):
        path = ROOT / name
        if not path.is_file():
            continue  # deleted in the worktree, not yet committed
        text = path.read_bytes().decode("utf-8", errors="replace")
        found += [f"{name}: {p}" for p in machine_paths() if p in text]
    assert found == []
