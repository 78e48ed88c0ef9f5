"""Deterministic time, randomness and ids; thin shims over the current runtime."""

from __future__ import annotations

import random as _random
import uuid as _uuid
from datetime import UTC, datetime

from keepgoing._clock import system_clock
from keepgoing._runtime.context import current_instance, current_task_context

__all__ = [
    "current_workflow_id",
    "deprecate_patch",
    "now",
    "operation_id",
    "patched",
    "random",
    "uuid4",
]


def now() -> datetime:
    """The current time: inside a workflow, the activation's recorded time (UTC).

    Replays return the same value, so workflow code may branch on it.
    """
    instance = current_instance()
    moment = instance.loop.time() if instance is not None else system_clock.now()
    return datetime.fromtimestamp(moment, UTC)


def random() -> float:
    """A float in [0, 1): inside a workflow, from a generator seeded by the run id."""
    instance = current_instance()
    return instance.random() if instance is not None else _random.random()


def uuid4() -> _uuid.UUID:
    """A version-4 UUID: inside a workflow, the same one on every replay."""
    instance = current_instance()
    return instance.uuid4() if instance is not None else _uuid.uuid4()


def current_workflow_id() -> str:
    """The workflow id of the running workflow (or of the task's workflow).

    Raises:
        RuntimeError: outside a workflow and outside a task.
    """
    instance = current_instance()
    if instance is not None:
        return instance.workflow_id
    ctx = current_task_context()
    if ctx is not None:
        return ctx.workflow_id
    raise RuntimeError("current_workflow_id() is only available inside a workflow or a task")


def operation_id() -> str:
    """A stable id for this step of this run, the same on every retry.

    Use it as the idempotency key of external writes, and record it before
    the request so a retry can look the operation up.

    Raises:
        RuntimeError: outside a task.
    """
    ctx = current_task_context()
    if ctx is None:
        raise RuntimeError("operation_id() is only available inside a task attempt")
    return ctx.operation_id


def _check_change_id(change_id: object, what: str) -> str:
    if not isinstance(change_id, str) or not change_id.strip() or len(change_id) > 200:
        raise ValueError(
            f"{what}() needs a change id: a non-empty string of at most 200 characters"
        )
    return change_id


def patched(change_id: str) -> bool:
    """Whether this run takes the new branch of the code change ``change_id``.

    True on new runs, and on runs that reach this point after the change was
    deployed (a ``PatchMarked`` event records it in history). False while
    replaying a history that passed this point before the change, so those runs
    keep the old branch. The first answer holds for the rest of the run. Outside
    a workflow (a task, a plain call) it is True::

        if keepgoing.patched("send-receipt"):
            await send_receipt(order)
        else:
            await email_receipt(order)

    Raises:
        ValueError: ``change_id`` is not a non-empty string.
    """
    _check_change_id(change_id, "patched")
    instance = current_instance()
    return instance.patched(change_id) if instance is not None else True


def deprecate_patch(change_id: str) -> None:
    """Say that no run needs the old branch of ``change_id`` any more.

    Replace ``if patched(id): new() else: old()`` by ``deprecate_patch(id); new()``
    once ``keepgoing runs --needs-patch ID`` lists no run: histories with or
    without the marker replay, and new runs still record it, so older workers
    that have the ``patched()`` check replay them too. Remove the call later.

    Raises:
        ValueError: ``change_id`` is not a non-empty string.
    """
    _check_change_id(change_id, "deprecate_patch")
    instance = current_instance()
    if instance is not None:
        instance.deprecate_patch(change_id)
