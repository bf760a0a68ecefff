"""An action in a few words, for people: alert summaries and the daemon's log lines
(`set_cpu of job train-3 on node w1 to 0.25 (shares)`). Its reason is the action's own field."""

from __future__ import annotations

from typing import assert_never

from policyd.model.decision import Action, Admit, MarkMigrated, Migrate, SetCpu, Stop


def describe(action: Action) -> str:
    """The action in a few words: what, which job, where."""
    match action:
        case Migrate():
            return (f"migrate of job {action.container} from {action.from_node} "
                    f"to {action.to_node}")
        case SetCpu():
            return (f"set_cpu of job {action.container} on node {action.node} "
                    f"to {action.fraction:g} ({action.mode})")
        case MarkMigrated():
            return f"mark_migrated of job {action.container} on node {action.node}"
        case Stop():
            return f"stop of job {action.container} on node {action.node} ({action.event})"
        case Admit():
            return f"admit of job {action.container} on node {action.node}"
        case _:
            assert_never(action)
