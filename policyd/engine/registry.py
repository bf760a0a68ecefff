"""The one table of policy kinds. Adding a kind = one module (its document model, its `plan`
and its `Kind` entry, `policyd.engine.kind`) + one line in `KINDS` below. No discovery by
import side effects: the table is written out, kind name -> module.

A kind's module is imported the first time its entry is asked for (`KINDS[name]`,
`KINDS.of(policy)`), not when the registry is: a command that reads one FlowCon policy does not
pay for building the other kinds' models (their pydantic schemas, 0.1 s of start-up). Listing
the names (`list(KINDS)`, `name in KINDS`) imports nothing; going through the entries
(`KINDS.values()`, `.items()`) imports every kind.

Everything outside the engine learns what a kind is from here (`KINDS.of(policy)`): the policy
loader picks the document model by `kind`, the scheduler and the simulator read the intervals
and the events that wake a kind, the sources read its inputs, a node agent keeps the kinds of
scope "node". `Registry.registered` adds a kind for the length of a `with` block, so a test can
drive a kind of its own through every path without touching this table.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Iterable, Iterator, Mapping

from policyd.engine.kind import Kind
from policyd.engine.spec import PolicyDocument


class Registry(Mapping[str, Kind]):
    """Kinds by name, in registration order (the order reports and schemas list them); each
    given as its entry or as the module that holds it (`KIND`), imported when first asked."""

    def __init__(self, kinds: Mapping[str, str | Kind]) -> None:
        self._kinds: dict[str, str | Kind] = {}
        self._lock = threading.RLock()  # a kind module that asks the registry while loading
        for name, kind in kinds.items():
            self._add(name, kind)

    def _add(self, name: str, kind: str | Kind) -> None:
        if name in self._kinds:
            raise ValueError(f"policy kind {name!r} is registered twice")
        self._kinds[name] = kind

    def __getitem__(self, name: str) -> Kind:
        entry = self._kinds[name]
        if isinstance(entry, Kind):
            return entry
        with self._lock:
            kind = importlib.import_module(entry).KIND
            if not isinstance(kind, Kind) or kind.name != name:
                raise TypeError(f"{entry}.KIND is not the Kind entry of {name!r}")
            self._kinds[name] = kind
            return kind

    def __iter__(self) -> Iterator[str]:
        return iter(self._kinds)

    def __len__(self) -> int:
        return len(self._kinds)

    def of(self, policy: PolicyDocument) -> Kind:
        """The entry of `policy`'s kind."""
        try:
            return self[policy.kind]
        except KeyError:
            raise LookupError(f"policy {policy.name!r} is of kind {policy.kind!r}, which is not "
                              f"registered (known: {', '.join(self._kinds)})") from None

    def admitting(self, policies: Iterable[PolicyDocument]) -> bool:
        """Whether any of `policies` starts held jobs (acts on "admission"): a source lists
        the held jobs only then."""
        return any("admission" in self.of(p).acts_on_of(p) for p in policies)

    @contextlib.contextmanager
    def registered(self, kind: Kind) -> Iterator[Kind]:
        """`kind` is registered inside the block only (for tests of the registry's users)."""
        self._add(kind.name, kind)
        try:
            yield kind
        finally:
            del self._kinds[kind.name]


KINDS = Registry({
    "FlowCon": "policyd.engine.flowcon",
    "SpeCon": "policyd.engine.specon",
    "Predictive": "policyd.engine.predictive",
    "Deadline": "policyd.engine.deadline",
    "QoE": "policyd.engine.qoe",
    "FlowCon2": "policyd.engine.flowcon2",
})
