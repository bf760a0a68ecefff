"""Find a framework's callback base class on demand, or say which extra installs it."""

from __future__ import annotations

import importlib
from collections.abc import Sequence


def import_base(modules: Sequence[str], attr: str, *, framework: str, extra: str) -> type:
    """`getattr(module, attr)` for the first of `modules` that is installed.

    A module that is installed but fails to import raises its own error, not ours.
    """
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and (name == exc.name or name.startswith(exc.name + ".")):
                continue  # not installed: try the next spelling
            raise
        base = getattr(module, attr)
        if not isinstance(base, type):
            raise TypeError(f"{name}.{attr} is not a class")
        return base
    raise ImportError(
        f"this callback needs {framework} (tried to import {', '.join(modules)}): "
        f"pip install 'policyd-exporters[{extra}]'"
    )
