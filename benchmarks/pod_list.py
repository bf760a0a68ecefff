"""What the Kubernetes source's pod list cost each cycle, against reading the pod watch's view
(issue 18; benchmarks/README.md, "pod_list.py").

    .venv/bin/python benchmarks/pod_list.py [--pods 1000 10000 100000] [--repeat 3]

Per size: a PodList of N copies of the recorded running pod (tests/kubernetes/recorded/
pod_get.json, each renamed and given its own uid), as the API server sends it; timed in CPU
seconds (median of `--repeat`): what a cycle did with it, decoding it (orjson, as the client
does) and reading every pod into `PodFacts` (`pod_facts`); and what a cycle does now, taking the
running pods from a `PodWatch` whose view holds the same N pods (`running_now`). The API
server's own work to serve the list, and the transfer, are not counted.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import sys
from pathlib import Path
from typing import Any

import orjson
import repository  # noqa: F401  (the repository on sys.path, after PYTHONPATH's trees)

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import host_speed_text, median_cpu_seconds

from policyd.sources.kubernetes_list_watch import Tracked
from policyd.sources.kubernetes_pod_facts import pod_facts
from policyd.sources.kubernetes_pod_watch import PodWatch

RECORDED = Path(__file__).resolve().parents[1] / "tests/kubernetes/recorded/pod_get.json"


class Scope:
    namespaces: tuple[str, ...] = ()
    label_selector = ""
    container_name: str | None = None
    node_name: str | None = None


class NoApi:
    """The watch's view is filled by hand: no call is made."""

    def list_pod_for_all_namespaces(self, **kwargs: Any) -> Any:
        raise AssertionError("not listed")

    def list_namespaced_pod(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not listed")


def pod_list(pods: int) -> bytes:
    recorded = json.loads(RECORDED.read_text())["response"]
    items = []
    for i in range(pods):
        pod = copy.deepcopy(recorded)
        pod["metadata"]["name"], pod["metadata"]["uid"] = f"train-{i}", f"uid-{i}"
        items.append(pod)
    return orjson.dumps({"kind": "PodList", "metadata": {"resourceVersion": "1"},
                         "items": items})


def listed(body: bytes) -> int:
    running = [f for f in (pod_facts(p, None) for p in orjson.loads(body)["items"])
               if f is not None and f.running]
    return len(running)


def viewed(body: bytes) -> PodWatch:
    watch = PodWatch(NoApi(), Scope())
    found = [pod_facts(p, None) for p in orjson.loads(body)["items"]]
    watch._known = {f.uid: Tracked(uid=f.uid, container=f.id, node=f.node, item=f)
                    for f in found if f is not None and f.running}
    watch._current = True
    return watch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(host_speed_text(), flush=True)
    print(f"{'pods':>8} {'list':>9} {'list: decode + facts':>21} {'view':>10}", flush=True)
    for pods in args.pods:
        body = pod_list(pods)
        listing = median_cpu_seconds(functools.partial(listed, body), args.repeat, collect=True)
        watch = viewed(body)
        view = median_cpu_seconds(watch.running_now, args.repeat, collect=True)
        assert len(watch.running_now() or ()) == listed(body) == pods
        print(f"{pods:>8,} {len(body) / 1e6:>7.1f}MB {listing:>19.3f}s {view:>9.4f}s",
              flush=True)


if __name__ == "__main__":
    main()
