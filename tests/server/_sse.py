"""Reading server-sent events in the tests: ``(event, id, data)`` as they arrive."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

import httpx


def events(
    response: httpx.Response | Iterable[str],
) -> Iterator[tuple[str, str | None, Any]]:
    """Each event of a streaming response (or of its lines, partly read already);
    comments (heartbeats) are skipped."""
    name, event_id, data = "message", None, []
    lines = response.iter_lines() if isinstance(response, httpx.Response) else response
    for line in lines:
        if line == "":
            if data:
                yield name, event_id, json.loads("\n".join(data))
            name, event_id, data = "message", None, []
        elif line.startswith(":"):
            continue
        else:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "id":
                event_id = value
            elif field == "data":
                data.append(value)
