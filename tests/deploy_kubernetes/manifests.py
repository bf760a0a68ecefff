"""deploy/kubernetes as data: the kustomization rendered by the real kubectl, and the example.

kubectl (with its built-in kustomize) is a requirement of these tests, like promtool is of the
alert-rule tests: missing is a failure, not a skip (scripts/install-test-deps installs it).
The rendering is done once per test session.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "kubernetes"
EXAMPLE_JOB = DEPLOY / "examples" / "training-job.yaml"
RULES_FILE = ROOT / "deploy" / "prometheus" / "policyd-rules.yml"

Manifest = dict[str, Any]


def tool(name: str) -> str:
    """The path of a required command-line tool; an assertion failure if it is missing."""
    binary = shutil.which(name)
    assert binary is not None, f"{name} is missing: run scripts/install-test-deps as root"
    return binary


@functools.cache
def _render() -> tuple[Manifest, ...]:
    result = subprocess.run([tool("kubectl"), "kustomize", str(DEPLOY)], capture_output=True,
                            text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc is not None)


def rendered() -> list[Manifest]:
    """Every object `kubectl kustomize deploy/kubernetes` renders, in its order."""
    return list(_render())


def example() -> list[Manifest]:
    """The objects of examples/training-job.yaml."""
    return [doc for doc in yaml.safe_load_all(EXAMPLE_JOB.read_text()) if doc is not None]


def one(docs: list[Manifest], kind: str, name: str | None = None) -> Manifest:
    """The single object of `kind` (and `name`) among `docs`."""
    found = [d for d in docs if d["kind"] == kind
             and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def config_map_data(name: str) -> dict[str, str]:
    """The data of the rendered ConfigMap whose name is `name` (plus kustomize's hash)."""
    found = [d for d in rendered() if d["kind"] == "ConfigMap"
             and (d["metadata"]["name"] == name or d["metadata"]["name"].startswith(name + "-"))]
    assert len(found) == 1, f"expected one ConfigMap {name}, found {len(found)}"
    data: dict[str, str] = found[0]["data"]
    return data


def pod_templates(docs: list[Manifest]) -> Iterator[tuple[str, Manifest]]:
    """(`Kind/name`, pod spec) of every workload among `docs`."""
    for doc in docs:
        if doc["kind"] in {"Deployment", "DaemonSet", "StatefulSet", "Job"}:
            yield f"{doc['kind']}/{doc['metadata']['name']}", doc["spec"]["template"]["spec"]
        elif doc["kind"] == "CronJob":
            yield (f"CronJob/{doc['metadata']['name']}",
                   doc["spec"]["jobTemplate"]["spec"]["template"]["spec"])
        elif doc["kind"] == "Pod":
            yield f"Pod/{doc['metadata']['name']}", doc["spec"]
