"""`PodWatch`: the managed pods starting and stopping, as the Kubernetes API reports them (the
`policyd.tick.EventSource` of FlowCon's Algorithm 2 listener).

List, then watch from the list's resourceVersion; a 410 Gone (the version expired) relists and
reports the difference. The loop is `kubernetes_list_watch.ListWatch`, shared with the held
Jobs' `kubernetes_jobs.JobWatch`; this module says only which calls (`kubernetes_pod_facts`'
list calls, with `watch=True`) and what counts as running (`running_facts`, by uid).

What it sees is also the source's pod list (`running_now`), as an informer's cache is: every
cycle used to list every managed pod, 44.5 MB of JSON and 2-3 CPU s of decoding at 10,000 pods
on a slow 2-core host (benchmarks/README.md, "pod_list.py"), and the API server's work to serve
it. A change reaches the view as the watch's event; the view is read only while the
watch keeps it, and only when one watch call covers every managed pod (all namespaces, or one:
`ListWatch.view`).

Must not: build snapshots or read Prometheus (the source, `kubernetes_pods`), or act on what it
sees (the daemon ticks the policies).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Unpack

from policyd.sources.kubernetes_list_watch import ListWatch, Tracked, WatchOptions
from policyd.sources.kubernetes_pod_facts import PodFacts, PodScope, pod_listing, running_facts


class PodWatch(ListWatch):
    """Pods starting and stopping (FlowCon's Algorithm 2 listener; `policyd.tick.EventSource`):
    a running pod (`running_facts`, by uid) that appears is "started", one that stops
    running or is deleted "stopped", each named `namespace/pod/container` on its node. The
    list, the watch windows, 410 and the back-off, and the prompt stop are
    `kubernetes_list_watch.ListWatch`'s; the calls `list_namespaced_pod` (one per configured
    namespace) or `list_pod_for_all_namespaces`, with the label selector and, on a node agent,
    the node's field selector."""

    def __init__(self, core: Any, scope: PodScope, **options: Unpack[WatchOptions]) -> None:
        self.core, self.scope = core, scope
        super().__init__(pod_listing(core, scope), self._running, entered="started",
                         left="stopped", name="pod", **options)

    def _running(self, pod: Mapping[str, Any]) -> Tracked | None:
        f = running_facts(pod, self.scope.container_name)
        if f is None:
            return None
        return Tracked(uid=f.uid, container=f.id, node=f.node, item=f)

    def running_now(self) -> list[PodFacts] | None:
        """The managed pods running now, as the watch has seen them (the source reads them
        instead of listing every pod: `KubernetesPodSource`); None while the watch does not
        keep them (not running, not listed yet, the API server lost since) or when several
        watch calls share it (module docstring)."""
        tracked = self.view()
        return None if tracked is None else [t.item for t in tracked]
