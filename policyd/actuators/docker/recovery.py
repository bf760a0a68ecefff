"""Half-done migrations on Docker: observed, then finished or rolled back by the shared table
(`policyd.actuators.move_recovery`: the rows, the rules they keep, and why).

A pair is (old = the container on the node it was moving from, new = the same name on the
node it was moving to). Pairs come from the intents in `ActuatorState.migrations` (written
before anything is created or stopped) and, at start-up, from containers labelled
`policyd.io/migrated-from=A` whose name also exists on node A (both present means half-done,
even if the state file was lost). A container of that name on the target without the label is
not ours, nor is one whose `move-id` is not the intent's: it counts as missing.

`settle` observes the pair (an engine that does not answer is "unknown"), asks the table,
takes the steps, and repeats while the verdict is "continue" or a replacement fails to start,
so one call finishes what can be finished now. What cannot ("wait": an engine down) keeps the
intent; the actuator calls `pending()` every cycle, so an engine that comes back gets the move
finished or rolled back without a restart of policyd. A failing step raises ActuationError and
leaves the intent (with its stage) for the next try.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from docker.models.containers import Container

from policyd.actuators.docker.engines import Engines
from policyd.actuators.docker.state import ActuatorState
from policyd.actuators.docker.steps import Steps
from policyd.actuators.errors import ActuationError
from policyd.actuators.move_recovery import (
    Intent,
    New,
    Old,
    Outcome,
    Situation,
    Step,
    Verdict,
    decide,
)
from policyd.model import labels

LOG = logging.getLogger(__name__)

MAX_ROUNDS = 4
"""Observe-decide-act rounds of one settlement (stop the old one, start the new one, roll
back if it dies: three at most)."""


def old_side(container: Container | None) -> tuple[Old, int | None]:
    """The old container's side and exit code (None while it runs or when unknown)."""
    if container is None:
        return "missing", None
    if container.status in ("running", "restarting", "paused"):
        return "running", None
    state = container.attrs.get("State") or {}
    code = state.get("ExitCode")
    if container.status == "exited" and code == 0 and not state.get("OOMKilled"):
        return "exited_ok", 0
    return "failed", int(code) if isinstance(code, int) else None


def new_side(container: Container | None) -> New:
    if container is None:
        return "missing"
    if container.status in ("running", "restarting", "paused"):
        return "running"
    return "created" if container.status == "created" else "exited"


@dataclass(frozen=True, kw_only=True)
class Recovered:
    """One pair settled (or looked at): where, what was found, what was done."""

    name: str
    from_node: str
    to_node: str
    old: Old
    new: New
    steps: tuple[Step, ...]
    outcome: Outcome
    why: str = ""


