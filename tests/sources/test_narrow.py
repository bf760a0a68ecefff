"""`narrowed`: matchers added to exactly one plain selector, anything else left alone."""

from __future__ import annotations

import pytest

from policyd.sources.narrow import narrowed

NODE = 'node="w1"'


@pytest.mark.parametrize(("expr", "expected"), [
    pytest.param("policyd_training_loss", 'policyd_training_loss{node="w1"}', id="bare-name"),
    pytest.param(" loss ", 'loss{node="w1"}', id="spaces"),
    pytest.param('loss{job="x"}', 'loss{job="x",node="w1"}', id="with-matchers"),
    pytest.param('loss{job="x",}', 'loss{job="x",node="w1"}', id="trailing-comma"),
    pytest.param('{__name__="loss", job=~"a|b"}', '{__name__="loss", job=~"a|b",node="w1"}',
                 id="name-as-matcher"),
    pytest.param('loss{job="}, x"}', 'loss{job="}, x",node="w1"}', id="brace-in-a-string"),
    pytest.param("loss{}", 'loss{node="w1"}', id="empty-braces"),
    pytest.param("avg(loss)", None, id="function"),
    pytest.param("loss * 2", None, id="operator"),
    pytest.param('loss{job="x"} or other', None, id="or"),
    pytest.param("loss[5m]", None, id="range"),
    pytest.param("loss offset 1m", None, id="offset"),
    pytest.param('loss{job="x"', None, id="unclosed"),
    pytest.param("by", None, id="keyword"),
    pytest.param("", None, id="empty"),
])
def test_only_a_plain_selector_is_narrowed(expr: str, expected: str | None) -> None:
    assert narrowed(expr, NODE) == expected
