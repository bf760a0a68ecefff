"""Half-done migrations: found at start-up (and before a migration of the same container),
finished or rolled back (DESIGN.md: "a half-done migration is finished or rolled back on the
next cycle").

A pair is (old = the container on the node it was moving from, new = the same name on the
node it was moving to). Pairs come from two places: the intents in `ActuatorState.migrations`
(written before the old container is stopped), and containers labelled
`policyd.io/migrated-from=A` whose name also exists on node A (after a completed migration the
old one is gone, so both present means half-done, even if the state file was lost). Each side
is `running`, `stopped` (created, exited, dead: for the new one, "failed") or `missing`.

| old     | new     | what happens                 | why                                    |
|---------|---------|------------------------------|----------------------------------------|
| stopped | running | remove old                   | it worked; only the clean-up is left   |
| running | running | stop old (grace), remove old | two trainers, one checkpoint directory: |
|         |         |                              | keep the new one (it resumed from it)  |
| stopped | stopped | remove new, start old        | the new one never ran or died: roll    |
|         |         |                              | back; the old resumes from checkpoint  |
| running | stopped | remove new                   | old never stopped, or already restarted|
| stopped | missing | start old (intent only)      | crashed before create / after removal  |
| running | missing | nothing (intent only)        | nothing happened yet, or rolled back   |
| missing | stopped | start new (intent only)      | the old one is gone: the new is the job|
| missing | running | nothing                      | done                                   |
| missing | missing | nothing, reported            | job lost (its checkpoint remains)      |

Rows marked "intent only" apply only with an intent: without it, "old stopped, new missing"
is just a job that finished. Every handled pair's intent is cleared.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Literal

from docker.models.containers import Container

from policyd.actuators.docker.engines import Engines
from policyd.actuators.docker.state import ActuatorState
from policyd.actuators.errors import ActuationError
from policyd.model import labels

LOG = logging.getLogger(__name__)

Side = Literal["running", "stopped", "missing"]
Step = Literal["remove_old", "stop_old", "start_old", "remove_new", "start_new"]

RULES: dict[tuple[Side, Side], tuple[Step, ...]] = {
    ("stopped", "running"): ("remove_old",),
    ("running", "running"): ("stop_old", "remove_old"),
    ("stopped", "stopped"): ("remove_new", "start_old"),
    ("running", "stopped"): ("remove_new",),
    ("stopped", "missing"): ("start_old",),
    ("running", "missing"): (),
    ("missing", "stopped"): ("start_new",),
    ("missing", "running"): (),
    ("missing", "missing"): (),
}
"""The table of the module docstring."""


def side(container: Container | None) -> Side:
    if container is None:
        return "missing"
    return "running" if container.status in ("running", "restarting", "paused") else "stopped"


def steps_for(old: Side, new: Side, *, intent: bool) -> tuple[Step, ...]:
    """What to do with a pair; without an intent only pairs where both exist are touched."""
    if not intent and "missing" in (old, new):
        return ()
    return RULES[(old, new)]


@dataclass(frozen=True, kw_only=True)
class Recovered:
    """One pair looked at: where, what was found, what was done."""

    name: str
    from_node: str
    to_node: str
    old: Side
    new: Side
    steps: tuple[Step, ...]


@dataclass
class Recovery:
    engines: Engines
    state: ActuatorState
    grace_seconds: Callable[[], float]

    def pairs(self, errors: list[str]) -> set[tuple[str, str, str]]:
        """(name, from, to) of every intent and every labelled pair found on the engines that
        answer (the others are named in `errors`)."""
        found = {(name, str(i["from"]), str(i["to"])) for name, i in self.state.migrations.items()}
        for node in self.engines.nodes:
            try:
                listed = self.engines.list_managed(node, all_states=True)
            except ActuationError as exc:
                errors.append(str(exc))
                continue
            for c in listed:
                origin = c.labels.get(labels.MIGRATED_FROM)
                if origin and origin != node and c.name and origin in self.engines.nodes \
                        and self.engines.get(origin, c.name) is not None:
                    found.add((c.name, origin, node))
        return found

    def recover(self) -> list[Recovered]:
        """Settle every half-done migration; errors are collected and raised together."""
        done: list[Recovered] = []
        errors: list[str] = []
        for name, src, dst in sorted(self.pairs(errors)):
            try:
                done.append(self.settle(name, src, dst))
            except ActuationError as exc:
                errors.append(str(exc))
        if errors:
            raise ActuationError(f"recovery: {len(errors)} problems, half-done migrations may "
                                 "remain: " + "; ".join(errors))
        return done

    def settle(self, name: str, src: str, dst: str) -> Recovered:
        intent = self.state.migrations.get(name)
        has_intent = intent is not None and (intent["from"], intent["to"]) == (src, dst)
        old, new = self.engines.get(src, name), self.engines.get(dst, name)
        if new is not None and new.labels.get(labels.MIGRATED_FROM) != src:
            new = None  # a container of the same name that policyd did not create: not ours
        plan = steps_for(side(old), side(new), intent=has_intent)
        LOG.warning("docker: half-done migration of %s (%s -> %s): old %s, new %s: %s", name,
                    src, dst, side(old), side(new), ", ".join(plan) or "nothing to do")
        if (side(old), side(new)) == ("missing", "missing") and has_intent:
            LOG.error("docker: %s is on neither %s nor %s; its checkpoint is all that is left",
                      name, src, dst)
        for step in plan:
            node, target = (src, old) if step.endswith("_old") else (dst, new)
            assert target is not None
            what = f"{step.replace('_', ' ')} {name}"
            if step.startswith("remove"):
                self.engines.call(node, what, partial(target.remove, force=True))
            elif step.startswith("start"):
                self.engines.call(node, what, target.start)
            else:
                grace = round(self.grace_seconds())
                self.engines.call(node, what, partial(target.stop, timeout=grace))
        if has_intent:
            self.state.end_migration(name)
        return Recovered(name=name, from_node=src, to_node=dst, old=side(old), new=side(new),
                         steps=plan)
