"""Policies as custom resources: watched, judged by policyd's own validation, reported back.

`PolicyResources` lists and watches the policy custom resources of some kinds (one thread per
kind, each a `policyd.clients.kubernetes_follow.Follower`, the pod watch's loop: list, then
watch windows from the list's resourceVersion; 410 Gone relists; other failures back off;
`stop` shuts an open watch at once). Each list is taken as the whole set of that kind (those
no longer in it are forgotten), each change after it one resource at a time.
Every new generation of a resource is checked as a policy file is
(`policyd.policy.resource.check_resource`) and the hot-reload rule of files applies to each
resource on its own: a valid generation replaces the resource's policy; an invalid one keeps
the last good generation running (or none, for a new resource) and says why. What policyd made
of a resource goes into its `status` (the status subresource): `observedGeneration` and one
condition `Accepted` (True: `Valid`, or `ValidWithWarnings` with the warnings; False:
`Invalid` with every problem, or `NameTaken` when a policy file or another resource already
has the name), written only when it differs from what the resource shows, so that several
policyd processes watching the same resources write each verdict once.

`take()` gives the set of good policies when it changed since the last call (the daemon's
reload loop polls it through `policy_set.PolicySources`). Which kinds a process watches
follows its role (`roles.watched_kinds`). A missing CRD (404) or a missing permission (403)
is logged and retried with back-off: the files still work.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

from kubernetes import watch as k8s_watch  # type: ignore[import-untyped]
from kubernetes.client.exceptions import ApiException  # type: ignore[import-untyped]

from policyd.clients.kubernetes_follow import Follower, Listing
from policyd.clients.kubernetes_json import body
from policyd.clients.policy_resources import GROUP, VERSION, Resource, resource
from policyd.engine.spec import PolicyDocument
from policyd.policy.resource import check_resource, summary

LOG = logging.getLogger(__name__)
ACCEPTED = "Accepted"


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """What policyd made of one generation of one resource."""

    status: bool
    reason: str
    message: str
    generation: int

    def condition(self, since: str) -> dict[str, Any]:
        return {"type": ACCEPTED, "status": "True" if self.status else "False",
                "reason": self.reason, "message": self.message,
                "observedGeneration": self.generation, "lastTransitionTime": since}


def _now() -> str:
    return datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class PolicyResources:
    """The policy custom resources of `kinds`, through `api` (a CustomObjectsApi).
    `taken(name)` says where a policy file already uses a name (None: free)."""

    def __init__(self, api: Any, kinds: Sequence[str], *,
                 taken: Callable[[str], str | None] = lambda name: None,
                 window_seconds: int = 30, backoff_seconds: float = 1.0,
                 max_backoff_seconds: float = 60.0,
                 make_watch: Callable[[], Any] = k8s_watch.Watch,
                 now: Callable[[], str] = _now) -> None:
        self.api = api
        self.resources: tuple[Resource, ...] = tuple(resource(k) for k in kinds)
        self.taken = taken
        self.window_seconds = window_seconds
        self.backoff_seconds, self.max_backoff_seconds = backoff_seconds, max_backoff_seconds
        self._make_watch, self._now = make_watch, now
        self._lock = threading.RLock()
        self._objects: dict[tuple[str, str], dict[str, Any]] = {}
        self._good: dict[tuple[str, str], tuple[int, PolicyDocument]] = {}
        self._changed = False
        self._threads: list[threading.Thread] = []

    # -- the set of good policies ----------------------------------------------------------

    def current(self) -> tuple[PolicyDocument, ...]:
        """Every resource's last good policy, by name."""
        with self._lock:
            return tuple(policy for _, (_, policy) in sorted(
                self._good.items(), key=lambda item: item[1][1].name))

    def take(self) -> tuple[PolicyDocument, ...] | None:
        """`current()` when it changed since the last `take`, else None."""
        with self._lock:
            if not self._changed:
                return None
            self._changed = False
            return self.current()

    def rejudge(self) -> None:
        """Judge every resource again (the policy files changed: names may clash now)."""
        with self._lock:
            for (plural, _), obj in list(self._objects.items()):
                self._judge(self._resource(plural), obj)

    # -- listing and watching ------------------------------------------------------------------

    def list_all(self) -> None:
        """List every kind's resources now (at start: the first set includes them)."""
        for res in self.resources:
            try:
                self._list(res)
            except ApiException as exc:
                LOG.warning("policy resources: cannot list %s: HTTP %s (%s); the policy files "
                            "still apply, retried in the background", res.plural, exc.status,
                            "the CRD is not installed" if exc.status == 404 else
                            "no permission" if exc.status == 403 else exc.reason)

    def start(self, stop: threading.Event) -> None:
        """One watch thread per kind, until `stop`."""
        for res in self.resources:
            follower = Follower(self._listing(res),
                                label=f"policy resources: watching {res.plural}",
                                window_seconds=self.window_seconds,
                                backoff_seconds=self.backoff_seconds,
                                max_backoff_seconds=self.max_backoff_seconds,
                                make_watch=self._make_watch)
            thread = threading.Thread(target=follower.follow, daemon=True,
                                      args=(partial(self._listed, res),
                                            partial(self._change, res), stop),
                                      name=f"policyd-watch-{res.plural}")
            thread.start()
            self._threads.append(thread)

    def join(self, timeout_seconds: float = 5.0) -> None:
        for thread in self._threads:
            thread.join(timeout_seconds)

    def _listing(self, res: Resource) -> Listing:
        return Listing(calls=((self.api.list_cluster_custom_object,
                               (GROUP, VERSION, res.plural)),))

    def _list(self, res: Resource) -> None:
        items, _ = self._listing(res).list()
        self._listed(res, items)

    def _listed(self, res: Resource, items: list[dict[str, Any]]) -> None:
        """`items` are all the resources of `res`'s kind now."""
        seen = {}
        for item in items:
            item.setdefault("apiVersion", f"{GROUP}/{VERSION}")
            item.setdefault("kind", res.kind)
            seen[str(item["metadata"]["name"])] = item
        with self._lock:
            for name in [n for plural, n in self._objects if plural == res.plural]:
                if name not in seen:
                    self._forget(res, name)
            for item in seen.values():
                self._update(res, item)

    def _change(self, res: Resource, kind: str, obj: dict[str, Any]) -> None:
        with self._lock:
            if kind == "DELETED":
                self._forget(res, str(obj["metadata"]["name"]))
            else:
                self._update(res, obj)

    # -- judging ---------------------------------------------------------------------------

    def _resource(self, plural: str) -> Resource:
        return next(r for r in self.resources if r.plural == plural)

    def _update(self, res: Resource, obj: dict[str, Any]) -> None:
        key = (res.plural, str(obj["metadata"]["name"]))
        old = self._objects.get(key)
        self._objects[key] = obj
        same = old is not None and (old.get("metadata") or {}).get("generation") == \
            (obj.get("metadata") or {}).get("generation")
        if not same or self._verdict_shown(obj) is None:
            self._judge(res, obj)

    def _forget(self, res: Resource, name: str) -> None:
        self._objects.pop((res.plural, name), None)
        if self._good.pop((res.plural, name), None) is not None:
            self._changed = True
            LOG.info("policy resources: %s/%s removed", res.plural, name)
        for (plural, other), obj in list(self._objects.items()):
            if other == name:  # a resource of another kind may have waited for the name
                self._judge(self._resource(plural), obj)

    def _clash(self, res: Resource, name: str, obj: Mapping[str, Any]) -> str | None:
        """Where the name is already used: a policy file, or an older resource of another
        kind (names are unique across all policies)."""
        in_file = self.taken(name)
        if in_file is not None:
            return f"policy file {in_file}"
        mine = str((obj.get("metadata") or {}).get("creationTimestamp") or "")
        for (plural, other), seen in self._objects.items():
            theirs = str((seen.get("metadata") or {}).get("creationTimestamp") or "")
            if other == name and plural != res.plural and (theirs, plural) < (mine, res.plural):
                return f"{plural}/{name}"
        return None

    def _judge(self, res: Resource, obj: dict[str, Any]) -> None:
        name = str(obj["metadata"]["name"])
        key = (res.plural, name)
        generation = int((obj.get("metadata") or {}).get("generation") or 0)
        clash = self._clash(res, name, obj)
        checked = check_resource(obj, f"{res.plural}/{name}")
        if clash is not None:
            verdict = Verdict(status=False, reason="NameTaken", generation=generation,
                              message=f"the name {name} is taken by {clash}; policy names are "
                                      "unique across policy files and resources")
            if self._good.pop(key, None) is not None:
                self._changed = True
        elif checked.problems:
            kept = self._good.get(key)
            still = (f"; generation {kept[0]} (the last good one) keeps running" if kept
                     else "; not running")
            verdict = Verdict(status=False, reason="Invalid", generation=generation,
                              message=summary(checked.problems) + still)
            LOG.error("policy resources: %s/%s generation %d rejected: %s", res.plural, name,
                      generation, verdict.message)
        else:
            (policy,) = checked.policies
            before = self._good.get(key)
            if before is None or before[1] != policy:
                self._changed = True
                LOG.info("policy resources: %s/%s generation %d %s", res.plural, name,
                         generation, "loaded" if before is None else "updated")
            self._good[key] = (generation, policy)
            verdict = Verdict(status=True, generation=generation,
                              reason="ValidWithWarnings" if checked.warnings else "Valid",
                              message=summary(checked.warnings) or "running")
        self._report(res, obj, verdict)

    def _verdict_shown(self, obj: Mapping[str, Any]) -> dict[str, Any] | None:
        for condition in ((obj.get("status") or {}).get("conditions") or []):
            if condition.get("type") == ACCEPTED:
                return dict(condition)
        return None

    def _report(self, res: Resource, obj: Mapping[str, Any], verdict: Verdict) -> None:
        """Write the verdict into the resource's status, unless it shows it already."""
        shown = self._verdict_shown(obj)
        wanted = verdict.condition("")
        if shown is not None and all(shown.get(k) == wanted[k] for k in
                                     ("status", "reason", "message", "observedGeneration")):
            return
        since = (shown or {}).get("lastTransitionTime") if shown is not None and \
            shown.get("status") == wanted["status"] else None
        patch = {"status": {"observedGeneration": verdict.generation,
                           "conditions": [verdict.condition(since or self._now())]}}
        name = str(obj["metadata"]["name"])
        try:
            written = body(self.api.patch_cluster_custom_object_status(
                GROUP, VERSION, res.plural, name, patch, _preload_content=False))
        except ApiException as exc:
            LOG.warning("policy resources: cannot write the status of %s/%s: HTTP %s",
                        res.plural, name, exc.status)
            return
        if written.get("metadata"):
            self._objects[(res.plural, name)] = written
