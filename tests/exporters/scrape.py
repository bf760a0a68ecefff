"""Read what a registry or a /metrics endpoint exposes, as the Prometheus parser sees it."""

from __future__ import annotations

import re
import subprocess
import time
import urllib.request
from typing import IO

from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

Samples = dict[str, list[tuple[dict[str, str], float]]]


def parse(text: str) -> Samples:
    """sample name -> [(labels, value)], for every sample of every family."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def from_registry(registry: CollectorRegistry) -> Samples:
    return parse(generate_latest(registry).decode())


def value(samples: Samples, name: str) -> float:
    (only,) = samples[name]
    return only[1]


def get(url: str) -> str:
    assert url.startswith("http://127.0.0.1:"), url  # tests talk to loopback only
    with urllib.request.urlopen(url, timeout=5) as response:
        body: bytes = response.read()
    return body.decode()


def wait_for_line(stream: IO[str], pattern: str, timeout: float = 60.0) -> re.Match[str]:
    """Read lines from a child's pipe until one matches `pattern` (re.search). The timeout is
    generous: a child that imports torch on a busy 2-core machine takes tens of seconds to
    print its first steps (a wait, not a measurement)."""
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        seen.append(line)
        if m := re.search(pattern, line):
            return m
    raise AssertionError(f"no line matching {pattern!r}; got {seen!r}")


def stop(proc: subprocess.Popen[str]) -> None:
    """Kill the child if it still runs, reap it, close its pipes (no ResourceWarning)."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
