"""``Client``: the one entry point for callers outside workflows.

It delegates to a backend: the store directly (``store=...``, the default) or,
once a server is configured, HTTP. Both offer the same methods.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from keepgoing._api.runs import WorkflowRun, WorkflowRunHandle
from keepgoing._api.store_client import StoreClient
from keepgoing._api.workflow import WorkflowDefinition
from keepgoing._history.events import Event
from keepgoing._store.protocol import Store
from keepgoing._store.records import AuditEntry, WorkerRecord
from keepgoing.errors import ConfigurationError

if TYPE_CHECKING:
    from keepgoing._api.http_client import HttpClient

__all__ = ["Client"]


class Client:
    """Start runs, wait for results, read history.

    Args:
        url: the server URL (``KEEPGOING_URL``), e.g. ``http://127.0.0.1:8711``.
            With a URL the client talks HTTP: the same methods, except
            ``run_workflow`` (which runs tasks here and needs the store).
            Network failures and 5xx answers are retried with backoff on
            calls that are safe to repeat; message sends are not repeated.
        token: the server token (``KEEPGOING_TOKEN``); the server stamps the
            sender of messages, and the actor in its audit log, from it.
        store: a store URL such as ``"sqlite:///runs.db"`` or a :class:`Store`;
            default ``KEEPGOING_STORE``, else ``sqlite:///.keepgoing/keepgoing.db``.

    A run's ``workflow_id`` is unique among runs that have not ended: starting
    an id that is running or blocked raises ``WorkflowAlreadyRunningError``;
    an id whose runs have all ended may be started again (with a new run id).
    """

    def __init__(
        self, url: str | None = None, *, token: str | None = None, store: str | Store | None = None
    ) -> None:
        if url and store is not None:
            raise ConfigurationError("pass Client(url=...) or Client(store=...), not both")
        url = url or (None if store is not None else os.environ.get("KEEPGOING_URL"))
        self._backend: StoreClient | HttpClient
        if url:
            from keepgoing._api.http_client import HttpClient  # noqa: PLC0415 (httpx is slow to import)

            self._backend = HttpClient(url, token or os.environ.get("KEEPGOING_TOKEN"))
        else:
            self._backend = StoreClient(store)

    @property
    def store(self) -> Store:
        """The store, in store mode (``ConfigurationError`` in HTTP mode)."""
        store: Store = self._backend.store
        return store

    def close(self) -> None:
        """Release connections. The client cannot be used afterwards."""
        self._backend.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def trigger_workflow(
        self,
        workflow_or_name: WorkflowDefinition[..., Any] | str,
        input: Any = None,
        *,
        workflow_id: str | None = None,
        task_queue: str | None = None,
        wait: bool = False,
        timeout: float | None = None,
    ) -> Any:
        """Start a run; return its :class:`WorkflowRunHandle`, or with ``wait=True`` its result.

        ``input`` maps parameter names to JSON values. The default
        ``workflow_id`` is ``<name>-<uuid>``.

        Raises:
            WorkflowAlreadyRunningError: ``workflow_id`` has a run that has not ended.
            WorkflowNotFoundError: a name that no worker of this store has served.
            PayloadError: ``input`` is not JSON (the message names the value).
            WorkflowFailedError: with ``wait=True``, the run failed.
        """
        return self._backend.trigger_workflow(
            workflow_or_name,
            input,
            workflow_id=workflow_id,
            task_queue=task_queue,
            wait=wait,
            timeout=timeout,
        )

    def run_workflow(
        self,
        workflow: WorkflowDefinition[..., Any],
        input: Any = None,
        *,
        workflow_id: str | None = None,
    ) -> Any:
        """Run ``workflow`` with its tasks in this process, coordinated through the store.

        Blocks until the run ends. Every step is recorded in the store, so if
        this process dies, calling again with the same ``workflow_id`` resumes
        the run from its last finished step.
        """
        return self._backend.run_workflow(workflow, input, workflow_id=workflow_id)

    def result(
        self,
        workflow_id: str | WorkflowRunHandle,
        *,
        run_id: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Wait for the run to end and return its result.

        Raises:
            WorkflowFailedError: the run failed or was cancelled.
            WorkflowBlockedError: the run is blocked on a determinism error.
            TimeoutError: ``timeout`` seconds passed first.
        """
        return self._backend.result(workflow_id, run_id=run_id, timeout=timeout)

    def get_run(self, workflow_id: str, *, run_id: str | None = None) -> WorkflowRun:
        """The newest run of ``workflow_id`` (or the run ``run_id``).

        Raises:
            RunNotFoundError: no such run.
        """
        return self._backend.get_run(workflow_id, run_id=run_id)

    def history(self, workflow_id: str, *, run_id: str | None = None) -> list[Event]:
        """Every event of the run, in order."""
        return self._backend.history(workflow_id, run_id=run_id)

    def list_runs(
        self,
        *,
        workflow: str | WorkflowDefinition[..., Any] | None = None,
        status: str | None = None,
        limit: int = 50,
        offset: int = 0,
        created_after: float | None = None,
        created_before: float | None = None,
    ) -> list[WorkflowRun]:
        """Runs, newest first, optionally of one workflow and one status, and created
        in ``[created_after, created_before)`` (UNIX seconds)."""
        return self._backend.list_runs(
            workflow=workflow,
            status=status,
            limit=limit,
            offset=offset,
            created_after=created_after,
            created_before=created_before,
        )

    def send_workflow_message(
        self, workflow_id: str, name: str, payload: Any = None, *, run_id: str | None = None
    ) -> str:
        """Send a message to a running workflow; returns the message id.

        The payload must be JSON and at most 256 KiB. In store mode the sender
        is ``sender_kind="user"`` with ``KEEPGOING_USER`` or the OS login.
        Every send is written to the audit log.

        Raises:
            PayloadError: the payload is not JSON or too large; nothing is stored.
            RunNotFoundError: no such workflow.
            WorkflowNotRunningError: the workflow is not running.
        """
        return self._backend.send_workflow_message(workflow_id, name, payload, run_id=run_id)

    def publish_event(
        self,
        event_type: str,
        correlation_id: str,
        payload: Any = None,
        *,
        event_id: str | None = None,
    ) -> str:
        """Publish an external event for the runs waiting on its type and correlation id.

        Stored durably and de-duplicated by ``event_id``; an event published
        before a wait starts is matched when it does. Returns the event id.
        """
        return self._backend.publish_event(event_type, correlation_id, payload, event_id=event_id)

    def cancel_workflow(
        self, workflow_id: str, reason: str | None = None, *, run_id: str | None = None
    ) -> None:
        """Cancel a running workflow (recorded in its history and the audit log).

        Raises:
            WorkflowNotRunningError: the run has already ended; nothing changes.
        """
        self._backend.cancel_workflow(workflow_id, reason, run_id=run_id)

    def lineage(self, workflow_id: str) -> dict[str, Any]:
        """``{"run": ..., "parent": ... or None, "children": [...]}`` as :class:`WorkflowRun`."""
        return self._backend.lineage(workflow_id)

    def list_audit(
        self,
        *,
        limit: int = 100,
        offset: int = 0,
        action: str | None = None,
        workflow_id: str | None = None,
    ) -> list[AuditEntry]:
        """Audit entries, newest first."""
        return self._backend.list_audit(
            limit=limit, offset=offset, action=action, workflow_id=workflow_id
        )

    def list_workers(self) -> list[WorkerRecord]:
        """The workers registered with the store (a worker deregisters when it stops)."""
        return self._backend.list_workers()

    def list_queues(self) -> list[dict[str, Any]]:
        """Every queue with work or a worker: ``queue``, ``depth`` (runnable runs plus
        ready tasks), ``runnable_runs``, ``ready_tasks``, ``delayed_tasks``,
        ``running_tasks`` and ``workers`` (how many serve it)."""
        return self._backend.list_queues()
