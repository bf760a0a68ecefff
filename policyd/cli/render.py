"""The text form of a decision: a table per node, then the actions with their reasons.

    FlowCon policy "flowcon" at 2023-11-14 22:13:20 UTC: 1 action, next interval 20 s
    node worker-1  (4 cores, 3.1 used)
      CONTAINER   CATEGORY   G (growth eff.)   CPU NOW -> NEXT   ETA (RANGE)
      vae         CL                  0.0031   1.00 -> 0.25      12m05s (11m-13m)
      mnist       NL                       -   1.00 -> 1.00      -
    actions
      set_cpu  vae on worker-1 -> 0.25  CL on worker-1: ...

A decision with deadlines (the Deadline kind) adds DEADLINE and SLACK columns (slack at the
next allocation), and one that leaves held jobs waiting lists them after the actions, in
admission order, with why each waits.

Pure formatting: it reads the decision and the snapshot it came from and returns a string.
"""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import UTC, datetime

from policyd.engine.registry import KINDS
from policyd.model import (
    Action,
    Admit,
    Assessment,
    Decision,
    MarkMigrated,
    Migrate,
    SetCpu,
    Snapshot,
    Stop,
)

_BOLD, _DIM, _RESET = "\033[1m", "\033[2m", "\033[0m"


def _when(seconds: float) -> str:
    try:
        return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return f"t={seconds:g}"


def _fraction(value: float | None) -> str:
    return "   -" if value is None else f"{value:4.2f}"


def _gain(value: float | None) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "inf"
    return f"{value:.4g}"


def _target(action: Action, names: dict[str, str]) -> str:
    name = names.get(action.container, action.container)
    match action:
        case SetCpu():
            fraction = f"{action.fraction:.2f} ({action.mode})"
            return f"set_cpu        {name} on {action.node} -> {fraction}"
        case Migrate():
            verb = "rebalance" if action.rebalance else "migrate"
            return f"{verb:<14} {name} {action.from_node} -> {action.to_node}"
        case MarkMigrated():
            return f"mark_migrated  {name} stays on {action.node}"
        case Stop():
            return f"stop           {name} on {action.node} ({action.event}: delivered)"
        case Admit():
            held = "" if action.held_on is None else f" (held on {action.held_on})"
            limit = "" if action.fraction is None else \
                f" -> {action.fraction:.2f} ({action.mode})"
            return f"admit          {name} on {action.node}{held}{limit}"


