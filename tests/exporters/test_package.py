"""The package imports nothing heavy: only prometheus_client, never a framework or torch."""

from __future__ import annotations

import subprocess
import sys

CHECK = """
import sys
import policyd_exporters, policyd_exporters.callbacks, policyd_exporters.logtail
heavy = {"torch", "lightning", "pytorch_lightning", "keras", "tensorflow", "transformers", "numpy"}
print(sorted(heavy & set(sys.modules)))
"""


def test_importing_the_package_loads_no_framework() -> None:
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True,
                         check=True, timeout=30).stdout
    assert out.strip() == "[]"
