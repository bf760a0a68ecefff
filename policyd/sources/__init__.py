"""Sources: the outside world as a `Snapshot` (policyd.tick.Source); docs/sources.md says what
each profile reads.

Layout: `settings` (where things are in Prometheus: profiles), `promql` (the few queries of a
cycle, pure), `matrix` + `facts` + `parse` (responses -> Snapshot, pure), `prometheus_connect` (the
clients, one query and its errors), `prometheus_cycle` (a cycle's queries sent and their
answers read, for every source that reads Prometheus), `query_pool` (a cycle's queries in
flight together), `prometheus` (the source: the clock, the error counters). The
cadvisor-rest profile, for Docker hosts whose cAdvisor Prometheus does not scrape: `cadvisor`
(the REST calls), `cadvisor_info` (its payloads, pure), `cpu_counter` (cumulative counters ->
cores per interval, pure), `cadvisor_snapshot` (the join, pure) and `cadvisor_source` (the
source). `docker_labels` reads policyd's markers from Docker labels; the docker-stats profile
is `docker_poll` (the engines' stats) and `docker_stats` (the source). The Kubernetes backend's
source: `kubernetes_pod_facts` (the pod and node lists), `kubernetes_snapshot` (the join, pure),
`kubernetes_pods` (the source) and `kubernetes_pod_watch` (pods starting and stopping).
Sources may import the engine, the model and the tick, never actuators, the simulator,
the daemon or the CLI.
"""

from policyd.sources.errors import SourceError
from policyd.sources.parse import Parsed, parse_cycle
from policyd.sources.promql import CycleQueries, build_queries
from policyd.sources.settings import (
    MarkerLabels,
    Matcher,
    SourceSettings,
    cadvisor_docker,
    kubernetes,
    process,
)

__all__ = [
    "CycleQueries",
    "MarkerLabels",
    "Matcher",
    "Parsed",
    "SourceError",
    "SourceSettings",
    "build_queries",
    "cadvisor_docker",
    "kubernetes",
    "parse_cycle",
    "process",
]