def duration(seconds: float) -> str:
    """`45s`, `12m05s`, `3h20m`, `2d04h`: a remaining time at a glance."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def _eta(a: Assessment) -> str:
    """`12m05s (9m-16m)`, or `-` when the forecast cannot judge (its note says why)."""
    f = a.forecast
    if f is None:
        return "-"
    return (f"{duration(f.remaining_seconds)} "
            f"({duration(f.low_seconds)}-{duration(f.high_seconds)})")


def _deadline_cells(a: Assessment, now: float) -> tuple[str, str]:
    """`DEADLINE` and `SLACK` of one job: `in 25m00s`, `missed 2m00s ago`, `invalid`; slack
    at the next allocation (`+4m10s`, `-1m05s`), `-` where there is none."""
    d = a.deadline
    if d is None or d.state == "none":
        return "-", "-"
    if d.deadline_at is None:
        return d.state, "-"
    left = d.deadline_at - now
    when = f"in {duration(left)}" if left >= 0 else f"missed {duration(-left)} ago"
    if d.slack_seconds is None:
        return when, "-"
    sign = "+" if d.slack_seconds >= 0 else "-"
    return when, f"{sign}{duration(abs(d.slack_seconds))}"


def _standing(a: Assessment) -> str:
    """`short 25% 5m00s ALERT`, `satisfied`, `infeasible`, `delivered: converged (stop)`, or
    `-`: the job against its declared targets."""
    parts = []
    if a.qoe is not None:
        q = a.qoe
        text: str = q.state
        if q.state != "satisfied":
            text += f" {100 * q.shortfall:.0f}%"
            if q.short_seconds > 0:
                text += f" {duration(q.short_seconds)}"
        parts.append(text + (" ALERT" if q.alerting else ""))
    if a.delivery is not None:
        parts.append(f"delivered: {a.delivery.event} ({a.delivery.response})")
    return "; ".join(parts) or "-"


def _rows(assessments: list[Assessment], names: dict[str, str], kind: str,
          now: float) -> list[str]:
    gain = KINDS[kind].gain_label if kind in KINDS else "GAIN"
    deadlines = any(a.deadline is not None for a in assessments)
    targets = any(a.qoe is not None or a.delivery is not None for a in assessments)
    header = ("CONTAINER", "CATEGORY", gain, "CPU NOW -> NEXT", "ETA (RANGE)",
              *(("DEADLINE", "SLACK") if deadlines else ()),
              *(("TARGET",) if targets else ()), "NOTE")
    table: list[tuple[str, ...]] = [header]
    for a in assessments:
        cpu = ("" if a.cpu_fraction_now is None and a.cpu_fraction_next is None
               else f"{_fraction(a.cpu_fraction_now)} -> {_fraction(a.cpu_fraction_next)}")
        note = a.note
        if a.forecast is None and a.forecast_note:
            note = f"{note}; no ETA: {a.forecast_note}" if note else f"no ETA: {a.forecast_note}"
        extra = _deadline_cells(a, now) if deadlines else ()
        table.append((names.get(a.container, a.container), a.category or "-", _gain(a.gain),
                      cpu, _eta(a), *extra, *((_standing(a),) if targets else ()), note))
    padded = len(header) - 1
    widths = [max(len(row[i]) for row in table) for i in range(padded)]
    lines = []
    for row in table:
        cells = [row[i].rjust(widths[i]) if i == 2 else row[i].ljust(widths[i])
                 for i in range(padded)]
        lines.append("  " + "   ".join([*cells, row[padded]]).rstrip())
    return lines


def _waiting(decision: Decision) -> list[str]:
    """The held jobs the decision leaves waiting, in admission order, with why."""
    if not decision.queue:
        return []
    lines = [f"waiting for admission ({len(decision.queue)})"]
    width = max(len(q.container) for q in decision.queue)
    for q in decision.queue:
        when = ""
        if q.deadline is not None and q.deadline.deadline_at is not None:
            left = q.deadline.deadline_at - decision.time
            when = (f"  deadline in {duration(left)}" if left >= 0
                    else f"  deadline missed {duration(-left)} ago")
        lines.append(f"  {q.position:>3}. {q.container.ljust(width)}  {q.why}{when}")
        lines.append(f"       {q.reason}")
    return lines


def _none_selected(decision: Decision, snapshot: Snapshot) -> str:
    """Why every node says "no managed containers", when the selector is the reason: the
    engine assesses every container its policy selects, even one it then leaves alone."""
    if decision.assessments or not snapshot.containers:
        return ""
    count = len(snapshot.containers)
    named = sorted({c.namespace for c in snapshot.containers if c.namespace})
    where = [f"namespace{'s' if len(named) != 1 else ''} {', '.join(named)}"] if named else []
    if any(not c.namespace for c in snapshot.containers):
        where.append("no namespace")
    return (f"policy {decision.policy!r} selects none of the snapshot's {count} container"
            f"{'s' if count != 1 else ''} ({'; '.join(where)}): its spec.selector (namespaces, "
            f"labels) decides which it manages")


def render_decision(decision: Decision, snapshot: Snapshot, *, color: bool = False) -> str:
    """The decision as a table per node followed by its actions, ready to print."""
    bold, dim, reset = (_BOLD, _DIM, _RESET) if color else ("", "", "")
    names = {c.id: c.name or c.id for c in snapshot.containers}
    count = len(decision.actions)
    mode = "  [dry run: nothing will be applied]" if decision.dry_run else ""
    lines = [
        f"{bold}{decision.kind} policy {decision.policy!r} at {_when(decision.time)}{reset}: "
        f"{count} action{'s' if count != 1 else ''}, next interval "
        f"{decision.next_interval:g} s{mode}"
    ]
    by_node: dict[str, list[Assessment]] = defaultdict(list)
    for assessment in decision.assessments:
        by_node[assessment.node].append(assessment)
    reported = {r.node: r for r in snapshot.node_reports if r.policy == decision.policy}
    for node in snapshot.nodes:
        found = by_node.get(node.name)
        header = f"node {node.name}  ({node.cpu_capacity:g} cores, {node.cpu_usage:.3g} used)"
        if not found:
            report = reported.get(node.name)
            said = (f"{report.selected} job{'s' if report.selected != 1 else ''} in its node "
                    "agent's report" if report is not None else "no managed containers")
            lines.append(f"{header}  {dim}{said}{reset}")
            continue
        lines.append(f"{bold}{header}{reset}")
        lines.extend(_rows(found, names, decision.kind, decision.time))
    lines.append(f"{bold}actions{reset}" if decision.actions else "no actions")
    for action in decision.actions:
        lines.append(f"  {_target(action, names)}")
        lines.append(f"      {dim}{action.reason}{reset}")
    lines.extend(_waiting(decision))
    unselected = _none_selected(decision, snapshot)
    notes = [unselected, *decision.notes] if unselected else decision.notes
    lines.extend(f"{dim}note: {note}{reset}" for note in notes)
    return "\n".join(lines) + "\n"
