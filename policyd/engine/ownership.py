"""Policies that meet on one container: which policy owns each class of action on it.

Nothing stops two policies from selecting the same container: a FlowCon policy and another
policy that also sets CPU would each undo the other's limit every cycle. So every class of
action (`policyd.engine.kind.ACTION_CLASSES`: CPU limits, placement, admission) on a
container (or a held job, for admission) belongs to one policy: among the policies that select
the container and whose kind emits that class, the one with the highest `spec.priority`, ties
broken by name (alphabetically first wins). The
others still categorise the container (it competes for their nodes' CPU) but leave it alone:
their actions on it are dropped here, after the kind's plan, and their assessment says which
policy owns it.

Dry-run policies stand outside this: they act on nothing, so they own nothing (a policy tried
in dry run beside the live one never takes a container from it), and they yield to no one (a
dry run shows everything the policy would do if it ran alone).

`overlaps` finds the pairs of policies whose selectors *can* select one container for the same
class of action, for `policyd validate` to warn about before anything runs.

Pure: the policies and the snapshot are the only inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from policyd.engine.kind import ActionClass, action_class
from policyd.engine.registry import KINDS
from policyd.engine.spec import PolicyDocument, Selector, Workload
from policyd.model import Container, Decision, PendingJob, QueuedJob


def precedence(policy: PolicyDocument) -> tuple[int, str]:
    """Sort key: the owner sorts first (highest priority, then the name)."""
    return (-policy.spec.priority, policy.name)


def owner(container: Workload, action: ActionClass,
          policies: Sequence[PolicyDocument]) -> PolicyDocument | None:
    """The policy that owns `action` on `container` among `policies`, or None."""
    candidates = [p for p in policies if not p.spec.dry_run
                  and action in KINDS.of(p).acts_on_of(p) and p.spec.selector.selects(container)]
    return min(candidates, key=precedence) if candidates else None


def _owned(policy: PolicyDocument, owner_policy: PolicyDocument, action: ActionClass) -> str:
    return (f"{action} owned by policy {owner_policy.name} (priority "
            f"{owner_policy.spec.priority} vs {policy.spec.priority}"
            f"{', name first' if owner_policy.spec.priority == policy.spec.priority else ''})")


def yield_to_owners(decision: Decision, policy: PolicyDocument,
                    peers: Sequence[PolicyDocument], containers: Sequence[Container],
                    pending: Sequence[PendingJob] = ()) -> Decision:
    """`decision` without the actions on containers (and held jobs) another of `peers` owns,
    and a note on each such container's assessment (or queue entry) naming the owner."""
    others = [p for p in peers if p.name != policy.name and not p.spec.dry_run]
    mine = KINDS.of(policy).acts_on_of(policy)
    if not others or not mine or policy.spec.dry_run:
        return decision
    everyone = [policy, *others]
    by_id: dict[str, Workload] = {c.id: c for c in containers}
    owners: dict[tuple[str, ActionClass], PolicyDocument] = {}
    ids = [a.container for a in decision.assessments]
    if "admission" in mine:
        by_id.update((p.id, p) for p in pending)
        ids += [a.container for a in decision.actions if action_class(a) == "admission"]
        ids += [q.container for q in decision.queue]
    for cid in ids:
        c = by_id.get(cid)
        if c is None:
            continue
        for action in sorted(mine):
            found = owner(c, action, everyone)
            if found is not None and found.name != policy.name:
                owners[(cid, action)] = found
    if not owners:
        return decision
    kept = tuple(a for a in decision.actions
                 if (a.container, action_class(a)) not in owners)
    assessments = []
    for seen in decision.assessments:
        said = [_owned(policy, owners[(seen.container, action)], action)
                for action in sorted(mine) if (seen.container, action) in owners]
        if said:
            note = "; ".join(said) + ": no action here" + (f" ({seen.note})" if seen.note else "")
            seen = replace(seen, note=note)  # noqa: PLW2901
        assessments.append(seen)
    queue = _queue_yielding(decision, policy, owners)
    dropped = len(decision.actions) - len(kept)
    containers_owned = len({cid for cid, _ in owners})
    note = (f"{containers_owned} container(s) owned by other policies for "
            f"{'/'.join(sorted({action for _, action in owners}))}; {dropped} action(s) left "
            "to them")
    return replace(decision, actions=kept, assessments=tuple(assessments), queue=queue,
                   notes=(*decision.notes, note))


def _queue_yielding(decision: Decision, policy: PolicyDocument,
                    owners: dict[tuple[str, ActionClass], PolicyDocument]
                    ) -> tuple[QueuedJob, ...]:
    """The queue with every held job another policy admits marked as theirs (an `Admit` of
    this policy for one becomes such an entry), positions renumbered in order."""
    theirs = {cid for cid, action in owners if action == "admission"}
    if not theirs:
        return decision.queue
    admitted = [a.container for a in decision.actions
                if action_class(a) == "admission" and a.container in theirs]
    entries = [*(QueuedJob(container=cid, position=1, why="owned", reason="admitted here")
                 for cid in admitted), *decision.queue]  # admitted ones came first in order
    out = []
    for position, q in enumerate(entries, start=1):
        if q.container in theirs:
            why = _owned(policy, owners[(q.container, "admission")], "admission")
            out.append(replace(q, position=position, why="owned",
                               reason=f"{why}; not admitted here"))
        else:
            out.append(replace(q, position=position))
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class Overlap:
    """Two policies that can select one container for the same class of action."""

    first: PolicyDocument
    second: PolicyDocument
    actions: tuple[ActionClass, ...]

    @property
    def owner(self) -> PolicyDocument:
        return min((self.first, self.second), key=precedence)


def selectors_can_meet(a: Selector, b: Selector) -> bool:
    """Whether some container could be selected by both (namespaces meet, labels agree)."""
    if a.namespaces and b.namespaces and not set(a.namespaces) & set(b.namespaces):
        return False
    return all(b.labels.get(key, value) == value for key, value in a.labels.items())


def overlaps(policies: Sequence[PolicyDocument]) -> list[Overlap]:
    """Every pair of live (not dry-run) `policies` that can meet on one container for one class
    of action."""
    found = []
    live = [p for p in policies if not p.spec.dry_run]
    for i, first in enumerate(live):
        for second in live[i + 1:]:
            shared = KINDS.of(first).acts_on_of(first) & KINDS.of(second).acts_on_of(second)
            if shared and selectors_can_meet(first.spec.selector, second.spec.selector):
                found.append(Overlap(first=first, second=second,
                                     actions=tuple(sorted(shared))))
    return found
