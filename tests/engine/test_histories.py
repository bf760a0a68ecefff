"""The forecast's histories read out of a snapshot: series read at the same times as the loss
(what Prometheus gives for one range and step) are taken sample for sample, and that reading
equals the general one (the last sample at or before each loss sample)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from policyd.engine.snapshot_histories import histories
from policyd.model import Container, Markers, Node, Series, Snapshot

NOW = 1_700_001_000.0


def job(cid: str, node: str, *, rate: float, cores: float, early: bool = False,
        samples: int = 12) -> Container:
    """A job scraped every 5 s; `early`: its steps and CPU series hold one more, earlier
    sample than its loss (so they are not read sample for sample)."""
    t = NOW - 5.0 * np.arange(samples - 1, -1, -1)
    steps = rate * (t - t[0]) + 100.0
    used = cores + 0.1 * np.sin(t)
    if early:
        t_more = np.concatenate(([t[0] - 2.5], t))
        steps_series = Series.of(t_more, np.concatenate(([50.0], steps)))
        cpu_series = Series.of(t_more, np.concatenate(([9.0], used)))
    else:
        steps_series, cpu_series = Series.of(t, steps), Series.of(t, used)
    return Container(id=cid, name=cid, node=node, started_at=float(t[0]) - 60.0,
                     evaluation=Series.of(t, 2.0 * np.exp(-steps / 500.0) + 0.1),
                     cpu_usage=cpu_series, cpu_allocation=0.5, labels={}, markers=Markers(),
                     steps=steps_series, total_steps=None)


def snapshot(*containers: Container) -> Snapshot:
    return Snapshot(time=NOW, nodes=(Node(name="w1", cpu_capacity=2.0),
                                     Node(name="w2", cpu_capacity=4.0)),
                    containers=containers)


FIELDS = ("times_seconds", "losses", "steps", "cores", "busy", "lengths", "allocation_cores",
          "max_cores")


@pytest.mark.parametrize("misaligned", [(), ("b",)], ids=["all-aligned", "one-misaligned"])
def test_reading_sample_for_sample_equals_the_general_reading(misaligned: tuple[str, ...]) -> None:
    specs = [("a", "w1", 3.0, 1.0), ("b", "w1", 5.0, 0.95), ("c", "w2", 2.0, 3.9)]
    aligned = snapshot(*(job(cid, node, rate=r, cores=c, early=cid in misaligned)
                         for cid, node, r, c in specs))
    general = snapshot(*(job(cid, node, rate=r, cores=c, early=True)
                         for cid, node, r, c in specs))
    fast, slow = (histories(s, s.containers) for s in (aligned, general))
    for name in FIELDS:
        np.testing.assert_array_equal(getattr(fast, name), getattr(slow, name), err_msg=name)
    # Each loss sample reads the steps and CPU taken at its own time.
    np.testing.assert_array_equal(fast.steps[0], aligned.containers[0].steps.values[-12:])
    # A node is busy where its containers use at least 90 % of its cores (w1: 2, w2: 4).
    use = {c.id: c.cpu_usage.values[-12:] for c in aligned.containers}
    w1 = (use["a"] + use["b"] >= 0.9 * 2.0).astype(float)
    w2 = (use["c"] >= 0.9 * 4.0).astype(float)
    np.testing.assert_array_equal(fast.busy, np.stack([w1, w1, w2]))
    assert 0 < w1.sum() < 12  # both readings occur


# The reading, one container and one sample at a time: what `histories` computes for all of
# them at once, written the plain way (module docstring of policyd.engine.snapshot_histories).

def held_at(series: Series, at: float) -> tuple[float, float]:
    """(value, time) of the last sample of `series` at or before `at`; NaN, NaN if none."""
    index = int(np.searchsorted(series.times_seconds, at, side="right")) - 1
    if index < 0:
        return np.nan, np.nan
    return float(series.values[index]), float(series.times_seconds[index])


def node_use(s: Snapshot, node: str, at: float) -> float:
    """The cores the node's containers used in the samples they took at exactly `at`."""
    use = 0.0
    for c in s.containers:
        if c.node == node:
            for t, v in zip(c.cpu_usage.times_seconds, c.cpu_usage.values, strict=True):
                if t == at:
                    use += float(np.nan_to_num(v))
    return use


def one_by_one(s: Snapshot, chosen: list[Container]) -> dict[str, np.ndarray]:
    capacity = {n.name: n.cpu_capacity for n in s.nodes}
    width = max((len(c.evaluation) for c in chosen), default=0)
    out = {name: np.full((len(chosen), width), np.nan)
           for name in ("times_seconds", "losses", "steps", "cores", "busy")}
    for i, c in enumerate(chosen):
        for k, t in enumerate(c.evaluation.times_seconds):
            out["times_seconds"][i, k] = t
            out["losses"][i, k] = c.evaluation.values[k]
            out["steps"][i, k] = held_at(c.steps, t)[0]
            out["cores"][i, k], read_at = held_at(c.cpu_usage, t)
            if not np.isnan(read_at):
                out["busy"][i, k] = float(node_use(s, c.node, read_at)
                                          >= 0.9 * capacity[c.node])
    out["lengths"] = np.array([len(c.evaluation) for c in chosen], dtype=float)
    out["max_cores"] = np.array([capacity[c.node] for c in chosen])
    out["allocation_cores"] = out["max_cores"] * [c.cpu_allocation for c in chosen]
    out["total_steps"] = np.array([np.nan if c.total_steps is None else c.total_steps
                                   for c in chosen])
    return out


