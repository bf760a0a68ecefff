"""`NodeWatch`: the nodes (their allocatable CPU and labels) kept as the source's view of them.

Every cycle of the Kubernetes source listed the nodes (the manager all of them, 4.4 kB a node;
a node agent its own, so a DaemonSet of N agents made N node lists every interval). The nodes
change seldom; a watch keeps what they are, as an informer's cache does, and the source reads
it (`nodes_now`) instead of listing. The loop (list, then watch from the list's
resourceVersion, 410 relists, back-off, the prompt stop, the view forgotten while the API
server is lost) is `kubernetes_list_watch.ListWatch`'s; it reports no event (a node coming or
going wakes no policy: its containers' events do).

Must not: build snapshots (the source, `kubernetes_pods`), or act on what it sees.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Unpack

from policyd.sources.kubernetes_list_watch import ListWatch, Tracked, WatchOptions
from policyd.sources.kubernetes_pod_facts import (
    NodeTables,
    node_facts,
    node_listing,
    node_tables,
)


class NodeWatch(ListWatch):
    """Every node, or only `node_name`'s on a node agent (`list_node` with the field selector
    of its name), kept for the source (module docstring)."""

    def __init__(self, core: Any, node_name: str | None = None,
                 **options: Unpack[WatchOptions]) -> None:
        super().__init__(node_listing(core, node_name), self._node, entered=None, left=None,
                         name="node", **options)

    @staticmethod
    def _node(node: Mapping[str, Any]) -> Tracked:
        f = node_facts(node)
        return Tracked(uid=f.uid, container=f.name, node=f.name, item=f)

    def nodes_now(self) -> NodeTables | None:
        """Node name -> allocatable CPU cores, and node name -> labels, as the watch has seen
        them (`list_nodes`' answer); None while it does not keep them (not running, not
        listed yet, the API server lost since)."""
        tracked = self.view()
        return None if tracked is None else node_tables(t.item for t in tracked)
