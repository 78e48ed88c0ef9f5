"""Public views of runs: what a client gets back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from keepgoing._history.events import ErrorInfo
from keepgoing._store.records import RunRecord
from keepgoing._store.trouble import Marker, Trouble, markers, run_state
from keepgoing._views.waiting import Served, waiting_for
from keepgoing.errors import WorkflowBlockedError, WorkflowCancelledError, WorkflowFailedError

__all__ = ["RunsPage", "WorkflowRun", "WorkflowRunHandle", "outcome"]


class WorkflowRunHandle(NamedTuple):
    """Returned by ``trigger_workflow(..., wait=False)``: where to find the run."""

    workflow_name: str
    workflow_id: str
    run_id: str
    #: True: a singleton's ``on_conflict="skip"`` found this run of its key open,
    #: and nothing was started.
    existing: bool = False


@dataclass(frozen=True)
class WorkflowRun:
    """One run as a client sees it. ``status`` is running, blocked, completed,
    failed or cancelled; ``blocked_reason`` holds the determinism diff.

    A ``queued`` run waits for a concurrency slot of its workflow (``waiting_for``
    says which, and how many are held).

    ``code_versions`` are the versions of the code (hashes of the workflow's
    source file) that have run it, oldest first. ``waiting_for`` says what a
    running run waits for that is not there, such as "waiting for a worker
    that serves score_batch"; None otherwise. ``group_revision`` is the revision of
    the deployed worker group of its queue when it started (None: no group).

    ``trouble`` counts what went wrong so far: attempts lost with their worker,
    attempts retried, attempts refused for a rate limit, and the steps waiting
    for a review decision now. ``state`` is ``waiting_for_review`` for a running
    run that waits for a reviewer, else ``status``; ``markers`` says the trouble
    in words ("worker lost x2"), as the UI and ``keepgoing runs`` show it.
    """

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
    code_versions: tuple[str, ...] = ()
    waiting_for: str | None = None
    group_revision: int | None = None
    trouble: Trouble = field(default_factory=Trouble)
    #: The schedule that started it and the slot (UTC seconds) it started for, if any.
    schedule_id: str | None = None
    schedule_slot: float | None = None
    #: Higher first: claims order by age less a minute per point.
    priority: int = 0

    @property
    def state(self) -> str:
        return run_state(self.status, self.trouble)

    @property
    def markers(self) -> list[Marker]:
        return markers(self.status, self.trouble)

    @classmethod
    def from_record(cls, run: RunRecord, served: Served | None = None) -> WorkflowRun:
        """``served``: what live workers serve and which queues are known, to fill
        ``waiting_for``."""
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
            code_versions=run.code_versions,
            waiting_for=waiting_for(run, served),
            priority=run.priority,
            group_revision=run.group_revision,
            trouble=run.trouble,
        )

    @property
    def handle(self) -> WorkflowRunHandle:
        return WorkflowRunHandle(self.workflow_name, self.workflow_id, self.run_id)


@dataclass(frozen=True)
class RunsPage:
    """One page of runs, newest first; pass ``next_cursor`` back for the next page
    (None on the last one)."""

    runs: list[WorkflowRun]
    next_cursor: str | None = None


def outcome(run: WorkflowRun) -> Any:
    """The result of an ended run, or the error that says why there is none."""
    if run.status == "completed":
        return run.result
    if run.status == "blocked":
        raise WorkflowBlockedError(f"run {run.run_id} is blocked:\n{run.blocked_reason}")
    error = run.error
    kind = WorkflowCancelledError if run.status == "cancelled" else WorkflowFailedError
    raise kind(
        run.run_id,
        error.type if error else run.status,
        error.message if error else f"the run was {run.status}",
    )
