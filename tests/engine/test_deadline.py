"""The Deadline kind: a job's state from its forecast and deadline, cores taken from jobs
without a deadline for an at-risk one, a declaration that cannot be read leaves that job alone
(and nothing else), held jobs admitted earliest deadline first with a CPU limit, and the
queue of those that wait."""

from __future__ import annotations

import pytest

from policyd.engine import decide
from policyd.engine.deadline_cores import parallel_share
from policyd.engine.forecasting import forecast_containers, settings_of
from policyd.model import Admit, Decision, PendingJob, SetCpu
from tests.engine.deadline_builders import NOW, cluster, held, job, policy, scaling

# Every job below has 2,000 steps left at 10 steps/s (alone on a core: 200 s), submitted 600 s
# ago: a deadline of "800s" is 200 s away.


def by_id(d: Decision) -> dict[str, tuple[str | None, float | None]]:
    return {a.container: (a.category, None if a.cpu_fraction_next is None
                          else round(a.cpu_fraction_next, 3)) for a in d.assessments}


def three(deadline: str) -> Decision:
    return decide(policy(), cluster(
        job("urgent", left=2000, rate=10, deadline=deadline, cores=2, allocation=0.5),
        job("free1", left=2000, rate=10), job("free2", left=2000, rate=10)))


def test_an_at_risk_job_takes_cores_from_the_jobs_without_a_deadline() -> None:
    # 200 s left and a cushion of 80 s: its speed model's serial part outlasts 120 s, so no
    # number of cores makes the whole cushion; it aims at finishing in 0.9 x 200 s instead.
    d = three("800s")
    assert by_id(d) == {"urgent": ("AT_RISK", 0.714), "free1": ("NO_DEADLINE", 0.143),
                        "free2": ("NO_DEADLINE", 0.143)}
    (urgent,) = [a for a in d.actions if a.container == "urgent"]
    assert isinstance(urgent, SetCpu) and urgent.mode == "quota"
    assert urgent.reason.startswith("deadline in 3 min; 2000 steps left, 3 min on 2.86 cores")
    assert "no number of cores makes the margin: at risk, 2.86 cores -> 0.714" in urgent.reason


def test_two_jobs_inside_their_last_cushion_both_get_cores_to_meet_their_deadlines() -> None:
    """20 s left of a 620 s window (cushion 62 s): no number of cores makes the cushion. Each
    job aims at 0.9 x 20 s, a need, not a claim on every core; asking for every core gave the
    first in deadline order the node and the second the floor (slack -2 min), one interval
    before both deadlines (seen on a real engine in shares mode)."""
    d = decide(policy(mode="shares"), cluster(
        job("long-1", left=150, rate=10, deadline="620s", cores=1, allocation=0.5),
        job("long-2", left=150, rate=10, deadline="620s", cores=1, allocation=0.5),
        nodes={"w1": 2.0}))
    assert by_id(d) == {"long-1": ("AT_RISK", 1.0), "long-2": ("AT_RISK", 1.0)}
    for a in d.assessments:
        assert a.deadline is not None and a.deadline.slack_seconds == pytest.approx(5.0)
        assert "15 s on 1.00 cores, slack 5 s; no number of cores makes the margin" in a.note


def test_a_job_at_the_floor_inside_its_last_cushion_comes_back_when_it_can_make_it() -> None:
    """At the floor (0.1 of 4 cores), 100 steps left at 10 steps/s a core, 20 s to go: 0.56
    cores finish it in 0.9 x 20 s, so it is at risk and given them, not hopeless for ever
    because the whole cushion (62 s) is out of reach."""
    d = decide(policy(), cluster(
        job("late", left=100, rate=1, deadline="620s", cores=0.1, allocation=0.025),
        job("free1", left=2000, rate=10, cores=1.9, allocation=0.475),
        job("free2", left=2000, rate=10, cores=1.9, allocation=0.475)))
    assert by_id(d)["late"] == ("AT_RISK", 0.139)
    (late,) = [a for a in d.actions if a.container == "late"]
    assert late.reason.startswith("deadline in 20 s; 100 steps left, 18 s on 0.56 cores")


