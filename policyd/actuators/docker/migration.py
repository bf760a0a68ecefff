"""Migrate: the checkpoint protocol of exporters/README.md, on two Docker engines.

Steps, in this order, so that a failure or a crash at any point leaves a state the recovery
table (`policyd.actuators.move_recovery`) settles with one job running and its checkpoint kept:

1. the source must be a running, managed container; its bind mounts must be host paths (a
   named volume is local to its engine: the replacement would start without the checkpoint);
2. the image must exist on the target: if it does not, it is copied (`save` on the source
   engine, `load` on the target; image ids are content addresses, so the copy is exact);
3. the intent is recorded (`state.migrations`: from, to, the old container's id, a new move
   id; stage "moving") before anything changes;
4. the replacement is *created* (not started) on the target under the same name, with the same
   image, command, environment (`POLICYD_CONTAINER` set to its name), binds, network mode,
   init and labels, plus the markers `policyd.io/migrated=true`, `converged_at`, `rebalanced`
   (Algorithm 5), `migrated-from`, `last_action_at`, `move-id` and `submitted-at` (the
   source's creation, unless it has one: a deadline given as a duration counts from the
   original submission); CPU settings are not copied (unrestricted: FlowCon starts it afresh).
   Idempotent: a create retried after a lost answer
   meets 409 "name already in use" and adopts the container when its `move-id` is this
   move's;
5. the source gets its stop signal (SIGTERM) and up to the grace period to exit on it; then
   `docker stop` with what is left of it (the engine SIGKILLs after it; nothing more when it
   has exited: a second SIGTERM while the job exits can land in its interpreter's shutdown,
   after Python's handlers are gone, and kill it after its checkpoint). It must exit 0 (the
   job's "checkpoint written");
6. the intent is marked "starting"; the replacement is started and must be running within
   `start_timeout_seconds` and still running `confirm_seconds` later;
7. the source container is removed (its checkpoint files are on the shared path and stay),
   and the intent cleared.

Anything else - a non-zero exit, a replacement that dies, an exception from any step - goes
to the same place a crash does: `Recovery.settle` reads the whole state and finishes or rolls
back by the table, and the action fails with what happened. `Steps.crash` is called after
steps 3, 4, 5 (the signal), 5 (the exit) and 6 (the start): the chaos test's hook.
Not done here: asking the new job's exporter whether it answers (its port is in its
command line, which policyd does not interpret); "running after confirm_seconds" stands in.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import docker.errors
import requests
from docker.models.containers import Container

from policyd.actuators.docker.engines import Engines
from policyd.actuators.docker.recovery import Recovery
from policyd.actuators.docker.state import ActuatorState
from policyd.actuators.docker.steps import Steps
from policyd.actuators.errors import ActuationError
from policyd.model import Migrate, labels

CONTAINER_ENV = "POLICYD_CONTAINER"


def epoch_label(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".")


def created_at(attrs: Mapping[str, Any]) -> float | None:
    """A container's creation time (inspect's `Created`, RFC 3339 with nanoseconds) in epoch
    seconds; None when absent or unreadable."""
    text = str(attrs.get("Created") or "")
    if not text:
        return None
    head, _, rest = text.rstrip("Z").partition(".")
    fraction = "".join(ch for ch in rest if ch.isdigit())[:6]
    try:
        when = datetime.fromisoformat(f"{head}{'.' + fraction if fraction else ''}+00:00")
    except ValueError:
        return None
    return when.timestamp()


def replacement_spec(attrs: Mapping[str, Any], *, name: str, image: str, from_node: str,
                     action: Migrate, now: float, move_id: str = "") -> dict[str, Any]:
    """`containers.create` keyword arguments re-creating `attrs` (an inspect result) as `name`
    with policyd's markers. Pure; raises ActuationError for what cannot move."""
    marks = {labels.MIGRATED: "true", labels.MIGRATED_FROM: from_node,
             labels.LAST_ACTION_AT: epoch_label(now)}
    if move_id:
        marks[labels.MOVE_ID] = move_id
    submitted = created_at(attrs)
    if submitted is not None and labels.SUBMITTED_AT not in ((attrs.get("Config") or {})
                                                             .get("Labels") or {}):
        marks[labels.SUBMITTED_AT] = epoch_label(submitted)  # a deadline counts from it
    if action.converged_at is not None:
        marks[labels.CONVERGED_AT] = epoch_label(action.converged_at)
    if action.rebalance:
        marks[labels.REBALANCED] = "true"
    return copy_spec(attrs, name=name, image=image, from_node=from_node, marks=marks)


