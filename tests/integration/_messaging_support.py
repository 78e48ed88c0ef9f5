"""Helpers for the messaging integration tests (``test_messages_*.py``)."""

from __future__ import annotations

from typing import Any

import keepgoing
from keepgoing._history import events as ev

from ._support import of_type

__all__ = ["count_in_history", "waiting_for_message"]


def count_in_history(
    client: keepgoing.Client, workflow_id: str, kind: type[ev.Event], **fields: Any
) -> int:
    """How many events of ``kind`` (with ``fields``) the newest run of ``workflow_id`` has."""
    try:
        history = client.history(workflow_id)
    except keepgoing.RunNotFoundError:
        return 0
    return len(of_type(history, kind, **fields))


def waiting_for_message(
    client: keepgoing.Client, workflow_id: str, name: str, count: int = 1
) -> bool:
    """True once the run has started its ``count``-th wait for a message called ``name``."""
    return count_in_history(client, workflow_id, ev.MessageWaitStarted, name=name) >= count
