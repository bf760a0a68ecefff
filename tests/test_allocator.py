"""policyd.allocator: the C allocator keeps freed blocks for reuse, where it is glibc's."""

from __future__ import annotations

import ctypes
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


def test_a_c_library_without_mallopt_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoMallopt:  # musl's or macOS's libc as ctypes sees it: no such symbol
        def __init__(self, name: object) -> None:
            pass

        def __getattr__(self, name: str) -> object:
            raise AttributeError(name)

    monkeypatch.setattr(ctypes, "CDLL", NoMallopt)
    assert keep_freed_memory() is False
