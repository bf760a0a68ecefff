"""Minimal JSON schemas for the Prometheus Operator's custom resources that deploy/kubernetes uses.

kubernetes-validate ships the schemas of the built-in kinds only; ServiceMonitor, PodMonitor and
PrometheusRule come from CRDs (monitoring.coreos.com/v1, installed by kube-prometheus-stack).
These schemas cover exactly the fields our manifests set, with the CRDs' types and duration
format, and reject any other field (`additionalProperties: false`), so a typo such as
`podTargetLabel` or `honourLabels` fails here instead of being pruned silently by the API server.
"""

from __future__ import annotations

from typing import Any

# The CRDs' pattern for durations (monitoring.coreos.com/v1 Duration).
DURATION = {"type": "string",
            "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?"
                       r"(([0-9]+)s)?(([0-9]+)ms)?)$"}
STRINGS = {"type": "array", "items": {"type": "string"}}
STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}


def _closed(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required),
            "additionalProperties": False}


LABEL_SELECTOR = _closed({
    "matchLabels": STRING_MAP,
    "matchExpressions": {"type": "array", "items": _closed(
        {"key": {"type": "string"}, "operator": {"enum": ["In", "NotIn", "Exists",
                                                          "DoesNotExist"]},
         "values": STRINGS}, ("key", "operator"))}})
NAMESPACE_SELECTOR = _closed({"any": {"type": "boolean"}, "matchNames": STRINGS})
RELABELING = _closed({
    "sourceLabels": STRINGS, "separator": {"type": "string"}, "targetLabel": {"type": "string"},
    "regex": {"type": "string"}, "modulus": {"type": "integer"},
    "replacement": {"type": "string"},
    "action": {"enum": ["replace", "keep", "drop", "hashmod", "labelmap", "labeldrop",
                        "labelkeep", "lowercase", "uppercase", "keepequal", "dropequal"]}})
ENDPOINT = {
    "port": {"type": "string"}, "path": {"type": "string"}, "scheme": {"enum": ["http", "https"]},
    "interval": DURATION, "scrapeTimeout": DURATION, "honorLabels": {"type": "boolean"},
    "relabelings": {"type": "array", "items": RELABELING},
    "metricRelabelings": {"type": "array", "items": RELABELING}}
METADATA = _closed({"name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
                    "namespace": {"type": "string"}, "labels": STRING_MAP,
                    "annotations": STRING_MAP}, ("name",))


def _resource(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return _closed({"apiVersion": {"const": "monitoring.coreos.com/v1"},
                    "kind": {"const": kind}, "metadata": METADATA, "spec": spec},
                   ("apiVersion", "kind", "metadata", "spec"))


SCHEMAS: dict[str, dict[str, Any]] = {
    "ServiceMonitor": _resource("ServiceMonitor", _closed({
        "selector": LABEL_SELECTOR, "namespaceSelector": NAMESPACE_SELECTOR,
        "jobLabel": {"type": "string"}, "targetLabels": STRINGS, "podTargetLabels": STRINGS,
        "endpoints": {"type": "array", "minItems": 1, "items": _closed(ENDPOINT)}},
        ("selector", "endpoints"))),
    "PodMonitor": _resource("PodMonitor", _closed({
        "selector": LABEL_SELECTOR, "namespaceSelector": NAMESPACE_SELECTOR,
        "jobLabel": {"type": "string"}, "podTargetLabels": STRINGS,
        "podMetricsEndpoints": {"type": "array", "minItems": 1, "items": _closed(ENDPOINT)}},
        ("selector", "podMetricsEndpoints"))),
    "PrometheusRule": _resource("PrometheusRule", _closed({
        "groups": {"type": "array", "minItems": 1, "items": _closed({
            "name": {"type": "string", "minLength": 1}, "interval": DURATION,
            "rules": {"type": "array", "items": {
                "allOf": [
                    _closed({"alert": {"type": "string"}, "record": {"type": "string"},
                             "expr": {"type": ["string", "integer"]}, "for": DURATION,
                             "keep_firing_for": DURATION, "labels": STRING_MAP,
                             "annotations": STRING_MAP}, ("expr",)),
                    {"oneOf": [{"required": ["alert"]}, {"required": ["record"]}]}]}}},
            ("name", "rules"))}}, ("groups",))),
}
