"""policyd's own alerts to Alertmanager: migrations and missed deadlines as events, failed
actions and jobs at risk of missing their deadline as states.

`payload` builds the alerts (pure), `client` posts them (requests), `alerter` decides when to
send, re-send and resolve them from each tick's `Outcome`. This layer reads the tick's outcome
and the model; it never acts on the cluster and never raises into the daemon. The settings
are imported eagerly and load no HTTP client (the daemon's settings file holds them); the rest
is loaded on first use (PEP 562).

    alerter = Alerter(AlertSettings(url="http://127.0.0.1:9093"))
    alerter.on_outcome(tick(source, policy, actuator), now=snapshot_time)
"""

from typing import TYPE_CHECKING, Any

from policyd.alerts.settings import AlertmanagerSection, AlertSettings

if TYPE_CHECKING:
    from policyd.alerts.alerter import Alerter
    from policyd.alerts.client import AlertmanagerClient, PostResult
    from policyd.alerts.payload import ACTION_FAILED, MIGRATION, Alert, rfc3339, to_json

__all__ = [
    "ACTION_FAILED",
    "MIGRATION",
    "Alert",
    "AlertSettings",
    "Alerter",
    "AlertmanagerClient",
    "AlertmanagerSection",
    "PostResult",
    "rfc3339",
    "to_json",
]

_LAZY = {"Alerter": "alerter", "AlertmanagerClient": "client", "PostResult": "client",
         "ACTION_FAILED": "payload", "MIGRATION": "payload", "Alert": "payload",
         "rfc3339": "payload", "to_json": "payload"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module  # noqa: PLC0415

    return getattr(import_module(f"{__name__}.{module}"), name)