@dataclass
class Recovery:
    engines: Engines
    state: ActuatorState
    steps: Steps
    grace_seconds: Callable[[], float]

    # --- what is there ---------------------------------------------------------------------

    def observe(self, name: str, src: str, dst: str
                ) -> tuple[Situation, Container | None, Container | None]:
        intent = self.state.migrations.get(name)
        kind: Intent = "none"
        if intent is not None and (intent["from"], intent["to"]) == (src, dst):
            stage = self.state.stage(name)
            kind = ("starting" if stage == "starting" else
                    "rolling_back" if stage == "rolling_back" else "moving")
        try:
            old: Container | None = self.engines.get(src, name)
            old_state, code = old_side(old)
        except ActuationError as exc:
            LOG.warning("docker: move of %s: node %s does not answer: %s", name, src, exc)
            old, old_state, code = None, "unknown", None
        new_state: New
        try:
            new: Container | None = self.engines.get(dst, name)
            move_id = str((intent or {}).get("move_id") or "") if kind != "none" else ""
            if new is not None and (new.labels.get(labels.MIGRATED_FROM) != src or (
                    move_id and new.labels.get(labels.MOVE_ID, move_id) != move_id)):
                new = None  # not made by policyd, or by another move: not this move's
            new_state = new_side(new)
        except ActuationError as exc:
            LOG.warning("docker: move of %s: node %s does not answer: %s", name, dst, exc)
            new, new_state = None, "unknown"
        situation = Situation(intent=kind, old=old_state, new=new_state, old_exit_code=code)
        return situation, old, new

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
                if origin and origin != node and c.name and origin in self.engines.nodes:
                    try:
                        there = self.engines.get(origin, c.name)
                    except ActuationError as exc:
                        errors.append(str(exc))
                        continue
                    if there is not None:
                        found.add((c.name, origin, node))
        return found

    # --- settling ----------------------------------------------------------------------------

    def recover(self) -> list[Recovered]:
        """Settle every half-done migration (intents and labelled pairs); errors are collected
        and raised together."""
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

    def pending(self) -> list[Recovered]:
        """Settle the moves the state file says are pending (cheap when there are none)."""
        done: list[Recovered] = []
        errors: list[str] = []
        for name, intent in sorted(self.state.migrations.items()):
            try:
                done.append(self.settle(name, str(intent["from"]), str(intent["to"])))
            except ActuationError as exc:
                errors.append(str(exc))
        if errors:
            raise ActuationError("pending moves: " + "; ".join(errors))
        return done

    def settle(self, name: str, src: str, dst: str, *, count_failure: bool = True
               ) -> Recovered:
        """Observe, decide, act, until the verdict is final (see the module docstring).
        `count_failure`: a pending move rolled back counts as a failed move of the job (the
        engine backs off on it); False when the caller counts it itself."""
        steps: list[Step] = []
        for _ in range(MAX_ROUNDS):
            situation, old, new = self.observe(name, src, dst)
            verdict = decide(situation)
            if count_failure and verdict.outcome == "roll_back" and old is not None \
                    and situation.intent in ("moving", "starting"):
                count_failure = False
                self.state.record_failed_move(name, old.id or "", self.steps.clock())
            LOG.warning("docker: half-done migration of %s (%s -> %s, intent %s): old %s, "
                        "new %s: %s: %s (%s)", name, src, dst, situation.intent, situation.old,
                        situation.new, verdict.outcome, ", ".join(verdict.steps) or "no step",
                        verdict.why)
            again = self.act(name, (src, old), (dst, new), situation, verdict)
            steps.extend(verdict.steps)
            if not again:
                return Recovered(name=name, from_node=src, to_node=dst, old=situation.old,
                                 new=situation.new, steps=tuple(steps),
                                 outcome=verdict.outcome, why=verdict.why)
        raise ActuationError(f"the move of {name} ({src} -> {dst}) is not settled after "
                             f"{MAX_ROUNDS} rounds; tried again next cycle")

    def act(self, name: str, source: tuple[str, Container | None],
            target: tuple[str, Container | None], situation: Situation, verdict: Verdict
            ) -> bool:
        """Carry out `verdict` on (node, container) `source` (old) and `target` (new); True
        when the pair must be observed and decided again."""
        (src, old), (dst, new) = source, target
        pending = situation.intent != "none"
        if verdict.outcome == "roll_back" and pending and verdict.steps:
            self.state.set_stage(name, "rolling_back")
        for step in verdict.steps:
            if step == "stop_old":
                assert old is not None
                self.steps.stop(src, old, self.grace_seconds())
            elif step == "remove_old":
                assert old is not None
                self.steps.remove(src, old)
            elif step == "start_old":
                assert old is not None
                self.steps.start_again(src, old)
            elif step == "remove_new":
                assert new is not None
                self.steps.remove(dst, new)
            else:  # start_new
                assert new is not None
                if pending:
                    self.state.set_stage(name, "starting")
                problem = self.steps.start(dst, new)
                if problem is not None:
                    LOG.error("docker: replacement %s on node %s %s; rolling back", name, dst,
                              problem)
                    if pending:  # decided again as a rollback: the old one resumes
                        self.state.set_stage(name, "rolling_back")
                        return True
                    assert old is not None
                    self.steps.remove(dst, new)
                    self.steps.start_again(src, old)
                    return False
        match verdict.outcome:
            case "continue":
                return True
            case "wait" | "nothing":
                return False
            case "lost":
                LOG.error("docker: %s runs on neither %s nor %s (%s); its checkpoint is all "
                          "that is left", name, src, dst, verdict.why)
        if verdict.keep_intent:
            self.state.set_stage(name, "rolling_back")
        elif pending:
            self.state.end_migration(name)
        return False
