"""Server-sent events: the one way keepgoing writes a frame and the one way it reads them.

The server's run and history streams, and the model gateway's streamed chat
completions, write their frames with :func:`frame` (a JSON payload) or
:func:`raw_frame` (text as it is, such as ``[DONE]``); :func:`comment` and
:func:`opening` write the lines an ``EventSource`` skips or takes as its retry
delay. A provider's stream is read with :func:`events`. The format is the
``text/event-stream`` of the HTML standard: fields are ``name: value`` lines,
a blank line ends an event, a line starting with ``:`` is a comment.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

__all__ = ["KEEPALIVE", "comment", "events", "frame", "opening", "raw_frame"]


def raw_frame(data: str, *, event: str | None = None, event_id: float | None = None) -> bytes:
    """One event whose data is ``data`` as it is (one ``data:`` line per line of it)."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    if event is not None:
        head += f"event: {event}\n"
    body = "".join(f"data: {line}\n" for line in data.split("\n"))
    return f"{head}{body}\n".encode()


def frame(value: Any, *, event: str | None = None, event_id: float | None = None) -> bytes:
    """One event whose data is ``value`` as compact JSON."""
    return raw_frame(json.dumps(value, separators=(",", ":")), event=event, event_id=event_id)


def comment(text: str) -> bytes:
    """A comment line on its own (a keepalive): clients skip it."""
    return f": {text}\n\n".encode()


def opening(retry_ms: int, note: str) -> bytes:
    """A stream's first bytes: how long a client waits before it reconnects, and a note."""
    return f"retry: {retry_ms}\n: {note}\n\n".encode()


KEEPALIVE = comment("keepalive")


async def events(lines: AsyncIterable[str]) -> AsyncIterator[tuple[str, str]]:
    """``(event name, data)`` for each event of a stream's lines (name ``""`` when the
    event has none); comments, ids and events without data are skipped."""
    event = ""
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
    if data:
        yield event, "\n".join(data)