def series(times: list[float], values: list[float]) -> Series:
    return Series.of(np.asarray(times) + NOW, values)


def container(cid: str, node: str = "w1", *, loss: Series, steps: Series | None = None,
              cpu: Series | None = None, total: float | None = None) -> Container:
    return Container(id=cid, name=cid, node=node, started_at=NOW - 100.0, evaluation=loss,
                     cpu_usage=loss if cpu is None else cpu, cpu_allocation=0.5,
                     steps=loss if steps is None else steps, total_steps=total)


LOSS = series([0, 5, 10, 15], [2.0, 1.5, 1.2, 1.1])
ODD = {
    "NaN and Inf values": [
        container("a", loss=series([0, 5, 10], [2.0, np.nan, 1.0]),
                  steps=series([0, 5, 10], [1, np.nan, 30]),
                  cpu=series([0, 5, 10], [1.9, np.inf, np.nan])),
        container("b", loss=LOSS, cpu=series([0, 5, 10, 15], [np.nan, 0.2, 0.1, 1.0]))],
    "empty series": [
        container("a", loss=Series.empty(), steps=series([0], [1]), cpu=Series.empty()),
        container("b", loss=LOSS, steps=Series.empty(), cpu=Series.empty()),
        container("c", loss=Series.empty(), steps=Series.empty(), cpu=Series.empty())],
    "one sample": [container("a", loss=series([5], [1.0]), steps=series([5], [10]),
                             cpu=series([5], [1.9]))],
    "misaligned": [
        container("a", loss=LOSS, steps=series([-3, 2, 7, 12, 17], [0, 5, 10, 15, 20]),
                  cpu=series([1, 15, 16], [0.5, 1.9, 0.1]), total=100.0),
        container("b", loss=series([1, 6, 11], [3.0, 2.0, 1.0]),
                  cpu=series([1, 6, 11, 15], [1.5, 0.1, 1.9, 0.2])),
        container("c", "w2", loss=LOSS, cpu=series([0, 15], [3.7, 3.6]))],
    "aligned, one node busy at some samples": [
        container("a", loss=LOSS, cpu=series([0, 5, 10, 15], [1.0, 1.5, 0.2, 0.9])),
        container("b", loss=LOSS, cpu=series([0, 5, 10, 15], [0.9, 0.2, 0.2, 0.9])),
        container("c", "w2", loss=LOSS, cpu=series([0, 5, 10, 15], [3.6, 3.5, 4.0, 0.0]))],
}


@pytest.mark.parametrize("containers", list(ODD.values()), ids=list(ODD))
@pytest.mark.parametrize("pick", ["all", "reversed", "first-left-out"])
def test_histories_read_every_container_as_one_by_one(containers: list[Container],
                                                      pick: str) -> None:
    s = snapshot(*containers)
    chosen = {"all": list(s.containers), "reversed": list(reversed(s.containers)),
              "first-left-out": list(s.containers[1:])}[pick]
    packed, plain = histories(s, chosen), one_by_one(s, chosen)
    for name, expected in plain.items():
        np.testing.assert_array_equal(getattr(packed, name), expected, err_msg=name)


def test_a_container_left_out_still_loads_its_node() -> None:
    idle = container("a", loss=LOSS, cpu=series([0, 5, 10, 15], [0.1, 0.1, 0.1, 0.1]))
    hungry = container("b", loss=LOSS, cpu=series([0, 5, 10, 15], [1.9, 0.1, 1.9, 0.1]))
    s = snapshot(idle, hungry)
    np.testing.assert_array_equal(histories(s, [idle]).busy, [[1.0, 0.0, 1.0, 0.0]])


def test_a_container_not_in_the_snapshot_is_refused() -> None:
    s = snapshot(container("a", loss=LOSS))
    with pytest.raises(ValueError, match="'b' is not one of the snapshot's"):
        histories(s, [container("b", loss=LOSS)])


@st.composite
def odd_snapshots(draw: st.DrawFn) -> tuple[Snapshot, list[Container]]:
    """A few containers on two nodes, each series on its own subset of a shared time grid (so
    some samples coincide across series and containers, some do not), with NaN and Inf."""
    value = st.one_of(st.floats(0.0, 5.0), st.sampled_from([np.nan, np.inf]))

    def drawn() -> Series:
        times = sorted(draw(st.sets(st.integers(0, 12), max_size=8)))
        return series([5.0 * t for t in times], [draw(value) for _ in times])

    made = [container(f"c{i}", draw(st.sampled_from(["w1", "w2"])), loss=drawn(),
                      steps=drawn(), cpu=drawn())
            for i in range(draw(st.integers(1, 5)))]
    s = snapshot(*made)
    chosen = draw(st.permutations(list(s.containers)))
    return s, chosen[:draw(st.integers(0, len(chosen)))]


@hypothesis_settings(max_examples=200, deadline=None)
@given(odd_snapshots())
def test_any_snapshot_is_read_as_one_by_one(case: tuple[Snapshot, list[Container]]) -> None:
    s, chosen = case
    packed, plain = histories(s, chosen), one_by_one(s, chosen)
    for name, expected in plain.items():
        np.testing.assert_array_equal(getattr(packed, name), expected, err_msg=name)
