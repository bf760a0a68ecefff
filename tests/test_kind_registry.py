"""A policy kind is one module plus one registration line: a toy kind, registered inside this
test only, goes through `validate`, `schema`, `plan`, `simulate`, the Prometheus source's
queries and a daemon tick without any of them knowing it."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest
from prometheus_client import CollectorRegistry
from pydantic import Field

from policyd.cli import main
from policyd.daemon.metrics import DaemonMetrics
from policyd.daemon.scheduler import Daemon
from policyd.engine.kind import Intervals, Kind
from policyd.engine.registry import KINDS, Registry
from policyd.engine.spec import CommonSpec, PolicyDocument
from policyd.model import Assessment, Decision, SetCpu, Snapshot
from policyd.policy import json_schema, load_policies_text
from policyd.sources.promql import build_queries
from policyd.sources.settings import cadvisor_docker
from tests.daemon.fakes import FakeActuator, FakeEvents, FakeSource, one_to_limit, wait_for

ROOT = Path(__file__).resolve().parents[1]


class ToySpec(CommonSpec):
    """Every selected job gets `share` of its node, as a hard cap."""

    share: float = Field(default=0.5, gt=0, le=1)
    interval_seconds: float = Field(default=10.0, ge=1)


class ToyPolicy(PolicyDocument):
    kind: Literal["Toy"]
    spec: ToySpec


def toy_plan(policy: PolicyDocument, snapshot: Snapshot) -> Decision:
    assert isinstance(policy, ToyPolicy)
    spec = policy.spec
    chosen = [c for c in snapshot.containers if spec.selector.selects(c)]
    actions = tuple(
        SetCpu(policy=policy.name, container=c.id, node=c.node, fraction=spec.share,
               mode="quota", reason=f"toy: every job gets {spec.share:g} of its node")
        for c in chosen if abs(c.cpu_allocation - spec.share) > 1e-9)
    assessments = tuple(Assessment(container=c.id, node=c.node, category="TOY",
                                   cpu_fraction_now=c.cpu_allocation,
                                   cpu_fraction_next=spec.share) for c in chosen)
    return Decision(policy=policy.name, kind="Toy", time=snapshot.time, actions=actions,
                    assessments=assessments,
                    next_interval=snapshot.interval_seconds(policy.name, spec.interval_seconds),
                    dry_run=spec.dry_run)


def toy_intervals(policy: PolicyDocument) -> Intervals:
    assert isinstance(policy, ToyPolicy)
    return Intervals(base_seconds=policy.spec.interval_seconds,
                     longest_seconds=policy.spec.interval_seconds)


TOY = Kind(name="Toy", document=ToyPolicy, plan=toy_plan, scope="node",
           intervals=toy_intervals, wakes_on=frozenset({"started"}),
           inputs=frozenset({"evaluation"}), acts_on=frozenset({"cpu"}),
           cpu_mode=lambda _: "quota", summary=lambda p: "every job at half its node",
           gain_label="-")

TOY_YAML = """apiVersion: policyd.io/v1alpha1
kind: Toy
metadata:
  name: toy
spec:
  share: 0.5
  interval_seconds: 10
