"""`Assessment.but`: the copy a decision makes of each of its assessments, as
`dataclasses.replace` would make it (it sets the fields without the frozen `__init__`)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policyd.model.decision import Assessment

CHANGES: dict[str, st.SearchStrategy[Any]] = {
    "category": st.sampled_from([None, "NL", "WL", "CL"]),
    "gain": st.none() | st.floats(allow_nan=False),
    "cpu_fraction_next": st.none() | st.floats(0.01, 1.0),
    "note": st.text(max_size=5),
    "forecast_note": st.text(max_size=5),
}


@given(st.fixed_dictionaries({}, optional=CHANGES))
def test_but_is_replace(changes: dict[str, Any]) -> None:
    before = Assessment(container="c", node="n", category="WL", gain=0.5, note="kept")
    copy, replaced = before.but(**changes), dataclasses.replace(before, **changes)
    assert copy == replaced and hash(copy) == hash(replaced)
    assert vars(copy) == vars(replaced) and type(copy) is Assessment
    assert before == Assessment(container="c", node="n", category="WL", gain=0.5, note="kept")


def test_the_copy_is_frozen_and_a_name_that_is_no_field_is_refused() -> None:
    copy = Assessment(container="c", node="n", category=None).but(note="left alone")
    with pytest.raises(dataclasses.FrozenInstanceError):
        copy.note = "changed"  # type: ignore[misc]
    with pytest.raises(TypeError, match="no field forcast"):
        copy.but(forcast=None)
