"""`policyd run`: the daemon, as the settings file says (docs/settings.md).

With no `--config` it drives the simulated cluster (`flowcon-fixed-3`) in virtual time through
the same tick the real daemon runs, printing one line per tick and every job's results.
`--once` runs one tick per policy and exits (cron, smoke tests): exit 0 when every tick
succeeded, 1 otherwise. SIGTERM/SIGINT stop it in order: the running tick finishes, alerts are
flushed, exit 0.

On Kubernetes: `--node NAME` runs a node agent (FlowCon, for the containers on that node only;
the DaemonSet passes its `spec.nodeName`), `--leader-elect` a manager replica that takes part
in the election on the Lease of `kubernetes.lease_name` as `$POD_NAME` (else the hostname):
every replica decides, only the leader applies.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import socket
import threading
from typing import TextIO

from policyd.allocator import keep_freed_memory
from policyd.cli.errors import InputError

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = commands.add_parser(
        "run", help="run the daemon (with no --config: against the simulated cluster)")
    run.add_argument("--config", metavar="FILE",
                     help="settings file (see docs/settings.md); default: the simulator")
    run.add_argument("--once", action="store_true",
                     help="one tick per policy, then exit (non-zero if a tick failed)")
    run.add_argument("--node", metavar="NAME",
                     help="node agent: FlowCon policies only, for the containers on node NAME "
                          "(docker, kubernetes)")
    run.add_argument("--leader-elect", action="store_true",
                     help="kubernetes: take part in the leader election (Lease "
                          "kubernetes.lease_name, identity $POD_NAME or the hostname); only "
                          "the leader applies actions")
    run.set_defaults(run=cmd_run)


def cmd_run(args: argparse.Namespace, out: TextIO, _: TextIO) -> int:
    # The daemon (APScheduler, prometheus_client, the simulator) loads only for this command.
    from policyd import daemon  # noqa: PLC0415

    try:
        settings = (daemon.load_settings(args.config) if args.config
                    else daemon.DaemonSettings())
    except daemon.SettingsError as exc:
        raise InputError([str(p) for p in exc.problems],
                         "the settings file is invalid; nothing started") from None
    logging.getLogger().setLevel(_LEVELS[settings.log_level])
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # "Running job ..." every tick
    # Everything loaded so far lives as long as the daemon: out of the collector's full
    # passes, which every cycle at 10,000 containers set off (a 10,000-container decide() in a
    # process holding the daemon's imports: 0.47-0.51 s frozen, 0.53-0.55 s not).
    gc.freeze()
    # Every tick's arrays in memory the last one freed, not in fresh pages, in one heap for
    # every thread (policyd.allocator): before any thread starts.
    keep_freed_memory()
    stop = threading.Event()
    node: str | None = getattr(args, "node", None)
    identity = ((os.environ.get("POD_NAME") or socket.gethostname())
                if getattr(args, "leader_elect", False) else None)
    try:
        if threading.current_thread() is threading.main_thread():
            with daemon.stop_on_signals(stop):
                return daemon.run(settings, out=out, stop=stop, once=args.once, node=node,
                                  leader_identity=identity)
        return daemon.run(settings, out=out, stop=stop, once=args.once, node=node,
                          leader_identity=identity)
    except daemon.StartupError as exc:
        raise InputError(exc.lines, exc.summary) from None
