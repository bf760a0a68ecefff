"""Admit on Docker: start a held container on the node a policy chose.

A held job is a container *created but not started* (`docker create`) that carries policyd's
managed label: it waits until a policy that admits (the Deadline kind) emits an `Admit`. Steps,
in this order so that a failure leaves the job held, never lost or running twice:

1. if a managed container of that name already runs on `node`, an earlier attempt finished:
   nothing to do (idempotent); if it runs on any other node while the held one waits, an
   earlier attempt copied and started it there and stopped (policyd killed, engine lost) before
   removing the held container: that removal is all that is left, and the job is never started
   a second time elsewhere, whichever node the policy chose this time. An engine that does not
   answer is not looked at (the job would rather stay held: it is asked again next cycle);
2. the held container, on `held_on` (the node it was created on; `node` when not given), must
   be managed and in status `created`;
3. on the same node: its CPU limit is set first when the action carries one (`update`, as a
   `SetCpu` would), then it is started and must be running within `start_timeout_seconds` and
   still `confirm_seconds` later (as a migration's replacement);
4. on another node: the image is made present there (copied as a migration copies it), a copy
   is created under the same name (`migration.copy_spec`: same image, command, environment,
   binds, network, labels) with the CPU limit and the labels `policyd.io/submitted-at` (the
   held container's creation: a deadline given as a duration still counts from the original
   submission), `policyd.io/last_action_at` and `policyd.io/admitted-from` (the node it was
   held on); it is started and confirmed, and only then is the held container removed. If the
   copy does not start, the copy is removed and the held container stays held; the error says
   why (with the copy's log tail).

A container is also `created` for the moment between a `docker run`'s create and its start,
and the engine's `create` event wakes the admitting policies at once: policyd can list a job
its owner is starting right then as held (seen on real engines: most `docker run`s of the
FlowCon2 proof were listed so). Started where it is, that is harmless (the start finds it
running); copied elsewhere, the owner's start would run the job twice. So before copying a
container created less than `SETTLE_SECONDS` ago (by policyd's clock; a container that looks
older, or created in the future by a skewed engine clock, is not waited for), the admission
waits until it is that old and inspects it again. One its owner started, meanwhile or already
by the time the Admit comes (on a loaded host the start often beats the admission), is not
held: it is left where it runs and the admission does nothing (a log line, not a failed action:
the job runs once, and a `PolicydActionFailed` alert at every `docker run` would be noise).

Stopped between the copy's start and the held container's removal (policyd killed, the held
node's engine lost), the held original would stay: the sources do not offer a held container
whose name runs (`sources.docker_held`), so no Admit would come to remove it. At start-up the
actuator's recovery removes it (`leftovers`): a held container whose name runs on the node
another node's copy says it was admitted from. A container of that name held elsewhere, or a
running one without the label, is not this admission's and is left alone.

Raises `ActuationError` with a one-line reason for every failure.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from docker.models.containers import Container

from policyd.actuators.docker.cpu import cpu_update
from policyd.actuators.docker.engines import Engines
from policyd.actuators.docker.migration import Migration, copy_spec, created_at, epoch_label
from policyd.actuators.docker.steps import Steps
from policyd.actuators.errors import ActuationError
from policyd.model import Admit, labels

LOG = logging.getLogger(__name__)

HELD_STATUS = "created"
SETTLE_SECONDS = 1.0
"""How old a held container must be before it is copied to another node: a `docker run`
starts its container well within it (module docstring)."""


def create_limits(action: Admit, cores: float) -> dict[str, Any]:
    """The CPU keyword arguments of `containers.create` for the action's limit (none without
    one): what `cpu_update` would set, without the values that only undo an earlier setting."""
    if action.fraction is None:
        return {}
    update = cpu_update(action.fraction, action.mode, cores=cores, current_shares=0,
                        current_quota=0)
    return {key: value for key, value in update.items() if value > 0}


@dataclass
class Admission:
    """One Admit action against `engines` (see the module docstring)."""

    engines: Engines
    migration: Migration  # copies the image to another node as a move does
    steps: Steps  # starts and confirms the container as a move starts its replacement
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep

    def run(self, action: Admit) -> str | None:
        """Carry the action out; the node the job runs on (the chosen one, or where an earlier
        attempt started it), or None when there was nothing to do: its owner started it where
        it was created (module docstring)."""
        name, node = action.container, action.node
        held_on = action.held_on or node
        running_on = self.copy_runs(name, held_on, chosen=node)
        if running_on is not None:
            self.finish(name, held_on)  # an earlier attempt started the copy
            return running_on
        held = self.engines.actionable(held_on, name)
        if held.status != HELD_STATUS:
            if held.status == "running" and held_on == node:
                return node  # an earlier attempt started it
            if held.status == "running":
                return self._started_by_owner(name, held_on, "by the admission")
            raise ActuationError(f"container {name} on node {held_on} is {held.status}, not "
                                 f"held ({HELD_STATUS}): only a created, never started "
                                 "container is admitted")
        if held_on == node:
            self.start_here(action, held)
            return node
        settled = self.settled(held, held_on)
        if settled is None:
            return self._started_by_owner(name, held_on, f"within {SETTLE_SECONDS:g} s of "
                                          "its creation")
        self.start_elsewhere(action, settled, held_on)
        return node

    @staticmethod
    def _started_by_owner(name: str, held_on: str, when: str) -> None:
        LOG.info("docker: admit of %s: it was started on %s %s (a docker run, not a held "
                 "job): left where it runs, nothing to do", name, held_on, when)

    def settled(self, held: Container, held_on: str) -> Container | None:
        """`held`, inspected again once it is `SETTLE_SECONDS` old when it is younger; None
        when its owner started it meanwhile (a `docker run`, module docstring). An
        ActuationError when it is then neither held nor running."""
        created = created_at(held.attrs)
        age = None if created is None else self.clock() - created
        if age is None or not 0 <= age < SETTLE_SECONDS:
            return held
        self.sleep(SETTLE_SECONDS - age)
        name = str(held.name)
        again = self.engines.managed(held_on, name)
        if again.status == "running":
            return None
        if again.status != HELD_STATUS:
            raise ActuationError(
                f"container {name} on node {held_on} was {again.status} within "
                f"{SETTLE_SECONDS:g} s of its creation, not held ({HELD_STATUS}): left as it is")
        return again

    def copy_runs(self, name: str, held_on: str, *, chosen: str) -> str | None:
        """The node other than `held_on` where a managed container `name` runs, if any (the
        chosen node asked first, its errors raised; other nodes that do not answer are
        skipped)."""
        for other in (chosen, *(n for n in self.engines.nodes if n != chosen)):
            if other == held_on:
                continue
            try:
                there = self.engines.get(other, name)
            except ActuationError:
                if other == chosen:
                    raise
                continue
            if there is not None and there.status == "running":
                self.engines.managed(other, name)  # raises unless policyd manages it
                return other
        return None

    def finish(self, name: str, held_on: str) -> None:
        """Remove the held container an earlier attempt left behind its started copy."""
        self._remove_held(self.engines.get(held_on, name), held_on)

    def _remove_held(self, stale: Container | None, held_on: str) -> bool:
        """Remove `stale` (inspected on `held_on`) when it is held; whether it was."""
        if stale is None or stale.status != HELD_STATUS:
            return False
        self.engines.call(held_on, f"remove held {stale.name}", lambda: stale.remove(v=False))
        return True

    def leftovers(self) -> list[str]:
        """Remove every held original whose copy an earlier admission started on another node
        (module docstring); each removed one as `name on node`. Engines that do not answer are
        skipped (the next start-up looks again)."""
        removed = []
        for node in self.engines.nodes:
            try:
                running = self.engines.list_managed(node, all_states=False)
            except ActuationError:
                continue
            for copy in running:
                held_on = copy.labels.get(labels.ADMITTED_FROM)
                if held_on is None or held_on == node or held_on not in self.engines.nodes:
                    continue
                try:
                    stale = self.engines.get(held_on, str(copy.name))
                except ActuationError:
                    continue
                if self._remove_held(stale, held_on):
                    removed.append(f"{copy.name} on {held_on}")
        return removed

    def start_here(self, action: Admit, held: Container) -> None:
        name, node = action.container, action.node
        if action.fraction is not None:
            host = held.attrs.get("HostConfig") or {}
            if action.mode == "quota" and host.get("NanoCpus"):
                raise ActuationError(
                    f"container {name} on node {node} was created with --cpus (NanoCpus); "
                    "Docker refuses a CPU quota next to it: create it without --cpus")
            cores = self.engines.cores(node) if action.mode == "quota" else 1.0
            update = cpu_update(action.fraction, action.mode, cores=cores,
                                current_shares=int(host.get("CpuShares") or 0),
                                current_quota=int(host.get("CpuQuota") or 0))
            self.engines.call(node, f"update cpu of {name} ({update})",
                              lambda: held.update(**update))
        problem = self.steps.start(node, held)
        if problem is not None:
            raise ActuationError(f"held container {name} on node {node} {problem}")

    def start_elsewhere(self, action: Admit, held: Container, held_on: str) -> None:
        name, node = action.container, action.node
        image = self.migration.ensure_image(held.attrs, held_on, node)
        submitted = created_at(held.attrs)
        marks = {labels.LAST_ACTION_AT: epoch_label(self.clock()), labels.ADMITTED_FROM: held_on}
        if submitted is not None and labels.SUBMITTED_AT not in held.labels:
            marks[labels.SUBMITTED_AT] = epoch_label(submitted)
        spec = copy_spec(held.attrs, name=name, image=image, from_node=held_on, marks=marks)
        cores = self.engines.cores(node) if action.mode == "quota" else 1.0
        spec |= create_limits(action, cores)
        leftover = self.engines.get(node, name)
        if leftover is not None:  # a copy an earlier attempt created but did not start
            self.engines.managed(node, name)
            self.engines.call(node, f"remove leftover {name}",
                              lambda: leftover.remove(force=True))
        client = self.engines.client(node)
        copy: Container = self.engines.call(node, f"create {name}",
                                            lambda: client.containers.create(**spec))
        problem = self.steps.start(node, copy)
        if problem is not None:
            self.engines.call(node, f"remove {name}", lambda: copy.remove(force=True))
            raise ActuationError(f"copy of held container {name} on node {node} {problem}; "
                                 f"removed it, the job stays held on node {held_on}")
        self.engines.call(held_on, f"remove held {name}", lambda: held.remove(v=False))
