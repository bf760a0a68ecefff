"""What to do with a half-done move of a training job: finish it or roll it back. Pure.

Shared by every backend that moves a job by checkpoint (the Docker actuator; the Kubernetes
actuator's move record follows the same rules): the backend observes a `Situation` (its intent
record, the old and the new workload, the old one's exit code, whether a checkpoint is there),
`decide` looks it up in `TABLE` and returns a `Verdict`: the steps to take, in order, and what
they come to. The backend carries the steps out, then observes and decides again until the
verdict is final (`Outcome` other than "continue"). No I/O, no clock: an engine that does not
answer is the side "unknown", which the backend reports.

Theory. A move goes: intent recorded ("moving") -> replacement created -> SIGTERM to the old
one -> it checkpoints and exits 0 -> intent marked "starting" -> replacement started and
confirmed -> old one removed -> intent cleared. A rollback marks the intent "rolling_back",
starts the old one again and removes the replacement, then clears the intent. Three rules
follow, and every row of the table keeps them:

1. Never two trainers: the new one is started only when the old one is known to be down
   (exited or gone); the old one is started again only when the new one is known never to
   have been started by the move (target unreachable before "starting"), or is down.
2. An old job that exited 0 while a move is pending wrote its checkpoint on our SIGTERM: it
   is a job to resume (on the target when the replacement is there, else where it was), never
   a finished job.
3. Never 0 trainers for longer than it takes: an old one that is down comes back (here or
   there) in the same settlement, unless the only engine that could hold the job does not
   answer ("wait": the backend tries again every cycle).

Sides. `old`: running | exited_ok (exit code 0) | failed (any other code, killed, dead, never
started) | missing | unknown. `new`: running | created (never started) | exited | missing |
unknown. The intent: none (only pairs whose both sides exist are looked at: found by the
replacement's `migrated-from` label) | moving | starting | rolling_back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Intent = Literal["none", "moving", "starting", "rolling_back"]
Old = Literal["running", "exited_ok", "failed", "missing", "unknown"]
New = Literal["running", "created", "exited", "missing", "unknown"]
Step = Literal["stop_old", "remove_old", "start_old", "remove_new", "start_new"]
Outcome = Literal["finish", "roll_back", "continue", "wait", "lost", "nothing"]
"""finish / roll_back: after the steps the move is settled that way, the intent cleared.
continue: take the steps, then observe and decide again (the old one was asked to stop).
wait: nothing can be done now (an engine does not answer); the intent stays, tried next cycle.
lost: the job runs nowhere and cannot be started (or its replacement failed to); the intent
is cleared, an error reported.
nothing: not a move (no intent and not both sides), nothing to do."""


@dataclass(frozen=True, kw_only=True)
class Situation:
    """What the backend observed of one move."""

    intent: Intent
    old: Old
    new: New
    old_exit_code: int | None = None
    """The old one's exit code when it is down (None: unknown or not down)."""
    checkpoint: bool | None = None
    """Whether the job's checkpoint exists (None: the backend cannot see it)."""


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """What to do: `steps` in order, then `outcome`; `keep_intent` (a rollback whose
    replacement cannot be removed yet: the intent stays, marked rolling_back); `why`."""

    outcome: Outcome
    steps: tuple[Step, ...] = ()
    keep_intent: bool = False
    why: str = ""


def _v(outcome: Outcome, steps: str, why: str, *, keep: bool = False) -> Verdict:
    return Verdict(outcome=outcome, steps=tuple(steps.split()),  # type: ignore[arg-type]
                   keep_intent=keep, why=why)


_KEEP_NEW = "two trainers on one checkpoint directory: keep the new one, stop the old"
_STALE = "a replacement left from an earlier attempt that never took over: remove it"

