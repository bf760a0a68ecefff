"""The daemon closes its source once no tick runs any more, after a single run and after a
long one, through the sources that wrap another (a node agent's, a manager's with node
reports); a source that cannot be closed, or fails to, does not stop the shutdown."""

from __future__ import annotations

import io
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from policyd.daemon.app import run
from policyd.daemon.backend import Parts
from policyd.engine.spec import PolicyDocument
from policyd.model import Snapshot
from policyd.sources.node_reports import NodeReportSource, ReportedSource
from policyd.sources.prometheus_connect import connect_prometheus
from policyd.tick import close_source
from tests.daemon.fakes import FakeActuator, FakeSource
from tests.daemon.test_kubernetes import k8s_settings, two_nodes


class ClosableSource(FakeSource):
    """A fake source that notes whether a tick was running when it was closed."""

    def __init__(self, *, error: str | None = None) -> None:
        super().__init__(two_nodes)
        self.closed: list[int] = []  # the snapshots taken by then
        self.error = error

    def snapshot(self, policies: Sequence[PolicyDocument], *,
                 intervals: Mapping[str, float] | None = None) -> Snapshot:
        assert not self.closed, "a snapshot asked for after the source was closed"
        return super().snapshot(policies, intervals=intervals)

    def close(self) -> None:
        self.closed.append(len(self.seen))
        if self.error:
            raise RuntimeError(self.error)


@pytest.mark.parametrize("node", [None, "w1"])
def test_a_single_run_closes_the_source_after_its_ticks(tmp_path: Path,
                                                        node: str | None) -> None:
    source = ClosableSource()
    code = run(k8s_settings(tmp_path), out=io.StringIO(), stop=threading.Event(), once=True,
               node=node, parts=Parts(source=source, actuator=FakeActuator(), events=None))
    assert code == 0
    assert source.closed == [1]  # once, after the one snapshot


def test_a_long_run_closes_the_source_when_it_stops(tmp_path: Path) -> None:
    source, stop = ClosableSource(), threading.Event()
    finished: list[int] = []
    thread = threading.Thread(target=lambda: finished.append(run(
        k8s_settings(tmp_path), out=io.StringIO(), stop=stop,
        parts=Parts(source=source, actuator=FakeActuator(), events=None))))
    thread.start()
    try:
        for _ in range(200):
            if source.seen:
                break
            threading.Event().wait(0.05)
        assert source.seen and not source.closed  # running: not closed
    finally:
        stop.set()
        thread.join(30)
    assert finished == [0]
    assert source.closed == [len(source.seen)]


def test_a_source_that_fails_to_close_does_not_fail_the_exit(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    source = ClosableSource(error="engine gone")
    code = run(k8s_settings(tmp_path), out=io.StringIO(), stop=threading.Event(), once=True,
               parts=Parts(source=source, actuator=FakeActuator(), events=None))
    assert code == 0 and source.closed == [1]
    assert "closing the source failed" in caplog.text and "engine gone" in caplog.text


def test_a_manager_with_node_reports_closes_both_sources_and_only_its_own_client() -> None:
    class Client:
        closed = 0

        def close(self) -> None:
            self.closed += 1

    inner, given = ClosableSource(), Client()
    close_source(ReportedSource(inner, NodeReportSource("http://127.0.0.1:9", client=given)))
    assert inner.closed == [0] and given.closed == 0
    made = NodeReportSource("http://127.0.0.1:9")
    own: Any = made._client  # the client it made, to watch its session
    sessions: list[str] = []
    own._session.close = lambda: sessions.append("closed")
    made.close()
    assert sessions == ["closed"]


def test_a_prometheus_client_closes_its_session() -> None:
    client: Any = connect_prometheus("http://127.0.0.1:9", timeout_seconds=1, retries=0)
    closed: list[bool] = []
    client._session.close = lambda: closed.append(True)
    close_source(client)
    assert closed == [True]
