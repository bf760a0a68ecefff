"""policyd.sources.facts: identity keys and markers read from a series' labels."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from policyd.model import Markers
from policyd.sources import kubernetes
from policyd.sources.facts import key_of, markers

POD = {"namespace": "team-0", "pod": "train-0", "container": "train", "node": "w0"}


@pytest.mark.parametrize(("metric", "labels", "expected"), [
    pytest.param(POD, ("namespace", "pod", "container"), ("team-0", "train-0", "train"),
                 id="three-labels"),
    pytest.param(POD, ("pod",), ("train-0",), id="one-label"),
    pytest.param(POD, (), (), id="no-labels"),
    pytest.param(POD, ("namespace", "missing"), None, id="a-label-missing"),
    pytest.param({**POD, "pod": ""}, ("namespace", "pod"), None, id="a-label-empty"),
    pytest.param({"pod": ""}, ("pod",), None, id="the-one-label-empty"),
    pytest.param(MappingProxyType(POD), ("pod", "node"), ("train-0", "w0"), id="a-mapping"),
])
def test_key_of(metric: dict[str, str], labels: tuple[str, ...],
                expected: tuple[str, ...] | None) -> None:
    assert key_of(metric, labels) == expected


def test_labels_without_a_marker_read_as_no_markers() -> None:
    warnings: list[str] = []
    assert markers(POD, kubernetes(), "container x", warnings) == Markers()
    assert warnings == []


def test_marker_labels_read_as_markers() -> None:
    settings = kubernetes()
    names = settings.marker_labels
    assert names.migrated is not None and names.converged_at is not None
    warnings: list[str] = []
    got = markers({**POD, names.migrated: "True", names.converged_at: "soon"}, settings,
                  "container x", warnings)
    assert got == Markers(migrated=True)
    assert warnings == [f"container x: label {names.converged_at}='soon' is not an epoch "
                        "time; ignored"]
