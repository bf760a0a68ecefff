"""Stop: a job that reached its target or converged, delivered on its Docker engine.

The checkpoint protocol of exporters/README.md, as a migration's first half, without a second:

1. the container must be running and managed; a Stop of a job stopped already (its container
   gone, or exited with this actuator's delivery mark on the same container) does nothing: a
   manager deciding from node reports may ask again before the agent's next report says the
   job is gone, and that is not a failed action;
2. its restart policy is set to "no" first: a container stopped through the API is not
   restarted by a policy of `on-failure` or `unless-stopped`, but `always` brings it back when
   the engine restarts, and a delivered job must never run again;
3. SIGTERM and the grace period (`container.stop(timeout=grace)`: SIGTERM, then SIGKILL): the
   job writes its checkpoint and exits 0;
4. the container is kept (exited, with its log), and so is its checkpoint: nothing is removed.
   The delivery is recorded in the actuator's state file (`delivered`, when, why, the exit
   code, the checkpoint), so a later reader can tell a delivered job from one that crashed.

Where the checkpoint is: the last `checkpoint: step=N path=PATH` line of the job's log (the
line the example trainer prints after the Checkpointer saved), its container path translated
to the host path through the container's bind mounts; without such a line, the bind mounts are
reported as where to look. An exit code other than 0 means no checkpoint was confirmed: the job
stays stopped (it was asked to stop for good) and the failure is raised, so it is alerted on.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import docker.errors
from docker.models.containers import Container

from policyd.actuators.docker.engines import Engines
from policyd.actuators.docker.state import ActuatorState
from policyd.actuators.errors import ActuationError
from policyd.model import Stop

LOG = logging.getLogger(__name__)

CHECKPOINT_LINE = re.compile(r"checkpoint: step=(\d+) path=(\S+)")
LOG_TAIL_LINES = 200


def host_path(path: str, binds: Sequence[str]) -> str | None:
    """`path` inside the container as a host path, through `binds` (`host:container[:mode]`);
    None when no bind mount holds it."""
    best: tuple[int, str] | None = None
    for bind in binds:
        parts = bind.split(":")
        if len(parts) < 2:
            continue
        host, inside = parts[0], parts[1].rstrip("/") or "/"
        if path == inside or path.startswith(inside + "/") or inside == "/":
            rest = path[len(inside):].lstrip("/") if inside != "/" else path.lstrip("/")
            if best is None or len(inside) > best[0]:
                best = (len(inside), f"{host.rstrip('/')}/{rest}" if rest else host)
    return best[1] if best is not None else None


def checkpoint_of(log_text: str, attrs: Mapping[str, Any]) -> str:
    """Where the stopped job's checkpoint is, in words (module docstring)."""
    binds = list((attrs.get("HostConfig") or {}).get("Binds") or [])
    found = CHECKPOINT_LINE.findall(log_text)
    if found:
        step, path = found[-1]
        where = host_path(path, binds)
        return f"{where or path} (step {step}{'' if where else ', inside the container'})"
    mounts = ", ".join(b.rsplit(":", 1)[0] if b.count(":") > 1 else b for b in binds)
    return f"not reported by the job; its mounts: {mounts or 'none'}"


@dataclass
class Stopper:
    """Stop actions against `engines` (see the module docstring)."""

    engines: Engines
    state: ActuatorState
    clock: Callable[[], float] = time.time

    def run(self, action: Stop, *, grace_seconds: float) -> str:
        """Deliver the job; returns where its checkpoint is (raises ActuationError). A job
        stopped already is left as it is (module docstring, 1)."""
        node, name = action.node, action.container
        found = self.engines.get(node, name)
        if found is None or (found.status != "running" and self.delivered(name, found)):
            LOG.info("docker: stop of %s on %s: %s already, nothing to do", name, node,
                     "gone" if found is None else "stopped")
            return "" if found is None else str(self.state.markers[name].get("checkpoint", ""))
        container = self.engines.actionable(node, name, found)  # checked on the read it has
        if container.status != "running":
            raise ActuationError(f"container {name} on node {node} is {container.status}, not "
                                 "running; nothing to stop")
        never: Any = {"Name": "no"}  # the SDK's stubs list only "always" and "on-failure"
        self.engines.call(node, f"set restart policy of {name} to no",
                          lambda: container.update(restart_policy=never))
        self.engines.call(node, f"stop {name}",
                          lambda: container.stop(timeout=round(grace_seconds)))
        self.engines.call(node, f"inspect {name}", container.reload)
        state = container.attrs.get("State") or {}
        code = -1 if state.get("Running") else int(state.get("ExitCode", -1))
        checkpoint = checkpoint_of(self._log(node, container), container.attrs)
        self.state.record_marker(name, container.id or "", delivered=True,
                                 delivered_at=self.clock(), delivered_event=action.event,
                                 delivered_reason=action.reason[:500], exit_code=code,
                                 checkpoint=checkpoint, last_action_at=self.clock())
        if code != 0:
            raise ActuationError(
                f"container {name} on node {node} exited with code {code} instead of 0 after "
                f"SIGTERM (137 = killed after the {grace_seconds:g} s grace period): no "
                f"checkpoint confirmed; it stays stopped (delivered); checkpoint: {checkpoint}")
        LOG.info("docker: delivered %s on %s (%s): checkpoint %s", name, node, action.event,
                 checkpoint)
        return checkpoint

    def delivered(self, name: str, container: Container) -> bool:
        """Whether this actuator delivered `container` (its marker, for the same container)."""
        entry = self.state.markers.get(name) or {}
        return bool(entry.get("delivered")) and entry.get("id") == container.id

    def _log(self, node: str, container: Container) -> str:
        try:
            raw = self.engines.call(node, "read logs",
                                    lambda: container.logs(tail=LOG_TAIL_LINES))
        except (ActuationError, docker.errors.NotFound):
            return ""
        return raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
