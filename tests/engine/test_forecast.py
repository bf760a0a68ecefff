"""The forecast: known answers on synthetic jobs, a note (never an exception) for every job it
cannot judge, determinism, and one batch equal to one container at a time."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from policyd.engine.forecast import forecast
from policyd.engine.forecast_input import Histories, History, Settings
from policyd.engine.forecasting import Forecasted
from policyd.engine.speed import PRIOR_PARALLEL_FRACTION
from tests.engine.forecast_builders import NOW, curve_history, family, replaced, settings


def one(h: History, **kw: object):
    result = forecast(Histories.of([h]), settings(**kw))  # type: ignore[arg-type]
    return result.at(0), result.notes[0]


def test_total_known_remaining_is_exact() -> None:
    h = curve_history(total_steps=5000.0)  # 39 intervals of 10 s at 2 steps/s: 780 done
    f, note = one(h)
    assert note == "" and f is not None
    assert f.steps_done == 780.0
    assert f.remaining_steps == 4220.0
    assert f.remaining_seconds == pytest.approx(4220 * 0.5)
    assert f.finish_at == pytest.approx(NOW + 4220 * 0.5)
    assert f.low_seconds < f.remaining_seconds < f.high_seconds
    assert f.basis == "total steps"
    assert f.steps_per_second == pytest.approx(2.0)


def test_finish_counts_from_the_last_sample() -> None:
    f, _ = one(curve_history(total_steps=5000.0), now=NOW + 100.0)
    assert f is not None
    assert f.finish_at == pytest.approx(NOW + 2110.0)
    assert f.remaining_seconds == pytest.approx(2010.0)


def test_any_allocation_follows_the_speed_model() -> None:
    # One allocation only (1 core): the prior p = 0.5 says 2 cores are 4/3 as fast.
    f, _ = one(curve_history(total_steps=5000.0))
    assert f is not None
    assert f.parallel_fraction == pytest.approx(PRIOR_PARALLEL_FRACTION)
    assert f.remaining_seconds_at(1.0) == pytest.approx(f.remaining_seconds)
    assert f.remaining_seconds_at(2.0) == pytest.approx(f.remaining_seconds * 0.75)
    assert f.remaining_seconds_at(0.5) == pytest.approx(f.remaining_seconds * 2)
    assert f.remaining_seconds_at(8.0) == f.remaining_seconds_at(2.0)  # node maximum: 2 cores


def test_batch_remaining_at_any_allocation() -> None:
    batch = forecast(Histories.of([curve_history(total_steps=5000.0)] * 2), settings())
    grid = batch.remaining_seconds_at(np.array([[1.0, 2.0], [0.5, 1.0]]))
    assert grid[0] == pytest.approx([2110.0, 2110.0 * 0.75])
    assert grid[1] == pytest.approx([4220.0, 2110.0])


def brute_convergence(*, a: float, c: float, tau: float, gamma: float, per_interval: float,
                      alpha: float) -> float:
    """The first step at which the raw family's relative gain over one interval < alpha."""
    x = np.arange(per_interval, 1e6)
    before, now = family(x - per_interval, a=a, c=c, tau=tau, gamma=gamma), \
        family(x, a=a, c=c, tau=tau, gamma=gamma)
    return float(x[np.argmax((before - now) / before < alpha)])


@pytest.mark.parametrize(("params", "alpha"), [
    pytest.param(dict(a=2.0, c=0.5, tau=60.0, gamma=0.8), 0.02, id="twice-the-data"),
    pytest.param(dict(a=2.0, c=0.5, tau=60.0, gamma=0.8), 0.01, id="three-times-the-data"),
    pytest.param(dict(a=1.0, c=0.2, tau=200.0, gamma=1.5), 0.02, id="steeper"),
    pytest.param(dict(a=2.0, c=0.3, tau=100.0, gamma=0.6), 0.02, id="flatter"),
])
def test_total_unknown_turns_converged_where_the_curve_says(
        params: dict[str, float], alpha: float) -> None:
    # Raw losses (window 1), 2 steps/s, 20 s interval = 40 steps; 16 samples up to step 300.
    h = curve_history(samples=16, window=1, **params)
    truth = brute_convergence(**params, per_interval=40.0, alpha=alpha)
    f, note = one(h, alpha=alpha)
    assert note == "" and f is not None
    assert f.total_steps is None and f.basis.startswith("convergence")
    # Read off a curve fitted to 300 steps, 2-3x beyond them: within 10 % (c and gamma trade
    # off a little even without noise).
    assert f.steps_done + f.remaining_steps == pytest.approx(truth, rel=0.10)
    assert f.low_seconds <= f.remaining_seconds <= f.high_seconds
    assert f.low_seconds <= (truth - f.steps_done) * 0.5 <= f.high_seconds


