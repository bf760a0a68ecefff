"""The JSON of a Kubernetes client's raw response: what every call made with
`_preload_content=False` reads (the client's own decoding builds model objects, slower and
lossy for the fields policyd reads as plain JSON)."""

from __future__ import annotations

import json
from typing import Any


def body(response: Any) -> dict[str, Any]:
    """The decoded body of `response` (its `data`, bytes or text, or an already decoded
    object); {} when it has none (a 200 or 201 with an empty body)."""
    data = getattr(response, "data", response)
    if isinstance(data, bytes | str):
        return dict(json.loads(data)) if data.strip() else {}
    return dict(data) if data is not None else {}
