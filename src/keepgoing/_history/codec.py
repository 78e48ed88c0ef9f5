"""The JSON codec for history events; the format of golden files and exports."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from keepgoing._history import events as ev
from keepgoing._payload import dumps, loads
from keepgoing._payload import encode as encode_json

__all__ = [
    "decode",
    "decode_many",
    "dumps_history",
    "encode",
    "encode_at",
    "loads_history",
    "plain",
]

_CLASSES: dict[str, type[ev.Event]] = {
    cls.__name__: cls
    for cls in (
        ev.WorkflowStarted,
        ev.ActivationCompleted,
        ev.TaskScheduled,
        ev.TaskAttemptFailed,
        ev.TaskCompleted,
        ev.TaskFailed,
        ev.TimerStarted,
        ev.TimerCancelled,
        ev.TimerFired,
        ev.WorkflowCompleted,
        ev.WorkflowFailed,
        ev.WorkflowBlocked,
        ev.MessageReceived,
        ev.MessageWaitStarted,
        ev.MessageSent,
        ev.MessageDelivered,
        ev.ChildStarted,
        ev.ChildRunStarted,
        ev.ChildEnded,
        ev.EventWaitStarted,
        ev.EventReceived,
        ev.EventWaitCancelled,
        ev.TaskCancelRequested,
        ev.CancelRequested,
        ev.WorkflowCancelled,
        ev.WorkflowContinuedAsNew,
        ev.MemoryCommitted,
        ev.PatchMarked,
        ev.ReviewAbandoned,
        ev.StatusSet,
    )
}


_FIELDS: dict[type[ev.Event], tuple[str, ...]] = {
    cls: tuple(f.name for f in dataclasses.fields(cls)) for cls in _CLASSES.values()
}


#: Fields added after histories were first recorded: left out while unset, so older
#: histories and golden files encode exactly as before.
_OMITTED_WHEN_NONE = frozenset(
    {
        (ev.TaskScheduled, "task_queue"),
        (ev.TaskScheduled, "operation_id"),
        (ev.TaskScheduled, "limits"),
        (ev.WorkflowStarted, "seed"),
        (ev.WorkflowStarted, "reused_upto"),
        (ev.WorkflowStarted, "reused_by"),
        (ev.TaskAttemptFailed, "cause"),
        (ev.TaskAttemptFailed, "actor"),
        (ev.TaskAttemptFailed, "via"),
    }
)


def encode(event: ev.Event) -> dict[str, Any]:
    """Return ``event`` as a JSON object with its class name under ``"type"``."""
    body: dict[str, Any] = {"type": type(event).__name__}
    for name in _FIELDS[type(event)]:
        value = getattr(event, name)
        if value is None and (type(event), name) in _OMITTED_WHEN_NONE:
            continue
        body[name] = dataclasses.asdict(value) if isinstance(value, ev.ErrorInfo) else value
    return body


def encode_at(event: ev.Event, seq: int, at: float) -> str:
    """JSON text of ``event`` placed at ``seq`` and time ``at`` (the store's hot path).

    Every store writes events with this, so every store refuses the same values.

    Raises:
        PayloadError: a field holds a value no store can carry (the message names it).
    """
    body = encode(event)
    body["seq"], body["at"] = seq, at
    return encode_json(body, f"the {body['type']} event")


def plain(event: ev.Event, seq: int = 0, at: float = 0.0) -> ev.Event:
    """``event`` as a store hands it back: decoded from the text :func:`encode_at` writes.

    Raises:
        PayloadError: as :func:`encode_at`.
    """
    return decode(loads(encode_at(event, seq, at)))


def decode(body: dict[str, Any]) -> ev.Event:
    """Rebuild an event from :func:`encode`'s output; unknown fields are an error."""
    data = dict(body)
    name = data.pop("type", None)
    cls = _CLASSES.get(str(name))
    if cls is None:
        raise ValueError(f"unknown history event type {name!r}")
    if isinstance(data.get("error"), dict):  # ErrorInfo is the only nested type
        data["error"] = ev.ErrorInfo(**data["error"])
    return cls(**data)


def decode_many(bodies: Iterable[dict[str, Any]]) -> list[ev.Event]:
    return [decode(body) for body in bodies]


def dumps_history(events: Iterable[ev.Event]) -> str:
    """A history as a JSON document: ``{"events": [...]}``, one event per line."""
    lines = ",\n  ".join(dumps(encode(e)) for e in events)
    return '{"events": [\n  ' + lines + "\n]}\n"


def loads_history(text: str | bytes) -> list[ev.Event]:
    doc = loads(text)
    bodies = doc["events"] if isinstance(doc, dict) else doc
    return decode_many(bodies)
