"""What `policyd simulate` prints: per scenario, every job under the policy, the baseline and the
oracle, the averages, and the thesis's figures beside ours.

JSON shape (keys may be added, none renamed):
`{"scenarios": [{"name", "seed", "thesis": {...}, "runs": {"policy": R, "baseline": R,
"baseline_fewest": R, "oracle": R}}]}` (`baseline`: the default scheduler's scoring;
`baseline_fewest`: the fewest-jobs placement), R = `{"avg_jct", "makespan", "migrations",
"target_jobs", "targets_met", "core_seconds", "jobs": [{"id", "submit", "finish", "jct",
"time_to_quality", "final_loss"}]}`;
a job a policy stopped also has `"stopped"` (why), and a job with a declared target `"target"`
(`policyd.sim.targets`). In a scenario whose jobs have deadlines, R also has `deadline_jobs`
and `deadlines_met` (counts), `allocated_cpu_used` (the fraction of allocated CPU-seconds the
jobs used), `completion_rate` (met / deadline jobs) and `avg_lateness` (seconds, over the late
jobs), and each job its `deadline`, `met` and `started` (when it first ran); other scenarios'
JSON is as it was. Times are rounded to milliseconds, losses to 1e-6, so that the same seed
gives byte-identical output.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policyd.engine.registry import KINDS
from policyd.engine.spec import PolicyDocument
from policyd.sim.types import JobResult, RunResult, Scenario, Strategy, TargetResult

STRATEGIES: tuple[Strategy, ...] = ("policy", "baseline", "baseline_fewest", "oracle")
"""The runs a report compares, in the order it prints them: `baseline` is the default
scheduler's scoring, `baseline_fewest` the fewest-jobs placement (`policyd.sim.run`)."""


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """One scenario (or one setting of a sweep) and its three runs."""

    scenario: Scenario
    runs: Mapping[str, RunResult]
    label: str = ""


def _ms(value: float) -> float:
    return round(float(value), 3)


def _fine(value: float) -> float:
    return round(float(value), 6)


def _target_json(target: TargetResult) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": target.kind, "declared": target.declared,
                           "value": _fine(target.value), "achieved": _fine(target.achieved),
                           "met": target.met}
    if target.kind == "qoe":
        out.update(time_satisfied=(None if target.time_satisfied is None
                                   else _fine(target.time_satisfied)),
                   direction_changes=target.direction_changes,
                   limit_changes=target.limit_changes)
    return out


SETTLED_REVERSALS = 2
"""Issue 15's bar: no job's limit reverses direction more than twice after its first minute."""


def qoe_summary(run: RunResult) -> dict[str, Any] | None:
    """Time satisfied and allocation churn over the run's jobs with QoE targets (None: no
    such job); see the module docstring."""
    qoe = [j.target for j in run.jobs if j.target is not None and j.target.kind == "qoe"]
    if not qoe:
        return None
    satisfied = [t.time_satisfied for t in qoe if t.time_satisfied is not None]
    return {"time_satisfied": _fine(statistics.mean(satisfied)) if satisfied else None,
            "limit_changes_per_job": _fine(statistics.mean(t.limit_changes for t in qoe)),
            "most_direction_changes": max(t.direction_changes for t in qoe),
            "jobs_over_two_reversals": sum(1 for t in qoe
                                           if t.direction_changes > SETTLED_REVERSALS)}


def _job_json(job: JobResult) -> dict[str, Any]:
    return {"id": job.id, "model": job.model, "submit": _ms(job.submit),
            "finish": _ms(job.finish), "jct": _ms(job.jct),
            "time_to_quality": _ms(job.time_to_quality), "nodes": list(job.nodes),
            "final_loss": _fine(job.final_loss),
            **({"stopped": job.stopped} if job.stopped is not None else {}),
            **({"target": _target_json(job.target)} if job.target is not None else {})}


def _deadline_job_json(job: JobResult) -> dict[str, Any]:
    return {**_job_json(job), "deadline": None if job.deadline is None else _ms(job.deadline),
            "met": job.met, "started": None if job.started is None else _ms(job.started)}


def _run_json(run: RunResult) -> dict[str, Any]:
    if not run.deadline_jobs:
        qoe = qoe_summary(run)
        return {"avg_jct": _ms(run.avg_jct), "makespan": _ms(run.makespan),
                "migrations": run.migrations, "target_jobs": run.target_jobs,
                "targets_met": run.targets_met, "core_seconds": _ms(run.core_seconds),
                **({"qoe": qoe} if qoe is not None else {}),
                "jobs": [_job_json(j) for j in run.jobs]}
    return {"avg_jct": _ms(run.avg_jct), "makespan": _ms(run.makespan),
            "migrations": run.migrations, "target_jobs": run.target_jobs,
            "targets_met": run.targets_met, "core_seconds": _ms(run.core_seconds),
            "deadline_jobs": run.deadline_jobs, "deadlines_met": run.deadlines_met,
            "allocated_cpu_used": round(run.allocated_cpu_used, 4),
            "completion_rate": round(run.deadlines_met / run.deadline_jobs, 4),
            "avg_lateness": _ms(run.avg_lateness),
            "jobs": [_deadline_job_json(j) for j in run.jobs]}