def test_already_converged_needs_nothing() -> None:
    h = curve_history(samples=60, tau=5.0, gamma=2.0)  # flat long before step 1180
    f, _ = one(h, alpha=0.05)
    assert f is not None
    assert f.remaining_steps == 0.0 and f.remaining_seconds == 0.0


def test_constant_loss_is_converged() -> None:
    h = curve_history()
    f, note = one(replaced(h, losses=np.full(h.samples, 0.7)))
    assert note == "" and f is not None
    assert f.remaining_steps == 0.0


def test_target_eta_matches_the_family() -> None:
    params = dict(a=2.0, c=0.5, tau=60.0, gamma=0.8)
    h = curve_history(samples=16, window=1, target_loss=0.8, **params)
    f, _ = one(h)
    assert f is not None and f.target_loss == 0.8
    # c + a (1 + x / tau) ** -gamma = 0.8  <=>  x = tau ((a / 0.3) ** (1 / gamma) - 1)
    x = 60.0 * ((2.0 / 0.3) ** (1 / 0.8) - 1)
    assert f.target_eta_seconds == pytest.approx((x - f.steps_done) * 0.5, rel=0.05)


@pytest.mark.parametrize(("target", "eta", "remark"), [
    pytest.param(5.0, 0.0, "", id="already-reached"),
    pytest.param(0.1, None, "not reached by the fitted curve", id="below-the-floor"),
])
def test_target_edges(target: float, eta: float | None, remark: str) -> None:
    f, _ = one(curve_history(samples=60, window=1, target_loss=target))
    assert f is not None
    assert f.target_eta_seconds == eta
    assert remark in f.note


def nan_at(h: History, field: str, index: int, value: float) -> History:
    values = np.array(getattr(h, field), dtype=np.float64)
    values[index] = value
    return replaced(h, **{field: values})


BASE = curve_history()
BAD = [
    pytest.param(nan_at(BASE, "losses", 5, np.nan), "the loss is nan", id="nan-loss"),
    pytest.param(nan_at(BASE, "losses", 7, np.inf), "the loss is inf", id="inf-loss"),
    pytest.param(nan_at(BASE, "steps", 3, np.nan), "steps done is nan", id="nan-steps"),
    pytest.param(nan_at(BASE, "times_seconds", 3, np.inf), "sample time 3 is inf",
                 id="inf-time"),
    pytest.param(nan_at(BASE, "steps", 10, 1.0), "steps done went back", id="steps-back"),
    pytest.param(nan_at(BASE, "times_seconds", 10, NOW - 1e6), "do not increase",
                 id="time-back"),
    pytest.param(nan_at(BASE, "losses", 2, -1.0), "needs a positive loss", id="negative"),
    pytest.param(replaced(BASE, times_seconds=BASE.times_seconds[:1], losses=BASE.losses[:1],
                          steps=BASE.steps[:1], cores=BASE.cores[:1]),
                 "too few samples: 1", id="one-sample"),
    pytest.param(replaced(BASE, times_seconds=np.empty(0), losses=np.empty(0),
                          steps=np.empty(0), cores=np.empty(0)),
                 "too few samples: 0", id="no-samples"),
    pytest.param(replaced(BASE, times_seconds=BASE.times_seconds[:4], losses=BASE.losses[:4],
                          steps=BASE.steps[:4], cores=BASE.cores[:4]),
                 "too few samples to fit the loss curve: 4", id="four-samples"),
    pytest.param(replaced(BASE, steps=np.zeros(BASE.samples)), "no progress to measure",
                 id="no-steps"),
    pytest.param(replaced(BASE, cores=np.full(BASE.samples, np.nan)), "no progress to measure",
                 id="no-cpu-figures"),
    pytest.param(replaced(BASE, allocation_cores=0.0), "allocation is 0 cores", id="no-cpu"),
    pytest.param(replaced(BASE, losses=np.linspace(0.5, 2.0, BASE.samples)),
                 "the loss does not decrease", id="rising-loss"),
]


@pytest.mark.parametrize(("history", "words"), BAD)
def test_what_cannot_be_judged_gets_a_note(history: History, words: str) -> None:
    f, note = one(history)
    assert f is None
    assert words in note


def test_maximize_is_not_read() -> None:
    f, note = one(BASE, direction="maximize")
    assert f is None and "minimize" in note


def test_total_steps_need_no_curve() -> None:
    short = replaced(BASE, times_seconds=BASE.times_seconds[:3], losses=BASE.losses[:3],
                     steps=BASE.steps[:3], cores=BASE.cores[:3], total_steps=1000.0)
    f, note = one(short)
    assert note == "" and f is not None
    assert f.remaining_steps == 1000.0 - 40.0