def test_a_job_seen_below_a_core_is_timed_on_the_model_its_need_comes_from() -> None:
    """A job that used 0.1 of the core it was given (a core other jobs shared, in shares mode:
    what it got, not what it can use) is read as able to use a whole core, as its need is:
    10 s left on 1 core, slack 70 s, needs 0.83 cores, on track. Timed at the 0.1 core it was
    seen at, its reason said 100 s, slack -20 s, and on track with a need of 0.83 cores."""
    d = decide(policy(mode="shares"), cluster(
        job("slow", left=100, rate=1, deadline="680s", cores=0.1, allocation=0.5),
        nodes={"w1": 2.0}))
    (slow,) = d.assessments
    assert slow.category == "ON_TRACK" and slow.deadline is not None
    assert slow.deadline.slack_seconds == pytest.approx(70.0)
    assert slow.deadline.needed_cores == pytest.approx(0.833, abs=1e-3)
    assert "100 steps left, 10 s on 1.00 cores, slack 70 s; needs 0.83 cores" in slow.note


def test_an_on_track_job_keeps_its_cores_and_shows_its_need_eta_and_slack() -> None:
    d = three("900s")
    assert d.actions == ()
    (urgent,) = [a for a in d.assessments if a.container == "urgent"]
    assert urgent.category == "ON_TRACK"
    assert urgent.deadline is not None
    assert urgent.deadline.deadline_at == NOW + 300
    assert urgent.deadline.eta_at == pytest.approx(NOW + 200)
    assert urgent.deadline.slack_seconds == pytest.approx(100)
    assert urgent.deadline.needed_cores == pytest.approx(1.739, abs=1e-3)


def test_a_hopeless_job_is_called_so_and_takes_nothing_from_the_others() -> None:
    d = three("700s")
    assert by_id(d)["urgent"][0] == "HOPELESS"
    assert d.actions == ()


def test_a_deadline_that_cannot_be_read_is_a_note_and_no_action_for_that_job_only() -> None:
    d = decide(policy(), cluster(
        job("bad", left=2000, rate=10, deadline="45w", allocation=0.5, cores=0.5),
        job("free", left=2000, rate=10, cores=1, allocation=0.25),
        pending=(held("bad-held", deadline="yesterday"), held("ok", deadline="1h"))))
    (bad,) = [a for a in d.assessments if a.container == "bad"]
    assert bad.deadline is not None and bad.deadline.state == "invalid"
    assert bad.note.startswith("no action: policyd.io/deadline='45w': unknown unit 'w'")
    assert "bad" not in [a.container for a in d.actions]
    assert [a.container for a in d.actions if isinstance(a, Admit)] == ["ok"]
    (queued,) = d.queue
    assert (queued.container, queued.why) == ("bad-held", "invalid")
    assert queued.reason.startswith("not admitted: policyd.io/deadline='yesterday'")


def test_held_jobs_start_earliest_deadline_first_with_their_cores_as_a_limit() -> None:
    d = decide(policy(admission_cores=1.5), cluster(
        job("running", left=2000, rate=10, cores=2, allocation=2 / 3),
        pending=(held("later", deadline="2h"), held("sooner", deadline="30m"),
                 held("none")), nodes={"w1": 3.0}))
    # 2.9 cores free (the running job without a deadline reserves its floor, 0.1): one fits
    admits = [a for a in d.actions if isinstance(a, Admit)]
    assert [(a.container, a.node, a.fraction, a.mode) for a in admits] == [
        ("sooner", "w1", 0.5, "quota")]
    assert [(q.container, q.position, q.why) for q in d.queue] == [
        ("later", 1, "no_fit"), ("none", 2, "no_fit")]
    assert "admission: 1 admitted, 2 waiting" in d.notes


