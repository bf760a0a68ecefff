"""cAdvisor payloads read into values, and counters into cores: on the real payloads of
payloads/cadvisor/ (their README says where each comes from)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from policyd.sources.cadvisor_info import (
    cpu_samples,
    machine_cores,
    parse_timestamp,
    read_container,
    read_docker_containers,
)
from policyd.sources.cpu_counter import CounterRings, cores_over_intervals
from tests.sources.cadvisor_server import load

OTEL_ID = "573ee6cd04a6208af809b2329652c74386f1992faca8662c733d7f250014e718"
AGENT_ID = "1d6e5db3abbfbb69718899748a882e2519da5b5d798b4b6bf1ec7dd6b5f26a60"


def agent() -> dict[str, Any]:
    """The dd-agent Docker container of the dd-agent fixture (five real samples)."""
    system, info = load("ddagent_metrics_1.2_trimmed.json")
    assert system["name"] == "/system"
    return dict(info)


@pytest.mark.parametrize(("text", "seconds"), [
    pytest.param("2016-06-17T16:07:48.63605798Z", 1466179668.63605798, id="8-digit-fraction"),
    pytest.param("2019-04-09T22:26:41.984081498Z", 1554848801.984081498, id="nanoseconds"),
    pytest.param("2016-06-03T18:09:19.215272Z", 1464977359.215272, id="microseconds"),
    pytest.param("2016-06-03T20:09:19+02:00", 1464977359.0, id="offset"),
])
def test_timestamps_as_cadvisor_writes_them(text: str, seconds: float) -> None:
    assert parse_timestamp(text) == pytest.approx(seconds, abs=1e-6)


@pytest.mark.parametrize("text", ["yesterday", "2016-06-17 16:07:48Z", "2016-13-17T16:07:48Z"])
def test_unreadable_timestamps_raise(text: str) -> None:
    with pytest.raises(ValueError):
        parse_timestamp(text)


def test_v13_docker_answer_of_a_kubernetes_node() -> None:
    warnings: list[str] = []
    (c,), warnings = read_docker_containers(load("otel_PreInfoContainer.json"), "node w1")
    assert warnings == []
    assert c.name == "k8s_ubuntu_stress-1-core-mh2pn_default_af16b540-4ae2-11e9-977b-0672b6c6fc94_0"
    assert c.container_id == OTEL_ID
    assert c.cgroup == f"/kubepods/besteffort/podaf16b540-4ae2-11e9-977b-0672b6c6fc94/{OTEL_ID}"
    assert c.started_at == pytest.approx(parse_timestamp("2019-03-20T07:35:09.746280405Z"))
    assert (c.shares, c.quota, c.period) == (2.0, None, 100000.0)  # BestEffort: 2 shares
    assert c.labels["io.kubernetes.pod.name"] == "stress-1-core-mh2pn" and len(c.labels) == 12
    assert c.times_seconds.tolist() == [parse_timestamp("2019-04-09T22:26:41.984081498Z")]
    assert c.cpu_seconds.tolist() == [1727429394576983 / 1e9]


def test_subcontainer_entries_without_a_docker_name_are_skipped() -> None:
    system, info = load("ddagent_metrics_1.2_trimmed.json")
    containers, warnings = read_docker_containers(
        {system["name"]: system, info["name"]: info}, "node w1")
    assert [c.name for c in containers] == [info["aliases"][0]]
    assert warnings == ["node w1: container '/system' has no Docker name (aliases); skipped"]
    (c,) = containers
    assert (c.container_id, c.cgroup, c.shares) == (AGENT_ID, f"/{AGENT_ID}", 256.0)
    assert c.times_seconds.size == 5


def test_broken_samples_are_skipped_and_counted() -> None:
    info = agent()
    info["stats"][1]["cpu"]["usage"]["total"] = "lots"
    del info["stats"][2]["timestamp"]
    info["stats"][3]["cpu"] = None
    warnings: list[str] = []
    c = read_container(info["name"], info, "node w1", warnings)
    assert c is not None and c.times_seconds.size == 2
    assert warnings == [f"node w1: container {info['aliases'][0]!r}: 3 stats samples without a "
                        "readable timestamp and cpu.usage.total; skipped"]


def test_entries_that_are_not_container_infos_are_named_and_skipped() -> None:
    payload = {"/junk\n" + "x" * 500: "not an object", **load("otel_PreInfoContainer.json")}
    containers, warnings = read_docker_containers(payload, "node w1")
    assert [c.container_id for c in containers] == [OTEL_ID]
    (warning,) = warnings
    assert warning.startswith("node w1: entry '/junk\\n") and len(warning) < 300


@pytest.mark.parametrize("payload", [[], "{}", None, 3])
def test_an_answer_that_is_not_a_map_of_containers_raises(payload: Any) -> None:
    with pytest.raises(ValueError, match="container name -> ContainerInfo"):
        read_docker_containers(payload, "node w1")


def test_machine_cores() -> None:
    assert machine_cores(load("cadvisor_client_test_machine.json")) == 8.0
    assert machine_cores(load("ddagent_machine_info_1.2.json")) == 2.0
    for bad in ({}, {"num_cores": 0}, {"num_cores": "8"}, [8], None):
        with pytest.raises(ValueError, match="num_cores"):
            machine_cores(bad)


def _rates(times: np.ndarray, totals: np.ndarray) -> np.ndarray:
    return np.diff(totals) / np.diff(times)


def test_cores_per_interval_from_the_real_counter() -> None:
    times, cpu, _ = cpu_samples(agent()["stats"])
    r = _rates(times, cpu)  # cores between consecutive samples: ~0.007 to ~0.021
    now = parse_timestamp("2016-06-17T16:07:10Z")
    bounds = now - 20.0 * np.arange(6, -1, -1)
    got = cores_over_intervals(times, cpu, bounds)
    assert (got.times_seconds - now).tolist() == [-60.0, -40.0, -20.0, 0.0]
    # Samples at 16:05:57.6, 16:06:17.4, 16:06:34.8, 16:06:52.1, 16:07:06.0 (t = -72.4, -52.6,
    # -35.2, -17.9, -4.0 s). (16:05:50, 16:06:10]: the samples begin inside it, so 12.4 s are
    # read, all in the first gap. (16:06:10, 16:06:30]: 7.4 s of the first gap, 12.6 s of the
    # second. (16:06:30, 16:06:50]: 4.8 s of the second, 15.2 s of the third.
    t = times - now
    second = ((t[1] - -60) * r[0] + (-40 - t[1]) * r[1]) / 20
    third = ((t[2] - -40) * r[1] + (-20 - t[2]) * r[2]) / 20
    # (16:06:50, 16:07:10]: the newest sample is at 16:07:06.0: the 16 s covered are read.
    last = ((t[3] - -20) * r[2] + (t[4] - t[3]) * r[3]) / (t[4] - -20)
    assert got.values == pytest.approx([r[0], second, third, last], rel=1e-9)


def test_too_little_coverage_and_counter_drops_give_no_sample() -> None:
    times = np.array([0.0, 10.0, 20.0, 30.0])
    cpu = np.array([0.0, 5.0, 1.0, 6.0])  # restarted between 10 and 20
    got = cores_over_intervals(times, cpu, [-20.0, 0.0, 10.0, 20.0, 30.0, 50.0])
    assert got.times_seconds.tolist() == [10.0, 30.0]
    assert got.values.tolist() == [0.5, 0.5]
    assert len(cores_over_intervals(times[:1], cpu[:1], [0.0, 10.0])) == 0


def test_rings_merge_prune_and_forget() -> None:
    rings = CounterRings(max_samples=4)
    rings.add("a", np.array([1.0, 2.0]), np.array([10.0, 20.0]), keep_after=0.0)
    rings.add("a", np.array([2.0, 3.0, 4.0]), np.array([21.0, 30.0, 40.0]), keep_after=2.5)
    times, values = rings.get("a")
    assert times.tolist() == [2.0, 3.0, 4.0] and values.tolist() == [21.0, 30.0, 40.0]
    rings.add("a", np.array([5.0, 6.0, 7.0]), np.array([50.0, 60.0, 70.0]), keep_after=0.0)
    assert rings.get("a")[0].tolist() == [4.0, 5.0, 6.0, 7.0]  # max_samples
    rings.add("b", np.array([1.0]), np.array([1.0]), keep_after=0.0)
    rings.retain(["b"])
    assert "a" not in rings and "b" in rings
