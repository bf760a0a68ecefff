"""The RBAC declaration matches the code: every API method called maps to a declared rule,
and every declared rule is used by some code path."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from policyd.actuators.kubernetes.rbac import CALLS, REQUIRED_RULES, Rule, role_rules, rule_for
from policyd.sources.kubernetes_pods import PodWatch
from tests.kubernetes import builders, test_actuator, test_leader, test_rate_limit, test_source
from tests.kubernetes.builders import answer, apis, pod, raw


def stream(*events: dict[str, Any]) -> SimpleNamespace:
    data = b"".join(json.dumps(e).encode() + b"\n" for e in events)
    return SimpleNamespace(stream=lambda amt=None, decode_content=False: iter([data]),
                           close=lambda: None, release_conn=lambda: None)


def real_watch(namespaces: tuple[str, ...]) -> None:
    """PodWatch with the client's real Watch over recording mocks: list, watch, 410, relist."""
    core, _, _ = apis()
    stop = threading.Event()
    lists = 0

    def listing(*args: Any, **kwargs: Any) -> Any:
        nonlocal lists
        if kwargs.get("watch"):
            return stream({"type": "ERROR", "object": {"kind": "Status", "code": 410,
                                                       "reason": "Expired", "message": "old"}})
        lists += 1
        if lists == 2:
            stop.set()
        return raw({"metadata": {"resourceVersion": "7"}, "items": [pod()]})
    answer(core.list_pod_for_all_namespaces, listing)
    answer(core.list_namespaced_pod, listing)
    scope = SimpleNamespace(namespaces=namespaces, label_selector="a=b", container_name=None,
                            node_name=None)
    PodWatch(core, scope).watch(lambda e: None, stop)


SCENARIOS: list[Callable[[], None]] = [
    test_actuator.test_resize_shares_sets_the_request_and_confirms,
    test_actuator.test_mark_migrated_writes_annotations,
    test_actuator.test_bare_pod_is_evicted_then_recreated_on_the_target,
    test_actuator.test_bare_pod_delete_mode_and_rollback_when_the_replacement_fails,
    test_actuator.test_job_owned_pod_is_suspended_repinned_and_resumed,
    lambda: test_actuator.test_recovery_resumes_a_job_left_suspended(()),
    lambda: test_actuator.test_recovery_resumes_a_job_left_suspended(("ml",)),
    test_rate_limit.test_hundred_resizes_are_spread_and_none_lost,
    test_source.test_snapshot_makes_one_pod_list_and_one_node_list,
    test_leader.test_hand_over_after_the_lease_expires,
    lambda: real_watch(()),
    lambda: real_watch(("ml",)),
]


@pytest.fixture(scope="module")
def called() -> list[tuple[str, dict[str, Any]]]:
    builders.CALLED.clear()
    for scenario in SCENARIOS:
        scenario()
    return list(builders.CALLED)


def test_every_call_is_declared(called: list[tuple[str, dict[str, Any]]]) -> None:
    undeclared = sorted({m for m, _ in called if m not in CALLS})
    assert undeclared == []
    assert {rule_for(m, k) for m, k in called} <= REQUIRED_RULES


def test_every_rule_is_used(called: list[tuple[str, dict[str, Any]]]) -> None:
    used = {rule_for(m, k) for m, k in called}
    assert sorted(REQUIRED_RULES - used) == []


def test_resize_needs_its_own_subresource_rule() -> None:
    assert Rule("", "pods", "resize", "patch") in REQUIRED_RULES
    rendered = role_rules()
    resize = [r for r in rendered if r["resources"] == ["pods/resize"]]
    assert resize == [{"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["patch"]}]
    pods_rule = next(r for r in rendered if r["resources"] == ["pods"])
    assert pods_rule["verbs"] == ["create", "delete", "get", "list", "patch", "watch"]
