"""The bottom line of `policyd simulate`: what each policy gained or lost, in plain words.

The tables above it give every job; a cluster operator deciding whether to run a policy wants
three answers, which this module words from the same runs:

- per experiment, did jobs finish sooner on average under the policy than under the baseline
  (the average job completion time, JCT), and how much sooner the oracle was: the share of the
  oracle's gain the policy reached says how much room is left;
- per policy kind, over all its experiments: in how many it helped, hurt, or changed the average
  by less than `NEGLIGIBLE_PCT` (no real change for an operator), what happened to the makespan
  (when the last job finished) and how many migrations it took.

Pure formatting of `Outcome`s; it groups by the policy's kind and baseline as the scenario names
them and knows nothing of any kind.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from policyd.sim.report import Outcome, change_pct

NEGLIGIBLE_PCT = 1.0
"""A change of the average JCT smaller than this (percent) counts as no real change in the
per-kind verdict: too small to act on, since the simulated cluster models the thesis's testbed,
not the operator's. The per-experiment lines still give every change to 0.1%."""

WIDTH = 100
"""Lines are wrapped to this many columns, like the tables' longest lines."""


def _name(outcome: Outcome) -> str:
    return f"{outcome.scenario.name}{f' [{outcome.label}]' if outcome.label else ''}"


def _how(change: float) -> str:
    """`5.3% sooner`, `1.5% later` (negative: sooner), or "" when it rounds to no change."""
    if round(change, 1) == 0:
        return ""
    return f"{abs(change):.1f}% {'sooner' if change < 0 else 'later'}"


def _oracle_gain(outcome: Outcome) -> tuple[float, float | None] | None:
    """The oracle's change of the average JCT against the baseline, and the share of it the
    policy reached (None unless both were sooner); None without an oracle run."""
    oracle = outcome.runs.get("oracle")
    if oracle is None:
        return None
    policy, baseline = outcome.runs["policy"].avg_jct, outcome.runs["baseline"].avg_jct
    gain = change_pct(oracle.avg_jct, baseline)
    reached = None
    if oracle.avg_jct < baseline and policy < baseline:
        reached = (baseline - policy) / (baseline - oracle.avg_jct)
    return gain, reached


def outcome_line(outcome: Outcome) -> str:
    """One experiment in words: `FlowCon 5.3% sooner than NA; the oracle 6.2% sooner (FlowCon
    reached 85% of that)`."""
    s = outcome.scenario
    policy, baseline = outcome.runs["policy"], outcome.runs["baseline"]
    how = _how(change_pct(policy.avg_jct, baseline.avg_jct))
    line = f"{s.policy.kind} {f'{how} than' if how else 'no different from'} {s.baseline}"
    oracle = _oracle_gain(outcome)
    if oracle is not None:
        gain, reached = oracle
        line += f"; the oracle {_how(gain) or 'no sooner'}"
        if reached is not None:
            line += f" ({s.policy.kind} reached {reached:.0%} of that)"
    return line


def _format(value: float, fmt: str) -> str:
    """`format`, without a sign on what prints as zero (`-0.0`, `+0.0`)."""
    text = format(value, fmt)
    return text.lstrip("+-") if float(text.rstrip("%")) == 0 else text


def _span(values: Sequence[float], fmt: str) -> str:
    """`4.9 to 8.1`, or one value when both ends print alike."""
    low, high = _format(min(values), fmt), _format(max(values), fmt)
    return low if low == high else f"{low} to {high}"


def _verdict(kind: str, baseline: str, group: Sequence[Outcome]) -> str:
    """Every experiment of one kind against one baseline, in one paragraph."""
    changes = [change_pct(o.runs["policy"].avg_jct, o.runs["baseline"].avg_jct) for o in group]
    sooner = [-c for c in changes if c <= -NEGLIGIBLE_PCT]
    later = [c for c in changes if c >= NEGLIGIBLE_PCT]
    small = len(changes) - len(sooner) - len(later)
    of = f" of {len(group)}" if len(group) > 1 else ""
    parts = []
    if sooner:
        parts.append(f"sooner on average{f' in {len(sooner)}{of}' if of else ''} "
                     f"(by {_span(sooner, '.1f')}%)")
    if later:
        parts.append(f"later on average{f' in {len(later)}{of}' if of else ''} "
                     f"(by {_span(later, '.1f')}%)")
    if small:
        parts.append(f"within {NEGLIGIBLE_PCT:g}% of {baseline}'s average"
                     f"{f' in {small}{of}' if of else ''}")
    noun = "experiment" if len(group) == 1 else "experiments"
    text = f"{kind} against {baseline}, {len(group)} {noun}: jobs finished {'; '.join(parts)}."
    oracles = [g for g in (_oracle_gain(o) for o in group) if g is not None]
    if oracles and all(not _how(gain) for gain, _ in oracles):
        text += " The oracle was no sooner."
    elif oracles:
        text += f" The oracle: {_span([-gain for gain, _ in oracles], '.1f')}% sooner"
        reached = [r for _, r in oracles if r is not None]
        text += f", of which {kind} reached {_span(reached, '.0%')}." if reached else "."
    spans = [change_pct(o.runs["policy"].makespan, o.runs["baseline"].makespan) for o in group]
    migrations = sum(o.runs["policy"].migrations for o in group)
    text += f" Makespan {_span(spans, '+.1f')}%"
    text += f"; {migrations} migration{'s' if migrations != 1 else ''}." if migrations else "."
    return textwrap.fill(text, WIDTH, initial_indent="  ", subsequent_indent="    ",
                         break_on_hyphens=False)


def bottom_line(outcomes: Sequence[Outcome]) -> str:
    """The summary the text report ends with: one line per experiment, one paragraph per kind."""
    if not outcomes:
        return ""
    width = max(len(_name(o)) for o in outcomes)
    lines = ["bottom line: average job completion time (JCT), each policy against its baseline "
             "and the oracle"]
    lines += [f"  {_name(o).ljust(width)}  {outcome_line(o)}" for o in outcomes]
    groups: dict[tuple[str, str], list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault((o.scenario.policy.kind, o.scenario.baseline), []).append(o)
    lines += [_verdict(kind, baseline, group) for (kind, baseline), group in groups.items()]
    return "\n".join(lines) + "\n"
