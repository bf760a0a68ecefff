"""The chaos test's longer version: each disrupted-move case run many times on real engines.

    .venv/bin/python benchmarks/migration_chaos.py [--runs N] [--max-minutes M] [--case NAME ...]
                                                   [--json]

Runs tests/e2e/chaos.py's cases (policyd SIGKILLed after each step of a move, the trainer
killed during its checkpoint, the target engine stopped mid-move) `--runs` times each (default
5) in one shared lab (two dockerd engines, the trainer image, a real Prometheus, real PyTorch
trainers; needs root), and prints per case: runs, how many held every rule, how many ended
with no trainer (lost) or ever had two at once (doubled), how many restarts resumed from the
newest checkpoint on disk, how many ended on the target (moved) or were restarted where they
were (rolled back), the longest time with no trainer against the allowed bound, and every
problem seen.
Run it under `flock /tmp/policyd-slow.lock` on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import repository  # noqa: F401  (the repository on sys.path, after PYTHONPATH's trees)

from tests.e2e.chaos import CASES, Outcome, chaos_lab, job_name, run_case


def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    resumes = [pair for o in outcomes for pair in o.resumed]
    return {"runs": len(outcomes), "held": sum(o.ok for o in outcomes),
            "lost": sum(o.running_on == "-" for o in outcomes),
            "doubled": sum(o.most_running > 1 for o in outcomes),
            "restarts": len(resumes),
            "resumed_newest": sum(resumed == newest for resumed, newest in resumes),
            "moved": sum(o.moved for o in outcomes),
            "rolled_back": sum(o.rolled_back for o in outcomes),
            "longest_none_seconds": max(o.longest_none_seconds for o in outcomes),
            "allowed_none_seconds": min(o.allowed_none_seconds for o in outcomes),
            "most_running": max(o.most_running for o in outcomes),
            "seconds_per_run": round(sum(o.seconds for o in outcomes) / len(outcomes), 1),
            "problems": [p for o in outcomes for p in o.problems]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--max-minutes", type=float, default=None,
                        help="begin no further round of the cases after this long")
    parser.add_argument("--case", action="append", choices=[c.name for c in CASES])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    cases = [c for c in CASES if not args.case or c.name in args.case]
    names = [job_name(c, r) for c in cases for r in range(1, args.runs + 1)]
    results: dict[str, list[Outcome]] = {c.name: [] for c in cases}
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pd-chaos-") as tmp, \
            chaos_lab(Path(tmp) / "lab", names) as world:
        for run in range(1, args.runs + 1):  # round-robin: a slow spell hits every case
            if args.max_minutes is not None and time.monotonic() - began > 60 * args.max_minutes:
                break
            for case in cases:
                try:
                    outcome = run_case(world, case, Path(tmp) / "runs", run=run)
                except AssertionError as exc:  # never settled: a failed run, not a crash
                    outcome = Outcome(case=case.name, run=run, seconds=0.0, most_running=0,
                                      longest_none_seconds=0.0, allowed_none_seconds=0.0,
                                      restarts=0, resumed=[], running_on="-",
                                      intent_left=True, moved=False,
                                      problems=[f"not settled: {str(exc)[:300]}"])
                results[case.name].append(outcome)
                if not args.json:
                    print(f"{case.name} run {run}: {'ok' if outcome.ok else 'FAILED'} "
                          f"on {outcome.running_on}, none {outcome.longest_none_seconds} s "
                          f"(allowed {outcome.allowed_none_seconds}), resumed/newest "
                          f"{outcome.resumed}, {outcome.seconds} s {outcome.problems or ''}",
                          flush=True)
                    if not outcome.ok:
                        print("  policyd said:\n    " + "\n    ".join(outcome.policyd_log),
                              flush=True)
    table = {name: summary(found) for name, found in results.items()}
    if args.json:
        print(json.dumps({"cases": table, "runs": {n: [asdict(o) for o in found]
                                                   for n, found in results.items()},
                          "seconds": round(time.monotonic() - began)}))
    else:
        print(f"\n{'case':30} runs held lost doubled resumed/restarts moved rolled_back "
              "none_max allowed s/run")
        for name, s in table.items():
            print(f"{name:30} {s['runs']:4} {s['held']:4} {s['lost']:4} {s['doubled']:7} "
                  f"{s['resumed_newest']:8}/{s['restarts']:<7} {s['moved']:5} "
                  f"{s['rolled_back']:11} {s['longest_none_seconds']:8.2f} "
                  f"{s['allowed_none_seconds']:7.2f} {s['seconds_per_run']:5}")
        print(f"total {time.monotonic() - began:.0f} s")
    return 0 if all(s["held"] == s["runs"] for s in table.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
