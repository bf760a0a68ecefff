"""QoE's sharing of one worker: the smallest needs met first beside every floor, incumbents
kept unless giving one up lets two more in, the chosen jobs topped up towards what they want
only when there is room, what is left to the free and (hard limits) the left-out jobs."""

from __future__ import annotations

import math

import pytest

from policyd.engine.qoe_allocation import Claim, share


def claims(*needs: float | None, incumbent: tuple[str, ...] = (), cap: float = 8.0) -> list[Claim]:
    return [Claim(key=f"j{i}", need=n, cap=cap, incumbent=f"j{i}" in incumbent)
            for i, n in enumerate(needs)]


@pytest.mark.parametrize(("needs", "incumbent", "selected"), [
    pytest.param((1.0, 2.0, 3.0, 5.0), (), (True, True, True, False), id="smallest-first"),
    pytest.param((5.0, 3.0, 2.0, 1.0), (), (False, True, True, True), id="order-free"),
    pytest.param((math.inf, 1.5, 1.5, None), (), (False, True, True, False),
                 id="infeasible-and-free-never-selected"),
    # Only one fits: the incumbent stays although the newcomer needs a little less.
    pytest.param((3.0, 2.9), ("j0",), (True, False), id="incumbent-kept"),
    pytest.param((3.0, 2.9), (), (False, True), id="no-incumbent-smaller-wins"),
    # Giving up the incumbent lets two in: the count goes up, so it is given up.
    pytest.param((3.5, 1.5, 1.5), ("j0",), (False, True, True), id="incumbent-given-up-for-two"),
])
def test_selection(needs: tuple[float | None, ...], incumbent: tuple[str, ...],
                   selected: tuple[bool, ...]) -> None:
    capacity = 8.0 if len(needs) == 4 else 4.0
    got = share(claims(*needs, incumbent=incumbent), capacity, beta=100.0 if capacity == 4.0
                else 2.0, hysteresis=0.1)
    assert got.selected == selected


def test_every_job_keeps_its_floor_and_no_more_than_the_worker_is_given() -> None:
    got = share(claims(1.0, 2.0, 3.0, 5.0, math.inf), 8.0, beta=2.0, hysteresis=0.1)
    assert got.floor_cores == pytest.approx(0.8)
    assert min(got.cores) >= got.floor_cores - 1e-12
    assert sum(got.cores) <= 8.0 + 1e-9


def test_hard_limits_give_what_is_left_to_free_jobs_first_up_to_what_they_can_use() -> None:
    c = [Claim(key="met", need=2.0, cap=8.0), Claim(key="free", need=None, cap=1.5),
         Claim(key="short", need=math.inf, cap=8.0)]
    got = share(c, 8.0, beta=4.0, hysteresis=0.1)
    assert got.cores[1] == pytest.approx(1.5)  # the free job up to its cap
    assert got.cores[0] >= 2.0 and got.cores[2] > got.floor_cores
    assert sum(got.cores) == pytest.approx(8.0)


def test_soft_limits_keep_the_met_jobs_at_their_needs_and_the_left_out_at_the_floor() -> None:
    c = [Claim(key="met", need=2.0, cap=8.0), Claim(key="free", need=None, cap=1.5),
         Claim(key="short", need=math.inf, cap=8.0)]
    got = share(c, 8.0, beta=4.0, hysteresis=0.1, soft=True)
    assert got.cores[0] == pytest.approx(2.0)
    assert got.cores[2] == pytest.approx(got.floor_cores)  # a weight: the kernel adds to it
    assert got.cores[1] == pytest.approx(8.0 - 2.0 - got.floor_cores)  # shares: no cap


def test_soft_limits_without_free_jobs_leave_what_is_left_unassigned() -> None:
    got = share([Claim(key="met", need=2.0, cap=8.0), Claim(key="short", need=math.inf,
                                                            cap=8.0)],
                8.0, beta=4.0, hysteresis=0.1, soft=True)
    assert got.cores == pytest.approx((2.0, got.floor_cores))


