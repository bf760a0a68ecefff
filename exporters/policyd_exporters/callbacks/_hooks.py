"""Binding a callback's hook methods to the names its framework calls, and noticing when the
framework stops calling them.

A callback overrides methods by name. When a framework renames a hook (Keras 2 called
`on_batch_end` what Keras 3 calls `on_train_batch_end`; Lightning 2.0 dropped `on_batch_end`
and an argument of `on_train_batch_end`), the old method is simply never called: training goes
on and policyd sees a job that reports nothing. Two checks make that loud instead of silent:

* `bind` (when the callback is built): each of our hooks is put under the first of its known
  names that the framework's base class defines. If the base class defines none of them, a
  `HookWarning` names the hook, the framework and its version; the callback is built anyway,
  and its other hooks keep working.
* `Liveness` (while training runs): the framework's step counter advanced but the hook that
  carries the loss was never called (a name the base class still defines but the framework no
  longer calls). It warns once. Meanwhile the coarse hooks (epoch end, train end) keep the
  steps counter and the progress ratio right; only the loss is missing.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Mapping


class HookWarning(UserWarning):
    """A framework does not define, or does not call, a hook a policyd callback relies on."""


def framework_version(base: type) -> str:
    """`__version__` of the top-level package `base` comes from, or "(unknown version)"."""
    top = sys.modules.get(base.__module__.partition(".")[0])
    return str(getattr(top, "__version__", "(unknown version)"))


def bind(
    name: str, hooks: type, base: type, names: Mapping[str, tuple[str, ...]], *, framework: str
) -> type:
    """A class `name(hooks, base)`: our hook methods first, the framework's base after them.

    `names` maps each hook method of `hooks` to the framework's other names for it (older or
    newer spellings). A hook the base class defines under its own name needs nothing; one it
    defines only under another name is bound under that name too.
    """
    namespace: dict[str, object] = {"__module__": hooks.__module__}
    for hook, others in names.items():
        spellings = (hook, *others)
        found = next((n for n in spellings if callable(getattr(base, n, None))), None)
        if found is None:
            warnings.warn(
                HookWarning(
                    f"{framework} {framework_version(base)}: {base.__module__}."
                    f"{base.__qualname__} has no hook {' or '.join(spellings)} (renamed?); the "
                    f"policyd callback will not hear about that event. See the versions "
                    f"policyd-exporters is tested with in its README."
                ),
                stacklevel=3,
            )
        elif found != hook:
            namespace[found] = getattr(hooks, hook)
    return type(name, (hooks, base), namespace)


class Liveness:
    """Whether the hook that carries the loss is called while the framework's steps advance."""

    def __init__(self, hook: str, *, framework: str) -> None:
        self.hook = hook
        self.framework = framework
        self.calls = 0
        self._start_step: int | None = None
        self._warned = False

    def start(self, step: int) -> None:
        """Training (re)starts at the framework's `step`."""
        self._start_step = step

    def called(self) -> None:
        self.calls += 1

    def check(self, step: int, *, due_steps: int = 1) -> None:
        """Warn once if the framework did at least `due_steps` steps since `start()` and the hook
        was never called."""
        if self.calls or self._warned or step - (self._start_step or 0) < due_steps:
            return
        self._warned = True
        warnings.warn(
            HookWarning(
                f"{self.framework} did {step - (self._start_step or 0)} steps but never called "
                f"{self.hook} (renamed or dropped?): policyd_training_loss is not reported; the "
                "steps counter and the progress ratio still are."
            ),
            stacklevel=2,
        )
