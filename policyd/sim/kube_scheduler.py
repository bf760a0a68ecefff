"""Where the Kubernetes default scheduler puts a training pod: its default scoring, modelled.

The thesis's pods ask for no CPU or memory, so filtering lets every node through and scoring
decides. What it does with such a pod (the reading, with the sources it rests on, is in
docs/design.md, "The default-scheduler baseline"):

* Requests: a container that requests nothing counts, in scoring only, as the non-zero default
  of 100 millicores and 200 MiB; the node's requested figures are the sums of its pods'
  non-zero requests.
* NodeResourcesFit, LeastAllocated (weight 1): per resource (CPU and memory, weight 1 each)
  `(allocatable - requested) * 100 // allocatable` (0 when requested exceeds it), requested
  including the pod being placed; the node's score is the weighted mean, in whole numbers.
* NodeResourcesBalancedAllocation (weight 1): with fractions f = requested / allocatable (at most
  1) of CPU and memory, `int((1 - |f_cpu - f_mem| / 2) * 100)`.
* ImageLocality (weight 1): when the node has the pod's image, its size scaled by the share of
  nodes that have it, `size * nodes_with_image / nodes`, clamped to [23 MiB, 1000 MiB] (one
  container) and mapped to 0..100: `100 * (sum - 23 MiB) // (1000 MiB - 23 MiB)`. A node has an
  image once a pod with it ran there (the kubelet keeps pulled images).
* The other scoring plugins of the default profile (TaintToleration, NodeAffinity,
  PodTopologySpread, InterPodAffinity) give every node the same score for pods without taints,
  affinities or spreading constraints (a Job's pods are not selected by the system default
  spreading), so they never change the order and are left out.
* Among the nodes with the highest total, one is chosen at random (kube-scheduler samples the
  tied nodes uniformly): here from the world's seeded generator, so a run is repeatable.

The module owns this arithmetic and nothing else: the world says which pods each node holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from policyd.sim.types import NodeSpec

MIB = 1024 * 1024
MAX_NODE_SCORE = 100
DEFAULT_CPU_REQUEST_MILLICORES = 100
DEFAULT_MEMORY_REQUEST_BYTES = 200 * MIB
IMAGE_MIN_BYTES = 23 * MIB
IMAGE_MAX_BYTES_PER_CONTAINER = 1000 * MIB
IMAGE_BYTES = 1500 * MIB
"""The size a node reports for a training image (every job's; a CPU PyTorch or TensorFlow
image with its dataset is 1-2 GB unpacked): above the 1000 MiB ceiling, so the image score is
set by how many nodes already have it."""
WEIGHTS = {"fit": 1, "balanced": 1, "image": 1}
"""The default profile's weights of the three scores that differ between nodes here."""


def fit_score(node: NodeSpec, pods: int) -> int:
    """LeastAllocated for one more pod on a node that holds `pods` pods."""
    cpu = _least(int(node.cores * 1000), (pods + 1) * DEFAULT_CPU_REQUEST_MILLICORES)
    memory = _least(node.memory_bytes, (pods + 1) * DEFAULT_MEMORY_REQUEST_BYTES)
    return (cpu + memory) // 2


def _least(allocatable: int, requested: int) -> int:
    if allocatable <= 0 or requested > allocatable:
        return 0
    return (allocatable - requested) * MAX_NODE_SCORE // allocatable


def balanced_score(node: NodeSpec, pods: int) -> int:
    """BalancedAllocation for one more pod on a node that holds `pods` pods."""
    cpu = min((pods + 1) * DEFAULT_CPU_REQUEST_MILLICORES / (node.cores * 1000), 1.0)
    memory = min((pods + 1) * DEFAULT_MEMORY_REQUEST_BYTES / node.memory_bytes, 1.0)
    return int((1 - abs(cpu - memory) / 2) * MAX_NODE_SCORE)


def image_score(has_image: bool, nodes_with_image: int, nodes: int) -> int:
    """ImageLocality for a one-container pod whose image `nodes_with_image` of `nodes` have."""
    total = int(IMAGE_BYTES * nodes_with_image / nodes) if has_image else 0
    total = min(max(total, IMAGE_MIN_BYTES), IMAGE_MAX_BYTES_PER_CONTAINER)
    return (MAX_NODE_SCORE * (total - IMAGE_MIN_BYTES)
            // (IMAGE_MAX_BYTES_PER_CONTAINER - IMAGE_MIN_BYTES))


def scores(nodes: Sequence[NodeSpec], pods: Mapping[str, int], image: str,
           images: Mapping[str, set[str]]) -> dict[str, int]:
    """Every node's total score for a pod of `image`; `pods` per node, `images` the images
    each node has."""
    spread = sum(1 for n in nodes if image in images.get(n.name, set()))
    return {n.name: (WEIGHTS["fit"] * fit_score(n, pods.get(n.name, 0))
                     + WEIGHTS["balanced"] * balanced_score(n, pods.get(n.name, 0))
                     + WEIGHTS["image"] * image_score(image in images.get(n.name, set()),
                                                      spread, len(nodes)))
            for n in nodes}


def choose(nodes: Sequence[NodeSpec], pods: Mapping[str, int], image: str,
           images: Mapping[str, set[str]], rng: np.random.Generator) -> str:
    """The node the default scheduler binds the pod to: a highest score, ties at random."""
    totals = scores(nodes, pods, image, images)
    best = max(totals.values())
    tied = sorted(name for name, score in totals.items() if score == best)
    return tied[int(rng.integers(len(tied)))] if len(tied) > 1 else tied[0]
