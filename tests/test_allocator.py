"""policyd.allocator: the C allocator keeps freed blocks for reuse, where it is glibc's."""

from __future__ import annotations

import platform
import resource

import numpy as np
import pytest

from policyd.allocator import keep_freed_memory

GLIBC = platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's")
def test_a_freed_array_s_memory_is_reused_without_page_faults() -> None:
    assert keep_freed_memory()
    np.ones(2**20).sum()  # 8 MB, freed: now in the heap
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(5):
        np.ones(2**20).sum()
    assert resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before < 100  # not 5 x 2,048


def test_it_says_whether_it_took_the_settings() -> None:
    assert isinstance(keep_freed_memory(), bool)
