"""Where code is running: inside a workflow (its loop) or inside a task attempt."""

from __future__ import annotations

import contextvars
from dataclasses import dataclass

from keepgoing._runtime.instance import WorkflowInstance
from keepgoing._runtime.loop import current_loop

__all__ = ["TaskContext", "current_instance", "current_task_context", "task_context"]


@dataclass(frozen=True)
class TaskContext:
    """The attempt a task body is running as."""

    run_id: str
    workflow_id: str
    cmd: int
    name: str
    attempt: int
    worker_id: str
    #: Set when the step carries on an earlier step's operation (a reviewed retry).
    operation: str | None = None

    @property
    def operation_id(self) -> str:
        return self.operation or f"op-{self.run_id}-{self.cmd}"


task_context: contextvars.ContextVar[TaskContext | None] = contextvars.ContextVar(
    "keepgoing_task_context", default=None
)


def current_instance() -> WorkflowInstance | None:
    """The workflow instance whose code is running now, or None."""
    loop = current_loop()
    return loop.instance if loop is not None else None


def current_task_context() -> TaskContext | None:
    return task_context.get()
