"""Which keys opt a workload out of the decision an actuator is applying.

The engine leaves opted-out workloads alone; every actuator checks again on the workload as it
reads it just before acting (a source may have read the label wrong, or the label came after
the snapshot). The key is the deciding policy's `selector.opt_out_key` (`Decision.opt_out_key`),
and the default `policyd.io/opt-out` always counts too: an actuator sets both for the length of
one `apply` (`during`), under its lock, and every check before an action asks `which`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from policyd.model import Decision, labels


class OptOutKeys:
    """The keys that opt a workload out now (the default alone outside an `apply`)."""

    def __init__(self) -> None:
        self.keys: tuple[str, ...] = (labels.OPT_OUT,)

    @contextmanager
    def during(self, decision: Decision) -> Iterator[None]:
        """`decision`'s opt-out key counts as well until the block ends."""
        previous = self.keys
        self.keys = tuple(dict.fromkeys((labels.OPT_OUT, decision.opt_out_key)))
        try:
            yield
        finally:
            self.keys = previous

    def which(self, *found: Mapping[str, object] | None) -> str | None:
        """The first key that `found` (labels, annotations) sets to "true", or None."""
        return next((k for k in self.keys if labels.set_true(k, *found)), None)
