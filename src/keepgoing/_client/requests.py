"""What :class:`~keepgoing.Client` hands its backend: one small record per kind of call.

The client's methods (documented once, on ``Client``) take the caller's
arguments, resolve what both backends need resolved (a workflow's name, a
run handle, waiting for the result, the outcome of an ended run) and pass
one of these records to the :class:`~keepgoing._client.backend.Backend`,
which carries it to the store or the server.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from keepgoing._workflow.workflow import WorkflowDefinition

__all__ = [
    "AuditQuery",
    "EventSend",
    "MessageSend",
    "RunHere",
    "RunQuery",
    "RunRef",
    "Start",
    "StartMany",
]


@dataclass(frozen=True)
class RunRef:
    """A run: the newest of ``workflow_id``, or the run ``run_id`` of it."""

    workflow_id: str
    run_id: str | None = None


@dataclass(frozen=True)
class Start:
    workflow: WorkflowDefinition[..., Any] | str
    input: Any
    workflow_id: str | None
    task_queue: str | None
    request_id: str | None
    strict: bool
    priority: int = 0


@dataclass(frozen=True)
class StartMany:
    """Runs of one workflow, one per input, started in one commit."""

    workflow: WorkflowDefinition[..., Any] | str
    inputs: Sequence[Any]
    workflow_ids: Sequence[str] | None
    request_ids: Sequence[str] | None
    task_queue: str | None
    strict: bool
    priority: int = 0


@dataclass(frozen=True)
class RunHere:
    workflow: WorkflowDefinition[..., Any]
    input: Any
    workflow_id: str | None
    restart: bool


@dataclass(frozen=True)
class RunQuery:
    workflow_name: str | None
    status: str | None
    limit: int
    offset: int
    created_after: float | None
    created_before: float | None


@dataclass(frozen=True)
class MessageSend:
    run: RunRef
    name: str
    payload: Any


@dataclass(frozen=True)
class EventSend:
    event_type: str
    correlation_id: str
    payload: Any
    event_id: str | None


@dataclass(frozen=True)
class AuditQuery:
    limit: int
    offset: int
    action: str | None
    workflow_id: str | None
