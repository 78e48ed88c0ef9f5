"""Public views of runs: what a client gets back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from keepgoing._history.events import ErrorInfo
from keepgoing._store.records import RunRecord

__all__ = ["WorkflowRun", "WorkflowRunHandle"]


class WorkflowRunHandle(NamedTuple):
    """Returned by ``trigger_workflow(..., wait=False)``: where to find the run."""

    workflow_name: str
    workflow_id: str
    run_id: str


@dataclass(frozen=True)
class WorkflowRun:
    """One run as a client sees it. ``status`` is running, blocked, completed,
    failed or cancelled; ``blocked_reason`` holds the determinism diff."""

    workflow_name: str
    workflow_id: str
    run_id: str
    status: str
    input: dict[str, Any]
    result: Any
    error: ErrorInfo | None
    task_queue: str
    code_version: str
    created_at: float
    updated_at: float
    ended_at: float | None
    blocked_reason: str | None

    @classmethod
    def from_record(cls, run: RunRecord) -> WorkflowRun:
        return cls(
            workflow_name=run.workflow_name,
            workflow_id=run.workflow_id,
            run_id=run.run_id,
            status=run.status,
            input=run.input,
            result=run.result,
            error=run.error,
            task_queue=run.task_queue,
            code_version=run.code_version,
            created_at=run.created_at,
            updated_at=run.updated_at,
            ended_at=run.ended_at,
            blocked_reason=run.blocked_reason,
        )

    @property
    def handle(self) -> WorkflowRunHandle:
        return WorkflowRunHandle(self.workflow_name, self.workflow_id, self.run_id)
