"""Migrate: the checkpoint protocol of exporters/README.md, on two Docker engines.

Steps, in this order so that a failure at any point leaves one job running (DESIGN.md: never
remove the old container, whose checkpoint directory is shared, before the new one runs):

1. the source must be a running, managed container; its bind mounts must be host paths (a
   named volume is local to its engine: the replacement would start without the checkpoint);
2. the image must exist on the target: if it does not, it is copied (`save` on the source
   engine, `load` on the target; image ids are content addresses, so the copy is exact);
3. the replacement is *created* (not started) on the target under the same name (names are
   per engine, so a retry finds it: idempotent), with the same image, command, environment
   (`POLICYD_CONTAINER` set to its name), binds, network mode and labels, plus the markers
   `policyd.io/migrated=true`, `converged_at`, `rebalanced` (Algorithm 5), `migrated-from`,
   `last_action_at` and `submitted-at` (the source's creation, unless it has one: a deadline
   given as a duration counts from the original submission); CPU settings are not copied
   (unrestricted: FlowCon starts it afresh);
4. the intent is recorded (`state.migrations`), then the source gets SIGTERM and the grace
   period (`container.stop(timeout=grace)`: SIGTERM, then SIGKILL). It must exit 0 (the job's
   "checkpoint written"); any other code rolls back: the replacement is removed and the
   source started again (it resumes from its newest checkpoint);
5. the replacement is started and must be running within `start_timeout_seconds` and still
   running `confirm_seconds` later; otherwise it is removed (its log tail goes into the
   error) and the source is started again;
6. the source container is removed (its checkpoint files are on the shared path and stay),
   and the intent cleared.

A crash between 4 and 6 leaves a half-done migration that `recovery` finishes or rolls back.
Not done here: asking the new job's exporter whether it answers (its port is in its
command line, which policyd does not interpret); "running after confirm_seconds" stands in.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import docker.errors
from docker.models.containers import Container

from policyd.actuators.docker.engines import Engines
from policyd.actuators.docker.state import ActuatorState
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
                     action: Migrate, now: float) -> dict[str, Any]:
    """`containers.create` keyword arguments re-creating `attrs` (an inspect result) as `name`
    with policyd's markers. Pure; raises ActuationError for what cannot move."""
    marks = {labels.MIGRATED: "true", labels.MIGRATED_FROM: from_node,
             labels.LAST_ACTION_AT: epoch_label(now)}
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


@dataclass
class Migration:
    """One Migrate action against `engines` (see the module docstring)."""

    engines: Engines
    state: ActuatorState
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep

    def run(self, action: Migrate, *, grace_seconds: float) -> None:
        name, src_node, dst_node = action.container, action.from_node, action.to_node
        leftover = self.engines.get(dst_node, name)
        ours = leftover is not None and leftover.labels.get(labels.MIGRATED_FROM) == src_node
        if ours and leftover is not None and leftover.status == "running" \
                and self.engines.get(src_node, name) is None:
            return  # an earlier attempt (or recovery) finished this very migration
        src = self.engines.managed(src_node, name)
        name = src.name or name
        if leftover is not None:
            if not ours:
                raise ActuationError(f"node {dst_node} already has a container named {name} "
                                     "that policyd did not create; not replacing it")
            if leftover.status == "running":
                raise ActuationError(f"a replacement {name} already runs on node {dst_node} "
                                     "while the source runs too; recover() settles it")
            self.engines.call(dst_node, f"remove leftover {name}",
                              lambda: leftover.remove(force=True))
        if src.status != "running":
            raise ActuationError(f"container {name} on node {src_node} is {src.status}, "
                                 "not running; nothing to migrate")
        image = self.ensure_image(src.attrs, src_node, dst_node)
        spec = replacement_spec(src.attrs, name=name, image=image, from_node=src_node,
                                action=action, now=self.clock())
        dst_client = self.engines.client(dst_node)
        new: Container = self.engines.call(dst_node, f"create {name}",
                                           lambda: dst_client.containers.create(**spec))
        self.state.begin_migration(name, from_node=src_node, to_node=dst_node,
                                   at=self.clock())
        code = self.stop(src_node, src, grace_seconds)
        if code != 0:
            self.roll_back(src_node, src, dst_node, new)
            raise ActuationError(
                f"container {name} on node {src_node} exited with code {code} instead of 0 "
                f"after SIGTERM (no checkpoint; 137 = killed after the {grace_seconds:g} s "
                "grace period); rolled back: started it again")
        problem = self.start(dst_node, new)
        if problem is not None:
            self.roll_back(src_node, src, dst_node, new)
            raise ActuationError(f"replacement {name} on node {dst_node} {problem}; rolled "
                                 f"back: started it again on node {src_node}")
        self.engines.call(src_node, f"remove {name}", lambda: src.remove(v=False))
        self.state.end_migration(name)

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

    def stop(self, node: str, container: Container, grace_seconds: float) -> int:
        """SIGTERM, wait up to the grace period (then SIGKILL); the exit code."""
        if container.status in ("running", "restarting", "paused"):
            self.engines.call(node, f"stop {container.name}",
                              lambda: container.stop(timeout=round(grace_seconds)))
        self.engines.call(node, f"inspect {container.name}", container.reload)
        state = container.attrs.get("State") or {}
        if state.get("Running"):
            return -1
        return int(state.get("ExitCode", -1))

    def start(self, node: str, container: Container) -> str | None:
        """Start and confirm; None when it runs, else what went wrong."""
        timeout = self.engines.settings.start_timeout_seconds
        self.engines.call(node, f"start {container.name}", container.start)
        deadline = self.clock() + timeout
        confirmed_at: float | None = None
        while True:
            self.engines.call(node, f"inspect {container.name}", container.reload)
            state = container.attrs.get("State") or {}
            if not state.get("Running"):
                if state.get("Status") in ("exited", "dead"):
                    tail = self.log_tail(node, container)
                    return f"exited with code {state.get('ExitCode')}" + (
                        f" (log: {tail})" if tail else "")
            elif confirmed_at is None:
                confirmed_at = self.clock() + self.engines.settings.confirm_seconds
            if confirmed_at is not None and self.clock() >= confirmed_at:
                return None
            if confirmed_at is None and self.clock() >= deadline:
                return f"was not running within {timeout:g} s"
            self.sleep(0.2)

    def log_tail(self, node: str, container: Container) -> str:
        try:
            raw = self.engines.call(node, "read logs", lambda: container.logs(tail=3))
        except (ActuationError, docker.errors.NotFound):
            return ""
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        return " | ".join(line for line in text.splitlines() if line.strip())[-300:]

    def roll_back(self, src_node: str, src: Container, dst_node: str, new: Container) -> None:
        """Remove the replacement, start the source again (it resumes from its checkpoint)."""
        name = src.name
        with contextlib.suppress(docker.errors.NotFound):
            self.engines.call(dst_node, f"remove {name}", lambda: new.remove(force=True))
        self.engines.call(src_node, f"start {name} again", src.start)
        self.state.end_migration(str(name))
