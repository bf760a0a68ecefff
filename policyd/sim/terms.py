"""The abbreviations and terms `policyd simulate` prints, explained once at the end of its text.

`explain(text)` lists the entries of `TERMS` that occur in the text as whole words, and those
the chosen explanations use in turn, in the table's order: the key covers what this report
printed and nothing else (a FlowCon-only run is not told about SpeCon's categories).
README.md ("Reading the report") lists them all.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping
from types import MappingProxyType

WIDTH = 100
"""Explanations are wrapped to this many columns, like the report's longest lines."""

TERMS: Mapping[str, str] = MappingProxyType({
    "JCT": "job completion time: from the job's submission to its finish, seconds",
    "TTQ": "time to quality: from submission until the loss has made 95% of its final "
           "improvement",
    "makespan": "from the first submission to the last finish, seconds",
    "CHANGE": "the policy against the baseline; negative: the policy was faster",
    "NA": "FlowCon's baseline, no policy: the jobs on a worker share its cores equally "
          "(plain Docker)",
    "DS": "SpeCon's baseline: jobs stay where the default scheduler put them (kube-scheduler's "
          "default scoring, modelled; the fewest-jobs placement is the second baseline), "
          "never moved",
    "oracle": "knows every job's remaining work and gives a worker's cores to the job nearest "
              "its end (shortest remaining first), on the baseline's placement: a bound, not a "
              "policy",
    "alpha": "the gain per interval below which a job counts as converging",
    "interval": "how often the policy decides, seconds",
    "beta": "FlowCon's floor: a CL job keeps at least 1/(beta * its worker's jobs) of the "
            "worker",
    "shares": "FlowCon's limits are CPU shares: relative, idle cores go to any job",
    "quota": "FlowCon's limits are CPU quotas: hard caps",
    "weights": "SpeCon's pc/wc/cc: a job that moves goes to the worker with the lowest score "
               "|PC|*pc + |WC|*wc + |CC|*cc",
    "NL": "FlowCon's category new: a job whose growth efficiency is at least alpha",
    "WL": "FlowCon's category watching: one interval below alpha",
    "CL": "FlowCon's category completing: below alpha for two intervals or more",
    "PC": "SpeCon's category progressing: a job whose gain is above alpha",
    "WC": "SpeCon's category watching: its gain fell below alpha once",
    "CC": "SpeCon's category converged: its gain fell below alpha again; it asks once to move",
})
"""Term -> what it means, in the order the key prints them."""


def _uses(text: str, term: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(term)}(?![\w-])", text) is not None


def explain(text: str) -> str:
    """The key to the terms `text` uses (as whole words) and to those their explanations use,
    or "" when it uses none."""
    used: set[str] = set()
    new = {t for t in TERMS if _uses(text, t)}
    while new:
        used |= new
        new = {t for t in TERMS if t not in used and any(_uses(TERMS[u], t) for u in new)}
    if not used:
        return ""
    width = max(len(t) for t in used)
    lines = ["terms"]
    lines += [textwrap.fill(TERMS[t], WIDTH, initial_indent=f"  {t.ljust(width)}  ",
                            subsequent_indent=" " * (width + 4), break_on_hyphens=False)
              for t in TERMS if t in used]
    return "\n".join(lines) + "\n"
