"""``keepgoing.set_status``: progress a run publishes for a UI or another service.

The value is recorded as a ``StatusSet`` marker with the activation's commands,
and the store keeps the newest value per name in the same commit
(``_store/sql/recovery.py``). Replay produces the marker again and drops it, so
a value is published once, by the activation that first reached the call, and
a replay after a crash reads exactly what the run published before it.
"""

from __future__ import annotations

from typing import Any

from keepgoing._history import events as ev
from keepgoing._payload import encode, plain
from keepgoing._runtime.context import current_instance
from keepgoing.errors import PayloadError

__all__ = ["MAX_STATUS_BYTES", "MAX_STATUS_NAME", "check_status_name", "set_status"]

MAX_STATUS_NAME = 200
MAX_STATUS_BYTES = 64 * 1024


def check_status_name(key: object, what: str = "set_status()") -> str:
    """``key`` if it is a usable status key, else ``ValueError`` saying why."""
    if not isinstance(key, str) or not key.strip() or len(key) > MAX_STATUS_NAME:
        raise ValueError(
            f"{what} needs a key: a non-empty string of at most {MAX_STATUS_NAME} characters, "
            f"not {type(key).__name__} {key!r:.60}"
        )
    if not key.isprintable():
        raise ValueError(f"{what}: the status key {key!r} holds a control character")
    return key


def set_status(key: str, value: Any) -> None:
    """Publish ``value`` under ``key`` for this run: durable and replay-safe.

    ``Client.get_status(workflow_id, key)`` reads the newest value, the run
    page shows them, and ``GET /api/v1/runs/{id}/status`` serves them::

        keepgoing.set_status("progress", {"done": 3, "of": 5})

    Raises:
        RuntimeError: outside a workflow (a task's value is its return value).
        ValueError: ``key`` is empty, too long or holds a control character.
        PayloadError: ``value`` is not JSON every store can carry, or its JSON is
            larger than 64 KiB (the message names the problem).
    """
    instance = current_instance()
    if instance is None:
        raise RuntimeError(
            "set_status() works only inside a workflow; a task hands its progress back "
            "to its workflow as its result"
        )
    check_status_name(key)
    copy = plain(value, f"the value of status {key!r}")
    size = len(encode(copy, f"the value of status {key!r}").encode())
    if size > MAX_STATUS_BYTES:
        raise PayloadError(
            f"the value of status {key!r} is {size} bytes of JSON; at most "
            f"{MAX_STATUS_BYTES} are kept"
        )
    instance.mark(ev.StatusSet(name=key, value=copy))
