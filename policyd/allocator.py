"""The C allocator told to keep the memory a tick frees, for the tick's next arrays.

Why. A 10,000-container decide() works through hundreds of numpy arrays of a few megabytes
each (one float per container and sample is ~5 MB), each freed within milliseconds. glibc
serves blocks that large with mmap and gives them back to the kernel when freed, so every new
one is fresh pages the kernel faults in and zeroes one by one: ~26,000 page faults and ~0.06 s
of system time in one FlowCon decide at 10,000 containers, and the memory traffic with them
(benchmarks/README.md, twentieth session: decide 5-19 % faster with these settings). With a
higher mmap threshold and trim threshold the freed blocks stay in the heap and the next arrays
reuse them: no faults, for a heap that stays at its peak (a few MB more at 10,000 containers).

One heap for every thread (`ARENAS`). glibc gives each thread that allocates while another
holds the heap's lock an arena of its own, and each arena keeps its freed memory as above: the
threads that read a cycle's answers when several queries are out at once (`prometheus.
max_concurrent_queries`, `policyd.sources.query_pool`) kept ~70 MiB more between them at
10,000 containers (358 against 286 MiB peak), in heaps that only their own next allocations
reuse. The Python threads take turns under the interpreter's lock anyway, so they have little
to gain from heaps of their own: with one, the memory a query thread frees is the next
decision's.

glibc only (`mallopt`); with another C library (musl, macOS) nothing changes. It is
process-wide, so the daemon (`policyd run`) sets it once at its start; the engine, which stays
pure, never does. A one-shot `policyd plan` gains nothing: its one decision is the one that
grows the heap (in a process that decides again, the second decide at 10,000 containers:
0.68 s and 11,000 page faults with glibc's settings, 0.45 s and none with these).
"""

from __future__ import annotations

import ctypes

MMAP_THRESHOLD_BYTES = 32 * 2**20
"""Blocks up to this size come from the heap, and return to it when freed: glibc's largest
threshold on 64-bit machines (its own adjustment stops there too)."""
TRIM_THRESHOLD_BYTES = 512 * 2**20
"""The free memory the heap keeps at its top before it gives any back to the kernel."""

ARENAS = 1
"""The heaps glibc may keep for the process's threads (`M_ARENA_MAX`; its default is eight per
core): one, shared, so that what one thread frees another reuses (module docstring)."""

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8  # glibc's malloc.h


def keep_freed_memory() -> bool:
    """Have the allocator keep freed blocks for reuse, in one heap for every thread (module
    docstring); whether it took the settings (False where the C library has no `mallopt`, or
    refused them). Call it before the process starts threads: an arena made before stays."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the process's own C library
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return all([mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES),
                mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES),
                mallopt(_M_ARENA_MAX, ARENAS)])
