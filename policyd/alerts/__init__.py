"""policyd's own alerts to Alertmanager: migrations as events, failed actions as states.

`payload` builds the alerts (pure), `client` posts them (requests), `alerter` decides when to
send, re-send and resolve them from each tick's `Outcome`. This layer reads the tick's outcome
and the model; it never acts on the cluster and never raises into the daemon.

    alerter = Alerter(AlertSettings(url="http://127.0.0.1:9093"))
    alerter.on_outcome(tick(source, policy, actuator), now=snapshot_time)
"""

from policyd.alerts.alerter import Alerter
from policyd.alerts.client import AlertmanagerClient, PostResult
from policyd.alerts.payload import ACTION_FAILED, MIGRATION, Alert, rfc3339, to_json
from policyd.alerts.settings import AlertSettings

__all__ = [
    "ACTION_FAILED",
    "MIGRATION",
    "Alert",
    "AlertSettings",
    "Alerter",
    "AlertmanagerClient",
    "PostResult",
    "rfc3339",
    "to_json",
]