@pytest.mark.parametrize(("wants", "cores"), [
    pytest.param((3.0, 2.5), (3.0, 2.5), id="room-for-both"),
    # 8 - 1 (two floors of 0.5 for the left-out jobs) = 7 for the chosen, needs 2 + 2 = 4:
    # 3 cores of room for 4 + 2 wanted beyond the needs, half of each extra.
    pytest.param((6.0, 4.0), (4.0, 3.0), id="short-room-same-share-of-each-extra"),
    pytest.param((None, 1.0), (2.0, 2.0), id="want-never-below-need"),
])
def test_chosen_jobs_get_their_needs_then_what_they_want_if_there_is_room(
        wants: tuple[float | None, float | None], cores: tuple[float, float]) -> None:
    c = [Claim(key="a", need=2.0, cap=8.0, want=wants[0]),
         Claim(key="b", need=2.0, cap=8.0, want=wants[1]),
         Claim(key="x", need=math.inf, cap=8.0), Claim(key="y", need=math.inf, cap=8.0)]
    got = share(c, 8.0, beta=4.0, hysteresis=0.1, soft=True)
    assert got.selected == (True, True, False, False)
    assert got.cores[:2] == pytest.approx(cores)


def test_what_a_job_wants_beyond_its_need_never_keeps_another_job_out() -> None:
    # Needs 3 + 3 fit 8 cores beside two floors of 0.5; "rich" wants 5, which would not: it
    # gets the 1 core of room left.
    c = [Claim(key="rich", need=3.0, cap=8.0, want=5.0, incumbent=True),
         Claim(key="new", need=3.0, cap=8.0),
         Claim(key="x", need=math.inf, cap=8.0), Claim(key="y", need=math.inf, cap=8.0)]
    got = share(c, 8.0, beta=4.0, hysteresis=0.1, soft=True)
    assert got.selected[:2] == (True, True)
    assert got.cores[0] == pytest.approx(4.0) and got.cores[1] == pytest.approx(3.0)


def test_no_claims_share_nothing() -> None:
    assert share([], 8.0, beta=2.0, hysteresis=0.1).cores == ()


def test_hard_limits_settle_when_needs_move_a_little_each_interval() -> None:
    # Two chosen jobs whose needs wobble by 3 % an interval, two left-out jobs sharing what is
    # left. Each decision starts from the caps the last one set (`held`): the left-out jobs
    # keep theirs while they fit, and a chosen job's need within min_change of its cap counts
    # as that cap, so no limit follows the wobble.
    needs = [(2.0, 1.5), (2.06, 1.455), (1.94, 1.545), (2.06, 1.455), (1.94, 1.545)]
    held: list[float | None] = [None] * 4
    seen = []
    for a, b in needs:
        c = [Claim(key="a", need=a, cap=8.0, want=a, held=held[0]),
             Claim(key="b", need=b, cap=8.0, want=b, held=held[1]),
             Claim(key="x", need=math.inf, cap=8.0, held=held[2]),
             Claim(key="y", need=math.inf, cap=8.0, held=held[3])]
        got = share(c, 8.0, beta=4.0, hysteresis=0.1, min_change=0.05)
        assert got.selected == (True, True, False, False)
        assert sum(got.cores) <= 8.0 + 1e-9
        held = list(got.cores)
        seen.append(got.cores)
    assert all(cores == pytest.approx(seen[0]) for cores in seen[1:])


def test_hard_limits_cut_the_last_job_first_when_what_is_held_no_longer_fits() -> None:
    # A chosen job's need rises by 1 core: the held caps no longer fit, and the cut falls on
    # the last left-out job (by key), not on every job a little.
    c = [Claim(key="a", need=3.0, cap=8.0, want=3.0, held=2.0),
         Claim(key="x", need=math.inf, cap=8.0, held=3.0),
         Claim(key="y", need=math.inf, cap=8.0, held=3.0)]
    got = share(c, 8.0, beta=4.0, hysteresis=0.1, min_change=0.05)
    assert got.cores == pytest.approx((3.0, 3.0, 2.0))
