"""The process-wide registry of tasks and workflows, by name."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from keepgoing.errors import DuplicateNameError, WorkflowNotFoundError

if TYPE_CHECKING:
    from keepgoing._workflow.task import TaskDefinition
    from keepgoing._workflow.workflow import WorkflowDefinition

__all__ = ["Registry", "registry"]


class Registry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.tasks: dict[str, TaskDefinition[..., object]] = {}
        self.workflows: dict[str, WorkflowDefinition[..., object]] = {}
        #: Task name -> the queue its calls are sent to, when not the run's own (the
        #: per-task worker groups of a deploy; a worker reads ``KEEPGOING_TASK_QUEUES``).
        self.task_queues: dict[str, str] = {}

    def add_task(self, task: TaskDefinition[..., object]) -> None:
        with self._lock:
            _check_same_origin("task", task.name, self.tasks.get(task.name), task)
            self.tasks[task.name] = task

    def add_workflow(self, wf: WorkflowDefinition[..., object]) -> None:
        with self._lock:
            _check_same_origin("workflow", wf.name, self.workflows.get(wf.name), wf)
            self.workflows[wf.name] = wf

    def workflow(self, name: str) -> WorkflowDefinition[..., object]:
        try:
            return self.workflows[name]
        except KeyError:
            known = ", ".join(sorted(self.workflows)) or "none"
            raise WorkflowNotFoundError(
                f"no workflow named {name!r} is registered in this process (known: {known})"
            ) from None


def _check_same_origin(kind: str, name: str, old: object, new: object) -> None:
    """A name may be registered again from the same place (a re-import), never from another."""
    if old is None or old is new:
        return
    if getattr(old, "origin", None) != getattr(new, "origin", None):
        raise DuplicateNameError(
            f"the {kind} name {name!r} is defined twice: at {getattr(old, 'origin', '?')} and "
            f"at {getattr(new, 'origin', '?')}; pass name=... to one of them"
        )


registry = Registry()