def copy_spec(attrs: Mapping[str, Any], *, name: str, image: str, from_node: str,
              marks: Mapping[str, str]) -> dict[str, Any]:
    """`containers.create` keyword arguments for a copy of `attrs` (an inspect result) named
    `name`, its labels plus `marks`: same image, command, environment (`POLICYD_CONTAINER` set
    to `name`), binds, network mode, working directory, user, stop signal, memory and init;
    CPU settings are not copied. Pure; raises ActuationError for a named volume (local to
    `from_node`)."""
    config, host = attrs.get("Config") or {}, attrs.get("HostConfig") or {}
    binds = list(host.get("Binds") or [])
    named = [b for b in binds if not b.split(":", 1)[0].startswith("/")]
    if named:
        raise ActuationError(f"container {name} uses named volumes ({', '.join(named)}), which "
                             f"are local to node {from_node}; mount a shared host path instead")
    env = [e for e in (config.get("Env") or []) if not e.startswith(f"{CONTAINER_ENV}=")]
    env.append(f"{CONTAINER_ENV}={name}")
    spec: dict[str, Any] = {
        "image": image, "name": name, "command": config.get("Cmd"),
        "entrypoint": config.get("Entrypoint"), "environment": env,
        "labels": {**(config.get("Labels") or {}), **marks},
        "volumes": binds, "network_mode": host.get("NetworkMode") or "default",
        "working_dir": config.get("WorkingDir") or None, "user": config.get("User") or None,
        "stop_signal": config.get("StopSignal") or None, "detach": True,
    }
    if host.get("Memory"):
        spec["mem_limit"] = host["Memory"]
    if host.get("Init"):
        spec["init"] = True
    return spec


NO_RESTART = frozenset({"", "no"})
"""Restart policies under which a signalled job stays down after its exit. Under any other
(always, unless-stopped, on-failure) the engine could start it again before `docker stop` has
marked it stopped, so such jobs get `docker stop` alone (no separate SIGTERM first)."""


