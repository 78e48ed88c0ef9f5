"""Deterministic time, randomness and ids; thin shims over the current runtime."""

from __future__ import annotations

import random as _random
import uuid as _uuid
from datetime import UTC, datetime

from keepgoing._clock import system_clock
from keepgoing._runtime.context import current_instance, current_task_context

__all__ = ["current_workflow_id", "now", "operation_id", "random", "uuid4"]


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