def test_a_job_whose_deadline_passed_while_it_waited_starts_only_when_nothing_else_waits(
) -> None:
    late = held("late", deadline="5s", submitted_at=NOW - 60)
    d = decide(policy(), cluster(pending=(late, held("big", deadline="1h",
                                                     labels={"policyd.io/min-cpu": "8"}))))
    assert [(q.container, q.why) for q in d.queue] == [("big", "no_fit"), ("late", "hopeless")]
    d = decide(policy(), cluster(pending=(late,)))
    assert [a.container for a in d.actions if isinstance(a, Admit)] == ["late"]


def test_a_job_at_its_cap_is_at_risk_and_grows_not_hopeless_for_a_growth_step() -> None:
    # On one core (all of its quota), it needs ~2 cores: more than this interval's growth
    # step (1.5) gives, less than its speed model says it can use: at risk, raised to 1.5.
    d = decide(policy(), cluster(
        job("urgent", left=2000, rate=10, deadline="750s", cores=1, allocation=0.25)))
    assert by_id(d)["urgent"] == ("AT_RISK", 0.375)


def limits(d: Decision) -> dict[str, float]:
    """Each job's CPU limit after the decision, in cores of its 4-core node: what it is set
    to, what it starts with, or what it keeps."""
    out = {a.container: 4.0 * a.cpu_fraction_next for a in d.assessments
           if a.cpu_fraction_next is not None}
    out |= {a.container: 4.0 * a.fraction for a in d.actions
            if isinstance(a, Admit) and a.fraction is not None}
    return out


@pytest.mark.parametrize(
    ("busy_cores", "waiting", "cores"),
    [
        # The running job used all of its 3 cores: it would be given the node's fourth core
        # on trust, the one the admitted job starts with.
        pytest.param(3.0, held("new", deadline="1h"), {"busy": 3.0, "new": 1.0},
                     id="admitted-for-its-cores"),
        # Admitted only because nothing else waits: its floor, then what the running job has
        # not shown it uses (0.4 of 4 - 3.5 - 0.1), not the 1 core of a normal admission.
        pytest.param(3.5, held("late", deadline="5s", submitted_at=NOW - 60),
                     {"busy": 3.5, "late": 0.5}, id="admitted-last-on-what-is-left"),
    ],
)
def test_a_node_that_admits_a_job_leaves_it_room_in_the_running_jobs_limits(
        busy_cores: float, waiting: PendingJob, cores: dict[str, float]) -> None:
    d = decide(policy(), cluster(
        job("busy", left=2000, rate=10, cores=busy_cores, allocation=busy_cores / 4),
        pending=(waiting,)))
    assert [a.container for a in d.actions if isinstance(a, Admit)] == [waiting.id]
    assert limits(d) == pytest.approx(cores)


def trusted(parallel_fraction: float) -> tuple[float, float]:
    """Alone on a 4-core node, a job used all of its 2 cores: it may use more, and nobody else
    needs the other 2. The cores it is given, and 2 (1 + 0.5 share) with share what its fitted
    speed model says more cores shorten of its step at 2 cores."""
    p, snapshot = policy(), cluster(scaling("alone", parallel_fraction=parallel_fraction))
    settings = settings_of(p, snapshot, alpha=p.spec.alpha,
                           interval_seconds=p.spec.interval_seconds)
    every = {c.id for c in snapshot.containers}
    fitted = forecast_containers(settings, snapshot, every).by_id["alone"]
    assert fitted is not None
    return limits(decide(p, snapshot))["alone"], 2.0 * (1 + 0.5 * parallel_share(fitted, 2.0))


def test_cores_nobody_needs_go_on_trust_in_steps_sized_by_the_speed_model() -> None:
    # The full step (2 x 1.5 = 3 cores) only for a job all of whose step more cores shorten;
    # the better the job scales, the bigger its step.
    given = {p: trusted(p) for p in (0.2, 0.5, 0.9)}
    for cores, expected in given.values():
        assert 2.0 < cores < 3.0
        assert cores == pytest.approx(expected)
    assert given[0.2][0] < given[0.5][0] < given[0.9][0]
