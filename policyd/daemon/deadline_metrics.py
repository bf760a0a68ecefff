"""policyd's deadline and admission metrics, from each decision (on a registry passed in).

Decisions of kinds that judge deadlines (`Assessment.deadline`) or hold jobs for admission
(`Decision.queue`) feed these; other decisions leave them empty. Series of a container that
leaves the decision are removed, as `DaemonMetrics` does for categories.

* `policyd_deadline_jobs{policy,state}`: jobs per deadline state (on_track, at_risk, hopeless,
  missed, unknown, none, invalid; 0 for a state no job is in)
* `policyd_deadline_slack_seconds{policy,container}`: predicted slack at the next allocation
  (deadline minus predicted finish; negative: late), for jobs with a deadline and a forecast
* `policyd_admission_waiting_jobs{policy,why}`: held jobs left waiting, by why (no_fit,
  hopeless, invalid, owned, blocked)
* `policyd_admission_queue_position{policy,container,why}`: each waiting job's position (1 =
  next)
"""

from __future__ import annotations

import threading
from collections import Counter

from prometheus_client import CollectorRegistry, Gauge

from policyd.model import Decision
from policyd.model.deadline import DEADLINE_STATES
from policyd.model.pending import WHYS


class DeadlineMetrics:
    """The deadline and admission gauges on `registry` (module docstring)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.jobs = Gauge("policyd_deadline_jobs", "Jobs per deadline state.",
                          ["policy", "state"], registry=registry)
        self.slack = Gauge("policyd_deadline_slack_seconds",
                           "Predicted slack before each job's deadline (negative: late).",
                           ["policy", "container"], registry=registry)
        self.waiting = Gauge("policyd_admission_waiting_jobs",
                             "Held jobs waiting for admission, by why.", ["policy", "why"],
                             registry=registry)
        self.position = Gauge("policyd_admission_queue_position",
                              "Each waiting job's position in the admission queue (1 = next).",
                              ["policy", "container", "why"], registry=registry)
        self._lock = threading.Lock()
        self._slack: dict[str, set[str]] = {}
        self._queued: dict[str, set[tuple[str, str]]] = {}
        self._seen: set[str] = set()

    def record(self, decision: Decision) -> None:
        """Set the policy's gauges from `decision`."""
        policy = decision.policy
        judged = [a for a in decision.assessments if a.deadline is not None]
        if not judged and not decision.queue and policy not in self._seen:
            return  # a kind without deadlines: no series at all
        with self._lock:
            self._seen.add(policy)
            states = Counter(a.deadline.state for a in judged if a.deadline is not None)
            for state in DEADLINE_STATES:
                self.jobs.labels(policy, state).set(states.get(state, 0))
            slack = {a.container: a.deadline.slack_seconds for a in judged
                     if a.deadline is not None and a.deadline.slack_seconds is not None}
            for gone in self._slack.get(policy, set()) - set(slack):
                self.slack.remove(policy, gone)
            for container, seconds in slack.items():
                self.slack.labels(policy, container).set(seconds)
            self._slack[policy] = set(slack)
            whys = Counter(q.why for q in decision.queue)
            for code in WHYS:
                self.waiting.labels(policy, code).set(whys.get(code, 0))
            queued = {(q.container, q.why): q.position for q in decision.queue}
            for container, why in self._queued.get(policy, set()) - set(queued):
                self.position.remove(policy, container, why)
            for (container, why), position in queued.items():
                self.position.labels(policy, container, why).set(position)
            self._queued[policy] = set(queued)

    def forget_policy(self, policy: str) -> None:
        """Remove every series of a policy that is gone."""
        with self._lock:
            if policy not in self._seen:
                return
            self._seen.discard(policy)
            for state in DEADLINE_STATES:
                self.jobs.remove(policy, state)
            for code in WHYS:
                self.waiting.remove(policy, code)
            for container in self._slack.pop(policy, set()):
                self.slack.remove(policy, container)
            for container, why in self._queued.pop(policy, set()):
                self.position.remove(policy, container, why)