def test_a_bad_container_spoils_no_other() -> None:
    batch = forecast(Histories.of([nan_at(BASE, "losses", 5, np.nan), BASE]), settings())
    assert batch.at(0) is None and batch.at(1) is not None
    assert batch.at(1) == one(BASE)[0]


def test_deterministic() -> None:
    histories = Histories.of([BASE, curve_history(total_steps=3000.0, target_loss=0.9)])
    first, second = forecast(histories, settings()), forecast(histories, settings())
    assert [first.at(i) for i in range(2)] == [second.at(i) for i in range(2)]


def test_empty() -> None:
    result = forecast(Histories.of([]), settings())
    assert result.notes == () and result.remaining_seconds.size == 0


MIXED = [
    BASE,
    curve_history(total_steps=4000.0),
    curve_history(samples=80, tau=300.0, gamma=1.4, window=1, target_loss=0.9),
    curve_history(samples=12, cores=[1.0] * 6 + [2.0] * 6, allocation=2.0),
    nan_at(BASE, "losses", 3, np.inf),
    replaced(BASE, times_seconds=BASE.times_seconds[:4], losses=BASE.losses[:4],
             steps=BASE.steps[:4], cores=BASE.cores[:4]),
    curve_history(samples=25, seconds_per_step=0.05, a=40.0, c=20.0, tau=5.0, gamma=0.5),
]


def test_a_batch_equals_one_container_at_a_time() -> None:
    batch = forecast(Histories.of(MIXED), settings())
    for i, h in enumerate(MIXED):
        alone, note = one(h)
        assert batch.notes[i] == note
        together = batch.at(i)
        if alone is None:
            assert together is None
            continue
        assert together is not None
        # Equal up to rounding: numpy may sum a batch of rows in another order than one row.
        for name in ("steps_done", "remaining_steps", "remaining_seconds", "finish_at",
                     "low_seconds", "high_seconds", "steps_per_second"):
            assert getattr(together, name) == pytest.approx(getattr(alone, name), rel=1e-6)
        assert together.note == alone.note


def test_history_rejects_misaligned_arrays() -> None:
    with pytest.raises(ValueError, match="aligned"):
        replaced(BASE, steps=BASE.steps[:-1])


ODD_CORES = st.sampled_from([math.nan, math.inf, -0.5, 0.0, 1e-9, 1e-6, 1e-3, 0.1, 0.5, 1.0,
                             1.9, 50.0])


@st.composite
def odd_histories(draw: st.DrawFn) -> tuple[History, Settings]:
    """Short histories with the CPU figures sources really produce around restarts and
    counter resets (NaN, infinite, negative, zero, next to nothing), steps that stall."""
    k = draw(st.integers(2, 8))
    gaps = draw(st.lists(st.sampled_from([1.0, 5.0, 15.0, 30.0]), min_size=k, max_size=k))
    times = NOW - 300.0 + np.cumsum(gaps)
    made = draw(st.lists(st.sampled_from([0.0, 1.0, 50.0, 1000.0]), min_size=k, max_size=k))
    steps = draw(st.sampled_from([0.0, 100.0, 5000.0])) + np.cumsum(made)
    losses = 0.1 + 2.0 * np.exp(-steps / draw(st.sampled_from([100.0, 5000.0, 1e6])))
    cores = np.array(draw(st.lists(ODD_CORES, min_size=k, max_size=k)))
    busy = np.array(draw(st.lists(st.sampled_from([math.nan, 0.0, 1.0]), min_size=k,
                                  max_size=k)))
    total = draw(st.sampled_from([None, float(steps[-1]), float(steps[-1]) + 10.0,
                                  3.0 * float(steps[-1]) + 1.0]))
    history = History(times_seconds=times, losses=losses, steps=steps, cores=cores,
                      allocation_cores=draw(st.sampled_from([1e-9, 0.1, 1.0, 8.0])),
                      max_cores=draw(st.sampled_from([1e-6, 0.5, 2.0])), total_steps=total,
                      target_loss=draw(st.sampled_from([None, 0.05, 1.0])), busy=busy)
    later = draw(st.sampled_from([0.0, 3.0, 20.0]))
    return history, Settings(now_seconds=float(times[-1]) + later, alpha=0.05,
                             interval_seconds=20.0, improvement=True)


@hypothesis_settings(max_examples=300, deadline=None)
@given(odd_histories())
def test_a_forecast_is_numbers_or_a_note_never_an_exception(case: tuple[History, Settings]
                                                            ) -> None:
    history, s = case
    result = forecast(Histories.of([history]), s)
    # What a decision reports: a JobForecast checks that each value is a finite number.
    (job,) = Forecasted(ids=("c",), forecasts=result, notes={}).jobs().values()
    assert (job is None) == bool(result.notes[0])
