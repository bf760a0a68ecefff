"""`policyd simulate`: run the thesis's experiments in the embedded cluster simulator.

With no arguments it runs the default set of scenarios and prints, per scenario, every job's
completion time under the policy and the baseline, averages, makespan, time-to-quality,
migrations and the thesis's figure beside ours; then a key to the terms it used and a bottom
line in words (`policyd.sim.summary`). `--plot DIR` writes the pictures.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from policyd.cli.errors import InputError
from policyd.cli.progress import Progress
from policyd.policy import PolicyError, load_policies

if TYPE_CHECKING:
    from policyd.sim.report import Outcome
    from policyd.sim.types import Scenario


def _scenario_names(args: argparse.Namespace) -> list[str]:
    """The scenarios and sweeps asked for (default: the default set), every name checked."""
    from policyd.sim import scenarios  # noqa: PLC0415 - the simulator loads only when asked

    names: list[str] = args.scenario or [n for n, e in scenarios.SCENARIOS.items() if e.default]
    unknown = [n for n in names if n not in scenarios.SCENARIOS and n not in scenarios.SWEEPS]
    if unknown:
        known = ", ".join([*scenarios.SCENARIOS, *scenarios.SWEEPS])
        raise InputError([f"unknown scenario {n!r}; known: {known}" for n in unknown])
    return names


def _work(names: list[str], args: argparse.Namespace) -> list[tuple[str, Scenario]]:
    """Build every scenario (and every setting of a sweep), under --policy if given."""
    from policyd.sim import scenarios  # noqa: PLC0415

    work: list[tuple[str, Scenario]] = []
    for name in names:
        if name in scenarios.SWEEPS:
            work.extend(scenarios.sweep_variants(name, args.seed))
        else:
            work.append(("", scenarios.build(name, args.seed)))
    if args.policy:
        work = _override_policy(work, Path(args.policy))
    if args.workers:
        work = _override_workers(work, Path(args.workers))
    return work


def _override_workers(work: list[tuple[str, Scenario]],
                      path: Path) -> list[tuple[str, Scenario]]:
    """Every scenario played on the file's workers instead of its own; a job pinned to a node
    the file does not have is placed by the default scheduler instead."""
    from policyd.sim import scenarios  # noqa: PLC0415
    from policyd.sim.workers import WorkersFileError, load_workers  # noqa: PLC0415

    try:
        nodes = load_workers(path)
    except WorkersFileError as exc:
        raise InputError(exc.problems) from None
    return [(label, scenarios.on_workers(scenario, nodes)) for label, scenario in work]


def _override_policy(work: list[tuple[str, Scenario]], path: Path) -> list[tuple[str, Scenario]]:
    """Every scenario run under the file's policies instead of its own (any kinds, together,
    as the daemon runs a file's policies)."""
    from policyd.sim import scenarios  # noqa: PLC0415

    try:
        policies = load_policies(path)
    except PolicyError as exc:
        raise InputError([str(p) for p in exc.problems]) from None
    return [(label, scenarios.with_policies(scenario, policies)) for label, scenario in work]


def _plot_directory(value: str) -> Path:
    """The --plot directory, made and proven writable before the long simulation starts."""
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise InputError([f"{path}: not a directory (--plot DIR writes PNG files into DIR)"])
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError([f"{path}: cannot create the --plot directory: {exc.strerror}"]) from None
    try:
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise InputError([f"{path}: cannot write into the --plot directory: {exc.strerror}"]
                         ) from None
    return path


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def cmd_simulate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    # The simulator (numpy-heavy scenarios, matplotlib) loads only for this command, so that
    # `policyd plan` and `validate` start fast.
    from policyd.sim import scenarios  # noqa: PLC0415
    from policyd.sim.experiment import run_outcomes  # noqa: PLC0415
    from policyd.sim.report import render_text, to_json  # noqa: PLC0415
    from policyd.sim.summary import bottom_line, outcome_line  # noqa: PLC0415
    from policyd.sim.terms import explain  # noqa: PLC0415

    if args.list:
        for name, entry in scenarios.SCENARIOS.items():
            print(f"{name:22} seed {entry.seed:<3} {entry.build(entry.seed).description}",
                  file=out)
        for name, sweep in scenarios.SWEEPS.items():
            values = ", ".join(f"{v:g}" for v in sweep.values)
            print(f"{name:22} {sweep.figure}: {sweep.base}, {sweep.field} in {values}", file=out)
        return 0
    names = _scenario_names(args)
    # Before building the scenarios, which takes seconds for the large ones.
    plot_dir = _plot_directory(args.plot) if args.plot else None
    work = _work(names, args)
    progress = Progress(len(work), err, prefix="policyd simulate: ")

    def title(i: int) -> str:
        label, scenario = work[i]
        return f"{scenario.name}{f' [{label}]' if label else ''}"

    def done(i: int, outcome: Outcome) -> None:
        progress.finish(f"{title(i)}: {outcome_line(outcome)}")
        if i + 1 < len(work):
            progress.start(title(i + 1))

    if work:
        progress.start(title(0))
    outcomes = run_outcomes(work, timeline=plot_dir is not None, processes=args.jobs,
                            done=done)
    progress.close()
    if args.output == "json":
        out.write(json.dumps(to_json(outcomes), indent=2, sort_keys=True, allow_nan=False))
        out.write("\n")
    else:
        # The tables, the key to their terms, and last the bottom line an operator acts on.
        tables, summary = render_text(outcomes), bottom_line(outcomes)
        out.write("\n".join(b for b in (tables, explain(tables + summary), summary) if b))
    if plot_dir is not None:
        from policyd.sim.plots import plot_all  # noqa: PLC0415 - matplotlib only for pictures

        try:
            written = plot_all(outcomes, plot_dir)
        except OSError as exc:
            raise InputError([f"{exc.filename or plot_dir}: cannot write the pictures: "
                              f"{exc.strerror}"]) from None
        for path in written:
            print(f"wrote {path}", file=err)
    return 0


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    simulate = commands.add_parser(
        "simulate",
        help="run the thesis's experiments in the simulated cluster (policy vs baseline)",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    simulate.add_argument("--scenario", action="append", metavar="NAME",
                          help="a scenario or sweep (repeatable); default: every scenario. "
                               "See --list")
    simulate.add_argument("--policy", metavar="FILE",
                          help="run this file's policies instead of the scenario's (any kinds; "
                               "several run together)")
    simulate.add_argument("--workers", metavar="FILE",
                          help="play the scenarios on this worker file's machines (cores and "
                               "speed each; see policyd/sim/workers.py)")
    simulate.add_argument("--seed", type=int, help="draw the random scenarios from this seed")
    simulate.add_argument("--output", choices=("text", "json"), default="text")
    simulate.add_argument("--plot", metavar="DIR", help="write PNG pictures into DIR")
    simulate.add_argument("--list", action="store_true", help="list scenarios and sweeps")
    simulate.add_argument("--jobs", type=_positive_int, metavar="N",
                          help="worker processes for the runs (default: the CPUs usable; "
                               "1 runs everything in this process). The results do not depend "
                               "on it")
    simulate.set_defaults(run=cmd_simulate)
