"""Which policyd a benchmark measures, and where it finds the repository's `tests` helpers.

Importing this module puts the repository it is in on `sys.path` after the directories that
PYTHONPATH names (`on_path`): a tree named by PYTHONPATH (an old commit's `git archive`, for a
before/after run) is the one measured, else this one. The benchmarks used to insert their
repository first, which measured this tree whatever PYTHONPATH said: an old/new comparison
silently compared the tree with itself.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def on_path() -> None:
    """The repository on `sys.path`, after the script's directory and PYTHONPATH's."""
    named = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(ROOT) not in sys.path:
        sys.path.insert(min(1 + len(named), len(sys.path)), str(ROOT))


on_path()
