"""policyd.allocator: the C allocator keeps freed blocks for reuse, where it is glibc's."""

from __future__ import annotations

import ctypes
import platform
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

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


@pytest.mark.skipif(not GLIBC, reason="mallopt is glibc's")
def test_what_a_thread_frees_the_main_thread_reuses(tmp_path: Path) -> None:
    # In a process of its own: the settings are process-wide and taken before threads start.
    script = tmp_path / "arenas.py"
    script.write_text(textwrap.dedent('''
        import ctypes, os, sys, threading
        import numpy as np
        from policyd import allocator
        if sys.argv[1] == "policyd":
            assert allocator.keep_freed_memory()
        else:  # the same thresholds, glibc's own arenas
            mallopt = ctypes.CDLL(None).mallopt
            assert mallopt(-3, allocator.MMAP_THRESHOLD_BYTES)
            assert mallopt(-1, allocator.TRIM_THRESHOLD_BYTES)
        def resident_mib():
            with open("/proc/self/statm") as statm:
                return int(statm.read().split()[1]) * os.sysconf("SC_PAGESIZE") / 2**20
        def work():  # a query thread decoding an answer: 24 MB, freed
            np.ones(3 * 2**20).sum()
        worker = threading.Thread(target=work)
        worker.start()
        worker.join()
        before = resident_mib()
        kept = np.ones(3 * 2**20)  # the main thread's next arrays
        print(resident_mib() - before)
    '''))
    grown_mib = {how: float(subprocess.run([sys.executable, str(script), how], check=True,
                                           capture_output=True, text=True).stdout)
                 for how in ("policyd", "arenas")}
    assert grown_mib["policyd"] < 4  # the 24 MB the thread freed
    assert grown_mib["arenas"] > 20  # kept in the thread's own heap: 24 MB more


def test_a_c_library_without_mallopt_is_left_as_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoMallopt:  # musl's or macOS's libc as ctypes sees it: no such symbol
        def __init__(self, name: object) -> None:
            pass

        def __getattr__(self, name: str) -> object:
            raise AttributeError(name)

    monkeypatch.setattr(ctypes, "CDLL", NoMallopt)
    assert keep_freed_memory() is False
