"""The one table of policy kinds. Adding a kind = one module (its document model, its `plan`
and its `Kind` entry, `policyd.engine.kind`) + one line in `KINDS` below. No discovery by
import side effects: the table is written out.

Everything outside the engine learns what a kind is from here (`KINDS.of(policy)`): the policy
loader picks the document model by `kind`, the scheduler and the simulator read the intervals
and the events that wake a kind, the sources read its inputs, a node agent keeps the kinds of
scope "node". `Registry.registered` adds a kind for the length of a `with` block, so a test can
drive a kind of its own through every path without touching this table.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping

from policyd.engine import deadline, flowcon, predictive, qoe, specon
from policyd.engine.kind import Kind
from policyd.engine.spec import PolicyDocument


class Registry(Mapping[str, Kind]):
    """Kinds by name, in registration order (the order reports and schemas list them)."""

    def __init__(self, kinds: Iterable[Kind]) -> None:
        self._kinds: dict[str, Kind] = {}
        for kind in kinds:
            self._add(kind)

    def _add(self, kind: Kind) -> None:
        if kind.name in self._kinds:
            raise ValueError(f"policy kind {kind.name!r} is registered twice")
        self._kinds[kind.name] = kind

    def __getitem__(self, name: str) -> Kind:
        return self._kinds[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._kinds)

    def __len__(self) -> int:
        return len(self._kinds)

    def of(self, policy: PolicyDocument) -> Kind:
        """The entry of `policy`'s kind."""
        try:
            return self._kinds[policy.kind]
        except KeyError:
            raise LookupError(f"policy {policy.name!r} is of kind {policy.kind!r}, which is not "
                              f"registered (known: {', '.join(self._kinds)})") from None

    @contextlib.contextmanager
    def registered(self, kind: Kind) -> Iterator[Kind]:
        """`kind` is registered inside the block only (for tests of the registry's users)."""
        self._add(kind)
        try:
            yield kind
        finally:
            del self._kinds[kind.name]


KINDS = Registry([
    flowcon.KIND,
    specon.KIND,
    predictive.KIND,
    deadline.KIND,
    qoe.KIND,
])