def _one_policy_json(policy: PolicyDocument) -> dict[str, Any]:
    spec = policy.spec.model_dump(mode="json")
    keep = ("alpha", "interval_seconds", "beta", "mode", "weights", "max_interval_seconds")
    return {"name": policy.name, "kind": policy.kind, **{k: spec[k] for k in keep if k in spec}}


def _policy_json(scenario: Scenario) -> dict[str, Any]:
    """The scenario's policy; with several running together, `policies` lists them all."""
    first = _one_policy_json(scenario.policy)
    if len(scenario.policies) == 1:
        return first
    return {**first, "policies": [_one_policy_json(p) for p in scenario.policies]}


def to_json(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """The report as a JSON-ready dict."""
    return {"scenarios": [
        {
            "name": o.scenario.name,
            **({"label": o.label} if o.label else {}),
            "seed": o.scenario.seed,
            "description": o.scenario.description,
            "policy": _policy_json(o.scenario),
            "baseline_kind": o.scenario.baseline,
            "workers": len(o.scenario.nodes),
            "thesis": dict(o.scenario.thesis),
            "runs": {name: _run_json(o.runs[name]) for name in STRATEGIES if name in o.runs},
            "profiles": sorted({f"{j.profile.model}:{j.profile.source}"
                                for j in o.scenario.jobs}),
        }
        for o in outcomes
    ]}


def change_pct(policy: float, baseline: float) -> float:
    """The policy's change against the baseline in percent (negative: the policy is faster)."""
    return 100.0 * (policy - baseline) / baseline if baseline else 0.0


def _fmt_change(policy: float, baseline: float) -> str:
    return f"{change_pct(policy, baseline):+.1f}%"


def _policy_line(scenario: Scenario) -> str:
    """`FlowCon alpha 5%, interval 20 s, beta 2, shares vs NA` (each kind says its line)."""
    policies = " + ".join(f"{p.kind} {KINDS.of(p).summary(p)}" for p in scenario.policies)
    return f"{policies} vs {scenario.baseline}"


def _thesis_lines(scenario: Scenario, policy: RunResult, baseline: RunResult) -> list[str]:
    t = scenario.thesis
    if not t:
        return []
    faster = sum(1 for p, b in zip(policy.jobs, baseline.jobs, strict=True) if p.jct < b.jct)
    ours = [f"ours: avg JCT {_fmt_change(policy.avg_jct, baseline.avg_jct)}, makespan "
            f"{_fmt_change(policy.makespan, baseline.makespan)}, "
            f"{faster} of {len(policy.jobs)} jobs faster"]
    theirs = []
    for key, what in (("avg_jct", "avg JCT"), ("makespan", "makespan")):
        if f"baseline_{key}" in t and f"policy_{key}" in t:
            theirs.append(f"{what} {t[f'baseline_{key}']} -> {t[f'policy_{key}']} s")
        elif f"{key}_change_pct" in t:
            theirs.append(f"{what} -{t[f'{key}_change_pct']}%")
    if "jobs_faster" in t:
        theirs.append(f"{t['jobs_faster']} jobs faster")
    line = f"  thesis ({t.get('source', '')}): {', '.join(theirs)}"
    lines = [line, f"    {t.get('note', '')}" if t.get("note") else "", f"  {ours[0]}"]
    return [x for x in lines if x]


def _sweep_summary(outcomes: Sequence[Outcome]) -> list[str]:
    """One line per setting of a sweep: the figure's numbers at a glance."""
    swept = [o for o in outcomes if o.label]
    if not swept:
        return []
    width = max(len(f"{o.scenario.name} [{o.label}]") for o in swept)
    lines = ["sweep summary (change against the baseline; negative: the policy is faster)",
             f"  {'SETTING'.ljust(width)}  AVG JCT  MAKESPAN  LAST JOB  MIGRATIONS"]
    for o in swept:
        p, b = o.runs["policy"], o.runs["baseline"]
        last_p, last_b = p.jobs[-1].jct, b.jobs[-1].jct
        lines.append(f"  {f'{o.scenario.name} [{o.label}]'.ljust(width)}  "
                     f"{change_pct(p.avg_jct, b.avg_jct):+6.1f}%  "
                     f"{change_pct(p.makespan, b.makespan):+7.1f}%  "
                     f"{change_pct(last_p, last_b):+7.1f}%  {p.migrations:>10}")
    return [*lines, ""]


def _table(table: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    out = []
    for row in table:
        cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1])]
        cells += [row[i].rjust(widths[i]) for i in range(2, len(row))]
        out.append("  " + "  ".join(cells))
    return out


