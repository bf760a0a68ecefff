"""What a job declares about its deadline: every accepted form, and a clear problem (never a
guess) for every value that cannot be read."""

from __future__ import annotations

import pytest

from policyd.engine.declarations import declared

SUBMITTED = 1_700_000_000.0


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        pytest.param("45m", 2700.0, id="minutes"),
        pytest.param("2h", 7200.0, id="hours"),
        pytest.param("1h30m", 5400.0, id="hours-and-minutes"),
        pytest.param("90s", 90.0, id="seconds"),
        pytest.param("1d", 86400.0, id="a-day"),
        pytest.param("1.5h", 5400.0, id="fraction"),
        pytest.param("2023-11-14T23:13:20Z", 1_700_003_600.0 - SUBMITTED, id="rfc3339-utc"),
        pytest.param("2023-11-15T00:13:20+01:00", 1_700_003_600.0 - SUBMITTED,
                     id="rfc3339-offset"),
    ],
)
def test_a_deadline_is_a_duration_from_submission_or_a_time(value: str, seconds: float) -> None:
    d = declared({"policyd.io/deadline": value}, {}, submitted_at=SUBMITTED)
    assert d.problems == ()
    assert d.deadline_at == pytest.approx(SUBMITTED + seconds)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        pytest.param("45", "a duration needs a unit", id="bare-number"),
        pytest.param("45w", "unknown unit 'w'", id="unknown-unit"),
        pytest.param("soon", "neither a duration", id="words"),
        pytest.param("2023-11-14T23:13:20", "needs its zone", id="no-zone"),
        pytest.param("2023-11-14", "needs a date and a time", id="date-only"),
        pytest.param("2023-11-14T22:00:00Z", "before the job was submitted", id="in-the-past"),
        pytest.param("0m", "longer than zero", id="zero"),
    ],
)
def test_a_deadline_that_cannot_be_read_is_a_problem_and_no_deadline(value: str,
                                                                      words: str) -> None:
    d = declared({"policyd.io/deadline": value}, {}, submitted_at=SUBMITTED)
    assert d.deadline_at is None
    assert len(d.problems) == 1 and words in d.problems[0]
    assert d.problems[0].startswith(f"policyd.io/deadline={value!r}")


def test_an_annotation_wins_over_a_label_and_cores_read_millicores() -> None:
    d = declared({"policyd.io/deadline": "1h", "policyd.io/min-cpu": "2"},
                 {"policyd.io/deadline": "30m", "policyd.io/min-cpu": "500m",
                  "policyd.io/max-cpu": "1.5"}, submitted_at=SUBMITTED)
    assert (d.deadline_at, d.min_cores, d.max_cores, d.problems) == (
        SUBMITTED + 1800, 0.5, 1.5, ())


def test_every_bad_key_is_reported_at_once() -> None:
    d = declared({"policyd.io/deadline": "2x", "policyd.io/min-cpu": "many",
                  "policyd.io/submitted-at": "yesterday"}, {}, submitted_at=SUBMITTED)
    assert [p.split("=")[0].split(" ")[0] for p in d.problems] == [
        "policyd.io/submitted-at", "policyd.io/deadline", "policyd.io/min-cpu"]


def test_min_above_max_is_a_problem() -> None:
    d = declared({"policyd.io/min-cpu": "3", "policyd.io/max-cpu": "1"}, {},
                 submitted_at=SUBMITTED)
    assert d.problems == ("policyd.io/min-cpu (3) is more than policyd.io/max-cpu (1)",)


def test_a_written_submission_time_moves_a_duration_deadline() -> None:
    d = declared({"policyd.io/deadline": "10m", "policyd.io/submitted-at": "1700000600"}, {},
                 submitted_at=SUBMITTED)
    assert (d.submitted_at, d.deadline_at) == (1_700_000_600.0, 1_700_001_200.0)