"""


@pytest.fixture
def toy(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "toy.yaml"
    path.write_text(TOY_YAML)
    with KINDS.registered(TOY):
        yield path
    assert "Toy" not in KINDS


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_the_toy_kind_is_unknown_outside_its_registration(tmp_path: Path) -> None:
    path = tmp_path / "toy.yaml"
    path.write_text(TOY_YAML)
    code, _, err = cli("validate", str(path))
    assert code == 1 and "'Toy' is not one of: FlowCon, SpeCon, Predictive, Deadline, QoE" in err


def test_validate_and_schema_know_a_registered_kind(toy: Path) -> None:
    code, out, err = cli("validate", str(toy))
    assert (code, err) == (0, "") and "(Toy: 1)" in out
    variants = json.dumps(json_schema())
    assert '"Toy"' in variants and '"share"' in variants
    bad = toy.with_name("bad.yaml")
    bad.write_text(TOY_YAML.replace("share: 0.5", "share: 2"))
    code, _, err = cli("validate", str(bad))
    assert code == 1 and 'policy "toy": spec.share: ' in err and ":6:" in err


def test_a_registered_kind_is_a_custom_resource(toy: Path) -> None:
    """`policyd crds` defines it, and `policyd run` on Kubernetes watches and judges it."""
    import yaml  # noqa: PLC0415
    from kubernetes import client as k8s  # type: ignore[import-untyped]  # noqa: PLC0415

    from policyd.daemon.policy_resources import PolicyResources  # noqa: PLC0415
    from tests.kubernetes.world import served  # noqa: PLC0415

    code, out, _ = cli("crds")
    (crd,) = [d for d in yaml.safe_load_all(out) if d["metadata"]["name"] == "toys.policyd.io"]
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert code == 0
    assert spec["properties"]["share"] == {"type": "number", "minimum": 0,
                                           "exclusiveMinimum": True, "maximum": 1}
    with served() as (server, _):
        server.cluster.policy_plurals = {"toys": "Toy"}
        server.cluster.put_policy("toys", yaml.safe_load(TOY_YAML))
        with server.api_client() as api:
            resources = PolicyResources(k8s.CustomObjectsApi(api), ["Toy"])
            resources.list_all()
        assert [p.kind for p in resources.current()] == ["Toy"]
        judged = server.cluster.get("toys", "", "toy")
        assert judged is not None and judged["status"]["conditions"][0]["status"] == "True"


def test_plan_runs_a_registered_kind(toy: Path) -> None:
    code, out, _ = cli("plan", "--policy", str(toy), "--snapshot",
                       str(ROOT / "examples" / "thesis-flowcon-two-jobs.json"), "--output", "json")
    assert code == 0
    decision = json.loads(out)
    assert decision["kind"] == "Toy"
    assert {(a["container"], a["fraction"], a["mode"]) for a in decision["actions"]} == {
        ("vae-pytorch", 0.5, "quota"), ("mnist-pytorch", 0.5, "quota")}


def test_simulate_runs_a_registered_kind_on_a_scenario(toy: Path) -> None:
    code, out, _ = cli("simulate", "--scenario", "flowcon-fixed-3", "--policy", str(toy),
                       "--output", "json")
    assert code == 0
    (scenario,) = json.loads(out)["scenarios"]
    assert scenario["policy"]["kind"] == "Toy"
    policy, baseline = scenario["runs"]["policy"], scenario["runs"]["baseline"]
    # Three jobs on one 2-core node, each capped at half of it: the node is never full until
    # the third arrives, so the capped run is slower than the uncapped baseline.
    assert policy["makespan"] > baseline["makespan"]


def test_the_source_asks_only_for_the_inputs_the_kind_needs(toy: Path) -> None:
    (policy,) = load_policies_text(TOY_YAML)
    queries = build_queries([policy], cadvisor_docker(), now_seconds=1_700_000_000.0)
    assert queries.cpu is None and queries.count == 6
    assert queries.allocation_mode == "quota"  # the kind's cpu_mode
    # No CPU: the kind does not read it; steps and progress: the forecasts always do; of the
    # allocation facts only the quota mode's limit.
    assert [what for what, _ in queries.labelled()] == [
        "evaluation", "facts:capacity", "facts:started_at", "facts:limit_cores", "steps",
        "progress"]


def test_a_daemon_ticks_and_wakes_a_registered_kind(toy: Path) -> None:
    (policy,) = load_policies_text(TOY_YAML)
    actuator, events = FakeActuator(), FakeEvents()
    daemon = Daemon([policy], source=FakeSource(one_to_limit), actuator=actuator,
                    metrics=DaemonMetrics(CollectorRegistry()), events=events,
                    interval_scale=100.0)  # 1000 s between ticks: only the first and a wake
    try:
        daemon.start()
        wait_for(lambda: len(actuator.applied) == 2, what="the first tick's two SetCpu")
        assert {(a.container, a.fraction) for a in actuator.applied} == {("a", 0.5),
                                                                         ("b", 0.5)}
        wait_for(events.watching.is_set, what="the listener")
        events.emit("started")  # the kind wakes on a start: a tick now, not in 1000 s
        wait_for(lambda: len(actuator.applied) == 4, what="a tick woken by the event")
        events.emit("stopped")  # ... but not on a stop
        time.sleep(0.5)  # a wake would tick within milliseconds
        assert len(actuator.applied) == 4
        assert daemon.interval_seconds("toy") == 10.0
    finally:
        daemon.shutdown()


def test_a_kind_module_is_imported_only_when_its_entry_is_asked_for() -> None:
    """Reading one FlowCon policy does not build the other kinds' models (start-up time)."""
    code = ("import sys\n"
            "from policyd.policy import load_policies\n"
            "load_policies(sys.argv[1])\n"
            "print(sorted(m for m in sys.modules if m in {"
            "'policyd.engine.flowcon', 'policyd.engine.specon', 'policyd.engine.deadline', "
            "'policyd.engine.qoe', 'policyd.engine.predictive', 'policyd.engine.flowcon2'}))\n")
    answer = subprocess.run([sys.executable, "-c", code, str(ROOT / "policies" / "flowcon.yaml")],
                            check=True, capture_output=True, text=True)
    assert answer.stdout.strip() == "['policyd.engine.flowcon']"


def test_a_registry_entry_whose_module_holds_another_kind_is_refused() -> None:
    registry = Registry({"FlowCon": "policyd.engine.specon"})
    with pytest.raises(TypeError, match=r"policyd\.engine\.specon\.KIND is not the Kind entry"):
        registry["FlowCon"]