def _pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def _deadline_block(o: Outcome) -> list[str]:
    """A deadline scenario: per job its deadline and finish under each run, then completion
    rate, lateness, JCT and allocated CPU used beside the paper's figures."""
    s, runs = o.scenario, o.runs
    names = [n for n in STRATEGIES if n in runs]
    header = ["JOB", "MODEL", "SUBMIT", "DEADLINE", *(f"FINISH {n.upper()}" for n in names)]
    table = [header]
    for i, job in enumerate(runs["policy"].jobs):
        cells = []
        for n in names:
            j = runs[n].jobs[i]
            cells.append(f"{j.finish:.1f}{'' if j.met is not False else ' LATE'}")
        table.append([job.id, job.model, f"{job.submit:.1f}",
                      "-" if job.deadline is None else f"{job.deadline:.1f}", *cells])
    lines = _table(table)
    for n in names:
        r = runs[n]
        lines.append(f"  {n:<8}  deadlines met {r.deadlines_met}/{r.deadline_jobs} "
                     f"({_pct(r.deadlines_met, r.deadline_jobs)}), late jobs "
                     f"{r.avg_lateness:.1f} s late on average, avg JCT {r.avg_jct:.1f} s, "
                     f"allocated CPU used {100 * r.allocated_cpu_used:.1f}%, migrations "
                     f"{r.migrations}")
    p, b = runs["policy"], runs["baseline"]
    if p.deadline_jobs:
        gain = 100.0 * (p.deadlines_met - b.deadlines_met) / p.deadline_jobs
        lines.append(f"  ours: completion rate {gain:+.1f} points against {s.baseline}, "
                     f"allocated CPU used {100 * p.allocated_cpu_used:.1f}%")
    t = s.thesis
    if t:
        lines.append(f"  paper ({t.get('source', '')}): {t.get('note', '')}")
    return [*lines, ""]


def _fewest_line(policy: RunResult, fewest: RunResult | None) -> list[str]:
    """The policy against the second baseline (the fewest-jobs placement)."""
    if fewest is None:
        return []
    return [f"  vs fewest-jobs placement: avg JCT {fewest.avg_jct:.1f} s "
            f"({_fmt_change(policy.avg_jct, fewest.avg_jct)}), makespan {fewest.makespan:.1f} s "
            f"({_fmt_change(policy.makespan, fewest.makespan)})"]


def render_text(outcomes: Sequence[Outcome]) -> str:
    """The report as aligned text, one block per scenario, then a summary of any sweep."""
    lines: list[str] = []
    for o in outcomes:
        s, runs = o.scenario, o.runs
        if runs["policy"].deadline_jobs:
            title = f"{s.name}{f' [{o.label}]' if o.label else ''} (seed {s.seed}): " \
                    f"{s.description}"
            lines += [title, f"  {_policy_line(s)}", *_deadline_block(o)]
            continue
        policy, baseline, oracle = runs["policy"], runs["baseline"], runs.get("oracle")
        title = f"{s.name}{f' [{o.label}]' if o.label else ''} (seed {s.seed}): {s.description}"
        lines += [title, f"  {_policy_line(s)}"]
        header = ["JOB", "MODEL", "SUBMIT", "JCT POLICY", "JCT BASE", "CHANGE", "TTQ POLICY",
                  "TTQ BASE", "JCT ORACLE"]
        table = [header]
        oracle_jobs = {j.id: j for j in oracle.jobs} if oracle else {}
        for p, b in zip(policy.jobs, baseline.jobs, strict=True):
            o_job = oracle_jobs.get(p.id)
            table.append([p.id, p.model, f"{p.submit:.1f}", f"{p.jct:.1f}", f"{b.jct:.1f}",
                          _fmt_change(p.jct, b.jct), f"{p.time_to_quality:.1f}",
                          f"{b.time_to_quality:.1f}", f"{o_job.jct:.1f}" if o_job else "-"])
        widths = [max(len(row[i]) for row in table) for i in range(len(header))]
        for row in table:
            cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1])]
            cells += [row[i].rjust(widths[i]) for i in range(2, len(header))]
            lines.append("  " + "  ".join(cells))
        oracle_avg = f", oracle {oracle.avg_jct:.1f} s" if oracle else ""
        oracle_span = f", oracle {oracle.makespan:.1f} s" if oracle else ""
        lines += [
            f"  average JCT: policy {policy.avg_jct:.1f} s, baseline {baseline.avg_jct:.1f} s "
            f"({_fmt_change(policy.avg_jct, baseline.avg_jct)}){oracle_avg}",
            f"  makespan:    policy {policy.makespan:.1f} s, baseline {baseline.makespan:.1f} s "
            f"({_fmt_change(policy.makespan, baseline.makespan)}){oracle_span}",
            *_fewest_line(policy, runs.get("baseline_fewest")),
            f"  migrations:  policy {policy.migrations}",
            *_thesis_lines(s, policy, baseline),
            "",
        ]
    return "\n".join([*lines, *_sweep_summary(outcomes)])
