"""``Backend``: the one transport boundary behind :class:`~keepgoing.Client`.

A backend carries the client's requests to the store itself
(:class:`~keepgoing._client.store_backend.StoreBackend`) or to a server over
HTTP (:class:`~keepgoing._client.http_backend.HttpBackend`), as an httpx
transport carries a client's requests. It takes one record per call
(:mod:`keepgoing._client.requests`) and answers with the client's own types.
What each call does, and what it raises, is documented once, on
:class:`~keepgoing.Client`; what the client does around it (waiting for a
result with ``wait=True``, turning an ended run into its result or error,
resolving a workflow to its name) is written once there too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from keepgoing._client.requests import (
        AuditQuery,
        EventSend,
        MessageSend,
        RunHere,
        RunQuery,
        RunRef,
        Start,
        StartMany,
    )
    from keepgoing._client.runs import RunsPage, WorkflowRun, WorkflowRunHandle
    from keepgoing._history.events import Event
    from keepgoing._store.inspect_protocol import RunFilter
    from keepgoing._store.protocol import Store
    from keepgoing._store.records import AuditEntry, WorkerRecord
    from keepgoing._views.catalog import StartWarning
    from keepgoing._views.operations import Operation

__all__ = ["Backend"]


class Backend(Protocol):
    """Where :class:`~keepgoing.Client` sends its requests."""

    @property
    def store(self) -> Store: ...

    def close(self) -> None: ...

    def start(self, request: Start) -> tuple[WorkflowRunHandle, StartWarning | None]:
        """The new run, and the warning for a name or queue nothing has served (or None)."""
        ...

    def wait(self, run: RunRef, timeout: float | None) -> WorkflowRun:
        """The run once it has ended or is blocked (following continue-as-new)."""
        ...

    def start_many(self, request: StartMany) -> tuple[list[WorkflowRunHandle], StartWarning | None]:
        """The runs, all started in one commit (or none), and the name's warning."""
        ...

    def start_and_wait(self, request: Start, timeout: float | None) -> WorkflowRun:
        """:meth:`start`, then :meth:`wait` for the new run, as one call."""
        ...

    def run_here(self, request: RunHere) -> WorkflowRun:
        """The run, ended, after running its tasks in this process."""
        ...

    def get_run(self, run: RunRef) -> WorkflowRun: ...

    def history(self, run: RunRef) -> list[Event]: ...

    def list_runs(self, query: RunQuery) -> list[WorkflowRun]: ...

    def page_runs(
        self, filters: RunFilter, *, limit: int = 50, cursor: str | None = None
    ) -> RunsPage: ...

    def count_runs(self, filters: RunFilter) -> dict[str, int]: ...

    def count_trouble(self, filters: RunFilter) -> dict[str, int]: ...

    def attempt_logs(
        self,
        workflow_id: str,
        *,
        run_id: str | None = None,
        cmd: int | None = None,
        attempt: int | None = None,
    ) -> list[dict[str, Any]]: ...

    def kill_worker(self, worker_id: str, *, via: str = "api") -> dict[str, Any]: ...

    def get_operation(self, operation_id: str) -> Operation: ...

    def list_reviews(self, limit: int) -> list[Operation]: ...

    def review_operation(
        self, operation_id: str, decision: str, result: Any, reason: str | None
    ) -> Operation: ...

    def send_message(self, message: MessageSend) -> str: ...

    def publish_event(self, event: EventSend) -> str: ...

    def cancel(self, run: RunRef, reason: str | None) -> None: ...

    def unblock(self, run: RunRef) -> WorkflowRun: ...

    def lineage(self, workflow_id: str) -> dict[str, Any]: ...

    def get_status(self, workflow_id: str, key: str, wait: float | None) -> tuple[bool, Any]: ...

    def resume(self, workflow_id: str, revision: int | None) -> WorkflowRunHandle: ...

    def fork(
        self,
        source_id: str,
        from_step: int,
        input: Any,
        workflow_id: str | None,
        revision: int | None,
        wait_for_check: bool = False,
    ) -> WorkflowRunHandle: ...

    def list_audit(self, query: AuditQuery) -> list[AuditEntry]: ...

    def list_workers(self) -> list[WorkerRecord]: ...

    def list_queues(self) -> list[dict[str, Any]]: ...
