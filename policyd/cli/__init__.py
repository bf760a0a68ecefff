"""`policyd` on the command line: validate policies, print their schema (JSON Schema, or the
CRDs of the policy kinds), plan offline, simulate, run.

The top layer: it reads files, calls the policy loader and the pure engine, and prints. Every
problem with user input becomes a clear message on stderr and a non-zero exit, never a
traceback. Exit codes: 0 success, 1 invalid input (policy, snapshot), 2 usage errors.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from policyd import __version__, fastjson
from policyd.cli import live, run, simulate
from policyd.cli.errors import InputError
from policyd.engine.ownership import precedence
from policyd.engine.spec import PolicyDocument
from policyd.model.codec import SnapshotError, decision_to_dict, snapshot_from_dict
from policyd.model.snapshot import Snapshot
from policyd.policy import check_files, json_schema_text, summary
from policyd.tick import DryRunActuator, FixedSource, tick

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


def read_snapshot(path: Path) -> Snapshot:
    """Read and check a snapshot file; every problem is prefixed with the file name."""
    try:
        raw = fastjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise InputError([f"{path}: no such snapshot file"]) from None
    except OSError as exc:
        raise InputError([f"{path}: cannot read: {exc.strerror}"]) from None
    except json.JSONDecodeError as exc:
        where = f"{path}:{exc.lineno}:{exc.colno}"
        raise InputError([f"{where}: JSON syntax error: {exc.msg}"]) from None
    except UnicodeDecodeError as exc:
        raise InputError([f"{path}: not UTF-8 text: {exc.reason}"]) from None
    try:
        with fastjson.paused_gc():  # 10,000 containers: a million objects, no cycles
            return snapshot_from_dict(raw)
    except SnapshotError as exc:
        raise InputError([f"{path}: {problem}" for problem in exc.problems]) from None


def _choose(policies: list[PolicyDocument], paths: Sequence[Path],
            name: str | None) -> list[PolicyDocument]:
    """The policies to decide: the one named, else all of them (owners first)."""
    if name is None:
        return sorted(policies, key=precedence)
    for policy in policies:
        if policy.name == name:
            return [policy]
    known = ", ".join(p.name for p in policies)
    files = ", ".join(str(p) for p in paths)
    raise InputError([f"{files}: no policy named {name!r}; the files hold: {known}"])


def load_checked(paths: Sequence[Path], err: TextIO) -> list[PolicyDocument]:
    """Every policy of `paths`; warnings go to `err`; problems raise InputError."""
    checked = check_files(paths)
    if checked.problems:
        count = len(checked.problems)
        raise InputError([str(p) for p in checked.problems],
                         f"{count} problem{'s' if count != 1 else ''} found; nothing applied")
    for warning in checked.warnings:
        print(str(warning), file=err)
    return list(checked.policies)


def _cmd_validate(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    paths = [Path(p) for p in args.files]
    policies = load_checked(paths, err)
    print(summary(policies, paths), file=out)
    return EXIT_OK


def _cmd_schema(_: argparse.Namespace, out: TextIO, __: TextIO) -> int:
    out.write(json_schema_text())
    return EXIT_OK


def _cmd_crds(_: argparse.Namespace, out: TextIO, __: TextIO) -> int:
    from policyd.policy.crd import crds_yaml  # noqa: PLC0415 - only this command needs it

    out.write(crds_yaml())
    return EXIT_OK


def _cmd_plan(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    # One decision and the process ends: the cyclic collector would only walk the snapshot's
    # million objects again and again (0.15 s of a 10,000-container plan). What plan makes is
    # freed by reference counting; a cycle, if any, lives until the command returns.
    with fastjson.paused_gc():
        return _plan(args, out, err)


def _plan(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    paths = [Path(p) for p in args.policy]
    policies = load_checked(paths, err)
    chosen = _choose(policies, paths, args.name)
    if args.save_snapshot and args.prometheus is None:
        raise InputError(["--save-snapshot goes with --prometheus (a file snapshot is saved "
                          "already)"])
    if args.node_reports and args.prometheus is None:
        raise InputError(["--node-reports goes with --prometheus (it reads the node agents' "
                          "reports there; a snapshot file holds its own)"])
    if args.prometheus is not None:
        snapshot = live.live_snapshot(args, chosen, err)
    else:
        snapshot = read_snapshot(Path(args.snapshot))
    # The daemon's own tick, against the snapshot, with the dry-run actuator: every policy of
    # the files is a peer, so a container several of them select is decided by its owner.
    source, dry_run = FixedSource(snapshot), DryRunActuator()
    decisions = [tick(source, policy, dry_run, peers=policies, dry_run=dry_run).decision
                 for policy in chosen]
    if args.output == "json":
        document: object = (decision_to_dict(decisions[0]) if len(decisions) == 1 else
                            {"decisions": [decision_to_dict(d) for d in decisions]})
        # orjson: the standard library's indenting encoder is pure Python, 0.6 s of a
        # 10,000-container plan (fastjson.dumps says how the bytes differ). One write.
        out.write(fastjson.dumps(document) + "\n")
    else:
        from policyd.cli.render import render_decision  # noqa: PLC0415 - tables only

        color = args.color and out.isatty()
        out.write("\n".join(render_decision(d, snapshot, color=color) for d in decisions))
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="policyd",
        description=(
            "Make deep-learning training jobs finish sooner on shared clusters: FlowCon gives "
            "fast-growing jobs more CPU, SpeCon migrates converged jobs to the least-loaded worker."
        ),
    )
    parser.add_argument("--version", action="version", version=f"policyd {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    validate = commands.add_parser(
        "validate", help="check policy files and report every problem at once"
    )
    validate.add_argument("files", nargs="+", metavar="FILE", help="policy YAML files")
    validate.set_defaults(run=_cmd_validate)

    schema = commands.add_parser("schema", help="print the JSON Schema of policy documents")
    schema.set_defaults(run=_cmd_schema)

    crds = commands.add_parser(
        "crds", help="print the CustomResourceDefinitions of the policy kinds (Kubernetes: "
                     "policyd crds > deploy/kubernetes/crds/policies.yaml)")
    crds.set_defaults(run=_cmd_crds)

    plan = commands.add_parser(
        "plan", help="decide offline: what policies would do given a snapshot (acts on nothing)"
    )
    plan.add_argument("--policy", required=True, action="append", metavar="FILE",
                      help="policy YAML file (repeatable); every policy in them is decided, "
                           "as the daemon would run them together")
    source = plan.add_mutually_exclusive_group(required=True)
    source.add_argument("--snapshot", metavar="FILE", help="snapshot JSON file")
    plan.add_argument("--name", help="show only this policy's decision (the others still "
                                     "own the containers they own)")
    plan.add_argument("--output", choices=("text", "json"), default="text",
                      help="text: a table per node (default); json: the decision document")
    plan.add_argument("--no-color", dest="color", action="store_false",
                      help="plain text even on a terminal")
    live.add_arguments(plan, source)
    plan.set_defaults(run=_cmd_plan)

    simulate.add_parser(commands)
    run.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None,
         err: TextIO | None = None) -> int:
    """Run the CLI; returns the exit code (the console script exits with it)."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    # Library modules log through `logging`; on the command line one plain line each.
    logging.basicConfig(format="policyd: %(message)s", level=logging.WARNING, stream=err)
    logging.getLogger("urllib3").setLevel(logging.ERROR)  # retries are policyd's to report
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse has printed the usage error already
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    try:
        code: int = args.run(args, out, err)
        return code
    except InputError as exc:
        for line in exc.lines:
            print(line, file=err)
        if exc.summary:
            print(f"policyd {args.command}: {exc.summary}", file=err)
        return EXIT_INVALID
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