TABLE: dict[tuple[Intent, Old, New], Verdict] = {
    # --- no intent (state file lost, or written by an older policyd): both sides exist ---
    ("none", "running", "running"): _v("finish", "stop_old remove_old", _KEEP_NEW),
    ("none", "running", "created"): _v("roll_back", "remove_new", _STALE),
    ("none", "running", "exited"): _v("roll_back", "remove_new", _STALE),
    ("none", "exited_ok", "running"): _v("finish", "remove_old", "the move worked; clean up"),
    ("none", "failed", "running"): _v("finish", "remove_old", "the new one runs; clean up"),
    ("none", "exited_ok", "created"): _v(
        "finish", "start_new remove_old", "the old one checkpointed (exit 0): resume there"),
    ("none", "exited_ok", "exited"): _v(
        "roll_back", "remove_new start_old", "the new one died: resume where it was"),
    ("none", "failed", "created"): _v(
        "roll_back", "remove_new start_old", "no checkpoint on SIGTERM: resume where it was"),
    ("none", "failed", "exited"): _v(
        "roll_back", "remove_new start_old", "both down: resume where it was"),
    # --- moving: intent recorded, SIGTERM maybe sent, the new one never started by us ---
    ("moving", "running", "missing"): _v(
        "roll_back", "", "nothing was created yet: the old one simply goes on"),
    ("moving", "running", "created"): _v(
        "continue", "stop_old", "maybe checkpointing on our SIGTERM: finish the stop"),
    ("moving", "running", "running"): _v("finish", "stop_old remove_old", _KEEP_NEW),
    ("moving", "running", "exited"): _v(
        "roll_back", "remove_new", "the old one runs, the new one died: remove it"),
    ("moving", "running", "unknown"): _v(
        "wait", "", "the old one runs; the target does not answer (its exit decides)"),
    ("moving", "exited_ok", "created"): _v(
        "finish", "start_new remove_old", "checkpointed (exit 0), never a finished job: "
        "start the replacement"),
    ("moving", "exited_ok", "running"): _v("finish", "remove_old", "the move worked; clean up"),
    ("moving", "exited_ok", "exited"): _v(
        "roll_back", "remove_new start_old", "the replacement died: resume where it was"),
    ("moving", "exited_ok", "missing"): _v(
        "roll_back", "start_old", "checkpointed but no replacement: resume where it was"),
    ("moving", "exited_ok", "unknown"): _v(
        "roll_back", "start_old", "checkpointed, target unreachable and never started: "
        "resume where it was; remove the replacement once it answers", keep=True),
    ("moving", "failed", "created"): _v(
        "roll_back", "remove_new start_old", "no clean exit (no checkpoint on SIGTERM): "
        "resume where it was from its newest checkpoint"),
    ("moving", "failed", "running"): _v("finish", "remove_old", "the new one runs; clean up"),
    ("moving", "failed", "exited"): _v(
        "roll_back", "remove_new start_old", "both down: resume where it was"),
    ("moving", "failed", "missing"): _v(
        "roll_back", "start_old", "no replacement: resume where it was"),
    ("moving", "failed", "unknown"): _v(
        "roll_back", "start_old", "target unreachable and never started: resume where it "
        "was; remove the replacement once it answers", keep=True),
    ("moving", "missing", "created"): _v(
        "finish", "start_new", "the old one is gone: the replacement is the job"),
    ("moving", "missing", "running"): _v("finish", "", "done; only the record was left"),
    ("moving", "missing", "exited"): _v(
        "finish", "start_new", "the old one is gone: the replacement is the job"),
    ("moving", "missing", "missing"): _v("lost", "", "on neither node"),
    ("moving", "missing", "unknown"): _v(
        "wait", "", "the old one is gone and the target does not answer"),
    # --- starting: the old one exited 0, the replacement may have been started -------------
    ("starting", "running", "missing"): _v(
        "roll_back", "", "the replacement is gone and the old one runs again"),
    ("starting", "running", "created"): _v(
        "roll_back", "remove_new", "the old one runs again (restarted by hand?): remove the "
        "replacement"),
    ("starting", "running", "running"): _v("finish", "stop_old remove_old", _KEEP_NEW),
    ("starting", "running", "exited"): _v(
        "roll_back", "remove_new", "the old one runs, the new one died: remove it"),
    ("starting", "running", "unknown"): _v(
        "wait", "", "the old one runs and the target does not answer"),
    ("starting", "exited_ok", "created"): _v(
        "finish", "start_new remove_old", "checkpointed (exit 0), never a finished job: "
        "start the replacement"),
    ("starting", "exited_ok", "running"): _v("finish", "remove_old", "the move worked"),
    ("starting", "exited_ok", "exited"): _v(
        "roll_back", "remove_new start_old", "the replacement died: resume where it was"),
    ("starting", "exited_ok", "missing"): _v(
        "roll_back", "start_old", "no replacement: resume where it was"),
    ("starting", "exited_ok", "unknown"): _v(
        "wait", "", "the replacement may run on the target, which does not answer: starting "
        "the old one could make two"),
    ("starting", "failed", "created"): _v(
        "roll_back", "remove_new start_old", "resume where it was"),
    ("starting", "failed", "running"): _v("finish", "remove_old", "the move worked"),
    ("starting", "failed", "exited"): _v(
        "roll_back", "remove_new start_old", "both down: resume where it was"),
    ("starting", "failed", "missing"): _v(
        "roll_back", "start_old", "no replacement: resume where it was"),
    ("starting", "failed", "unknown"): _v(
        "wait", "", "the replacement may run on the target, which does not answer"),
    ("starting", "missing", "created"): _v("finish", "start_new", "the replacement is the job"),
    ("starting", "missing", "running"): _v("finish", "", "done; only the record was left"),
    ("starting", "missing", "exited"): _v("finish", "start_new", "the replacement is the job"),
    ("starting", "missing", "missing"): _v("lost", "", "on neither node"),
    ("starting", "missing", "unknown"): _v(
        "wait", "", "the old one is gone and the target does not answer"),
    # --- rolling_back: the old one is (to be) started again; the replacement must go -------
    ("rolling_back", "running", "missing"): _v("roll_back", "", "rolled back"),
    ("rolling_back", "running", "created"): _v("roll_back", "remove_new", "rolled back"),
    ("rolling_back", "running", "exited"): _v("roll_back", "remove_new", "rolled back"),
    ("rolling_back", "running", "running"): _v(
        "roll_back", "remove_new", "the replacement was started by someone else: the "
        "rollback keeps the old one"),
    ("rolling_back", "running", "unknown"): _v(
        "wait", "", "rolled back; the replacement is removed once its engine answers"),
    ("rolling_back", "exited_ok", "created"): _v(
        "roll_back", "remove_new start_old", "start the old one again"),
    ("rolling_back", "exited_ok", "exited"): _v(
        "roll_back", "remove_new start_old", "start the old one again"),
    ("rolling_back", "exited_ok", "missing"): _v(
        "roll_back", "start_old", "start the old one again"),
    ("rolling_back", "exited_ok", "running"): _v(
        "finish", "remove_old", "the replacement runs after all: keep it"),
    ("rolling_back", "exited_ok", "unknown"): _v(
        "roll_back", "start_old", "start the old one again; the replacement is removed "
        "once its engine answers", keep=True),
    ("rolling_back", "failed", "created"): _v(
        "roll_back", "remove_new start_old", "start the old one again"),
    ("rolling_back", "failed", "exited"): _v(
        "roll_back", "remove_new start_old", "start the old one again"),
    ("rolling_back", "failed", "missing"): _v(
        "roll_back", "start_old", "start the old one again"),
    ("rolling_back", "failed", "running"): _v(
        "finish", "remove_old", "the replacement runs after all: keep it"),
    ("rolling_back", "failed", "unknown"): _v(
        "roll_back", "start_old", "start the old one again; the replacement is removed "
        "once its engine answers", keep=True),
    ("rolling_back", "missing", "created"): _v(
        "lost", "", "the old one is gone and the replacement failed to start: left for a "
        "person, not restarted in a loop"),
    ("rolling_back", "missing", "exited"): _v(
        "lost", "", "the old one is gone and the replacement failed to start: left for a "
        "person, not restarted in a loop"),
    ("rolling_back", "missing", "running"): _v("finish", "", "the replacement is the job"),
    ("rolling_back", "missing", "missing"): _v("lost", "", "on neither node"),
    ("rolling_back", "missing", "unknown"): _v(
        "wait", "", "the old one is gone and the target does not answer"),
}
"""Every reachable (intent, old, new): the module docstring's rules, row by row. Not listed:
an unknown old side (always "wait": the old one may be running, so nothing may start) and,
without an intent, a pair with a side missing or unknown (not a move: "nothing")."""


def decide(situation: Situation) -> Verdict:
    """The verdict for `situation` (see `TABLE`), its reason naming the exit code and the
    checkpoint where they are known."""
    s = situation
    if s.old == "unknown":
        return Verdict(outcome="wait", why="the old node does not answer: nothing may start "
                       "while the old one may run")
    verdict = TABLE.get((s.intent, s.old, s.new))
    if verdict is None:  # no intent and a side missing or unknown: not a half-done move
        return Verdict(outcome="nothing", why="not a half-done move")
    notes = []
    if s.old in ("exited_ok", "failed") and s.old_exit_code is not None:
        notes.append(f"old exit code {s.old_exit_code}")
    if s.checkpoint is False and {"start_new", "start_old"} & set(verdict.steps):
        notes.append("no checkpoint found: the job restarts from its first step")
    elif s.checkpoint is True:
        notes.append("its checkpoint is there")
    if s.checkpoint is False and verdict.outcome == "lost":
        notes.append("and no checkpoint remains")
    if not notes:
        return verdict
    return Verdict(outcome=verdict.outcome, steps=verdict.steps, keep_intent=verdict.keep_intent,
                   why=f"{verdict.why} ({'; '.join(notes)})")