@dataclass
class Migration:
    """One Migrate action against `engines` (see the module docstring)."""

    engines: Engines
    state: ActuatorState
    steps: Steps
    recovery: Recovery
    clock: Callable[[], float] = time.time

    def run(self, action: Migrate, *, grace_seconds: float) -> None:
        name, src_node, dst_node = action.container, action.from_node, action.to_node
        leftover = self.engines.get(dst_node, name)
        ours = leftover is not None and leftover.labels.get(labels.MIGRATED_FROM) == src_node
        if ours and leftover is not None and leftover.status == "running" \
                and self.engines.get(src_node, name) is None:
            return  # an earlier attempt (or recovery) finished this very migration
        src = self.engines.actionable(src_node, name)
        name = src.name or name
        if leftover is not None:
            if not ours:
                raise ActuationError(f"node {dst_node} already has a container named {name} "
                                     "that policyd did not create; not replacing it")
            if leftover.status == "running":
                raise ActuationError(f"a replacement {name} already runs on node {dst_node} "
                                     "while the source runs too; recover() settles it")
            self.steps.remove(dst_node, leftover)
        if src.status != "running":
            raise ActuationError(f"container {name} on node {src_node} is {src.status}, "
                                 "not running; nothing to migrate")
        image = self.ensure_image(src.attrs, src_node, dst_node)
        move_id = uuid.uuid4().hex
        spec = replacement_spec(src.attrs, name=name, image=image, from_node=src_node,
                                action=action, now=self.clock(), move_id=move_id)
        self.state.begin_migration(name, from_node=src_node, to_node=dst_node,
                                   at=self.clock(), move_id=move_id, old_id=src.id or "")
        self.steps.crash("intent")
        try:
            problem = self.move(src_node, src, dst_node, spec, grace_seconds=grace_seconds)
        except (ActuationError, docker.errors.DockerException,
                requests.exceptions.RequestException) as exc:
            problem = f"failed: {exc}"
        if problem is not None:
            raise ActuationError(f"moving {name} from node {src_node} to node {dst_node}: "
                                 f"{problem}; {self.settle_after(name, src_node, dst_node)}")

    def move(self, src_node: str, src: Container, dst_node: str, spec: dict[str, Any], *,
             grace_seconds: float) -> str | None:
        """Steps 4-7; None when the job runs on the target, else what went wrong."""
        name = str(spec["name"])
        new = self.create(dst_node, spec)
        self.steps.crash("create")
        restart = ((src.attrs.get("HostConfig") or {}).get("RestartPolicy") or {}).get("Name")
        left = grace_seconds
        if (restart or "") in NO_RESTART:
            self.steps.signal_stop(src_node, src)
            self.steps.crash("sigterm")
            left = self.steps.await_exit(src_node, src, grace_seconds)
        code = self.steps.stop(src_node, src, left)
        self.steps.crash("exit")
        if code != 0:
            return (f"the old one exited with code {code} instead of 0 after SIGTERM (no "
                    f"checkpoint; 137 = killed after the {grace_seconds:g} s grace period)")
        # the target answers now: had it gone, the replacement was never started and the
        # table rolls back at once (after "starting" it must wait for the target instead)
        self.engines.call(dst_node, f"inspect {name}", new.reload)
        self.state.set_stage(name, "starting")
        problem = self.steps.start(dst_node, new)
        if problem is not None:  # never to be started again: the table rolls back
            self.state.set_stage(name, "rolling_back")
            return f"the replacement {problem}"
        self.steps.remove(src_node, src)
        self.state.end_migration(name)
        return None

    def create(self, node: str, spec: dict[str, Any]) -> Container:
        """Create the replacement; a 409 "already in use" (a retry whose first answer was
        lost) adopts the container of that name when it carries this move's id."""
        client = self.engines.client(node)
        name, move_id = str(spec["name"]), str(spec["labels"][labels.MOVE_ID])

        def create_or_adopt() -> Container:
            try:
                made: Container = client.containers.create(**spec)
                return made
            except docker.errors.APIError as exc:
                if exc.status_code != 409:
                    raise
                found: Container = client.containers.get(name)
                if found.labels.get(labels.MOVE_ID) != move_id:
                    raise ActuationError(f"node {node} already has a container named {name} "
                                         "that this move did not create") from exc
                return found

        return self.engines.call(node, f"create {name}", create_or_adopt)

    def settle_after(self, name: str, src_node: str, dst_node: str) -> str:
        """Settle a failed move by the recovery table; what it came to, in words."""
        try:
            done = self.recovery.settle(name, src_node, dst_node, count_failure=False)
        except ActuationError as exc:
            return f"not settled yet ({exc}); tried again next cycle"
        match done.outcome:
            case "roll_back":
                return f"rolled back: it runs on node {src_node} again ({done.why})"
            case "finish":
                return f"finished: it runs on node {dst_node} ({done.why})"
            case "wait":
                return f"pending: {done.why}; tried again every cycle"
            case _:
                return f"{done.outcome}: {done.why}"

    def ensure_image(self, attrs: Mapping[str, Any], src_node: str, dst_node: str) -> str:
        """The image reference to create the replacement from, copied to the target if it
        lacks it."""
        image_id, ref = str(attrs.get("Image", "")), (attrs.get("Config") or {}).get("Image")
        dst = self.engines.client(dst_node)
        try:
            self.engines.call(dst_node, f"inspect image {image_id[:19]}",
                              lambda: dst.images.get(image_id))
        except docker.errors.NotFound:
            self.copy_image(image_id, ref, src_node, dst_node)
        if ref:
            try:
                if self.engines.call(dst_node, f"inspect image {ref}",
                                     lambda: dst.images.get(ref)).id == image_id:
                    return str(ref)
            except docker.errors.NotFound:
                pass
        return image_id

    def copy_image(self, image_id: str, ref: str | None, src_node: str, dst_node: str) -> None:
        src, dst = self.engines.client(src_node), self.engines.client(dst_node)
        what = f"image {ref or image_id[:19]}"
        try:
            image = self.engines.call(src_node, f"inspect {what}", lambda: src.images.get(image_id))
            data = self.engines.call(src_node, f"export {what}",
                                     lambda: b"".join(image.save(named=bool(image.tags))))
            self.engines.call(dst_node, f"import {what}", lambda: dst.images.load(data))
            self.engines.call(dst_node, f"inspect {what}", lambda: dst.images.get(image_id))
        except (ActuationError, docker.errors.NotFound) as exc:
            raise ActuationError(f"{what} is not on node {dst_node} and could not be copied "
                                 f"from node {src_node}: {exc}") from exc
