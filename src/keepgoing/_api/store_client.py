"""The client's store mode: start runs, wait for results and read history from the store."""

from __future__ import annotations

import getpass
import os
import re
import uuid
from typing import Any

from keepgoing._api.messages import check_name
from keepgoing._api.portal import Portal
from keepgoing._api.queues import queue_summary
from keepgoing._api.registry import registry
from keepgoing._api.runs import WorkflowRun, WorkflowRunHandle
from keepgoing._api.workflow import WorkflowDefinition
from keepgoing._clock import system_clock
from keepgoing._history.events import Event
from keepgoing._payload import check_json, check_message_payload
from keepgoing._store.protocol import Store
from keepgoing._store.records import (
    TERMINAL,
    AuditEntry,
    CancelRequest,
    EventRequest,
    MessageRequest,
    RunRecord,
    StartRequest,
    WorkerRecord,
)
from keepgoing._store.url import store_from_url
from keepgoing._worker.inprocess import drive, outcome
from keepgoing._worker.settings import WorkerSettings
from keepgoing._worker.worker import Worker
from keepgoing.errors import (
    PayloadError,
    RunNotFoundError,
    WorkflowNotFoundError,
)

__all__ = ["StoreClient"]

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,199}$")
_STATUSES = ("running", "blocked", "completed", "failed", "cancelled", "continued")
DEFAULT_QUEUE = "default"


class StoreClient:
    """:class:`keepgoing.Client` when it talks to the store directly."""

    def __init__(self, store: str | Store | None = None) -> None:
        self._store = store if isinstance(store, Store) else store_from_url(store)
        self._portal = Portal()
        try:
            self._portal.call(self._store.open())
        except BaseException:
            self._portal.close()
            raise

    @property
    def store(self) -> Store:
        return self._store

    def close(self) -> None:
        """Close the store connection. The client cannot be used afterwards."""
        try:
            self._portal.call(self._store.close())
        finally:
            self._portal.close()

    # -- starting runs ----------------------------------------------------------
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
            PayloadError: ``input`` is not JSON (the message names the value).
            WorkflowFailedError: with ``wait=True``, the run failed.
        """
        handle = self._portal.call(
            self._start(workflow_or_name, input, workflow_id, task_queue or DEFAULT_QUEUE)
        )
        return self.result(handle, timeout=timeout) if wait else handle

    async def _start(
        self,
        workflow_or_name: WorkflowDefinition[..., Any] | str,
        value: Any,
        workflow_id: str | None,
        queue: str,
    ) -> WorkflowRunHandle:
        name, inputs, version = _inputs(workflow_or_name, value)
        if not isinstance(workflow_or_name, WorkflowDefinition) and name not in registry.workflows:
            await self._check_known(name, queue)
        run_id = uuid.uuid4().hex
        workflow_id = _check_id(workflow_id, "workflow_id") if workflow_id else f"{name}-{run_id}"
        run = await self._store.start_run(
            StartRequest(
                run_id=run_id,
                workflow_id=workflow_id,
                workflow_name=name,
                input=inputs,
                task_queue=_check_id(queue, "task_queue"),
                code_version=version,
                now=system_clock.now(),
            )
        )
        return WorkflowRunHandle(run.workflow_name, run.workflow_id, run.run_id)

    async def _check_known(self, name: str, queue: str) -> None:
        known = await self._store.known_workflows()
        if name in known:
            return
        names = ", ".join(sorted(known)) or "none yet"
        raise WorkflowNotFoundError(
            f"no workflow named {name!r} is defined in this process or has been served by "
            f"a worker of this store (known: {names}); check the name, start a worker for "
            f"its file once, or pass the @workflow object itself"
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
        if not isinstance(workflow, WorkflowDefinition):
            raise TypeError(f"run_workflow needs a @workflow, not {type(workflow).__name__}")
        return self._portal.call(self._run_here(workflow, input, workflow_id))

    async def _run_here(
        self, workflow: WorkflowDefinition[..., Any], value: Any, workflow_id: str | None
    ) -> Any:
        run = await self._store.find_run(workflow_id) if workflow_id else None
        if run is None or run.status in TERMINAL:
            queue = f"local.{uuid.uuid4().hex[:12]}"
            handle = await self._start(workflow, value, workflow_id, queue)
            run = await self._store.get_run(handle.run_id)
            assert run is not None
        settings = WorkerSettings.from_env(queues=(run.task_queue,), concurrency=16)
        worker = Worker(self._store, settings=settings)
        try:
            ended = await drive(worker, run.run_id, settle_children=True)
        finally:
            await worker.stop_local()
            await self._store.release_tasks(worker.worker_id, system_clock.now())
        return outcome(ended)

    # -- reading ----------------------------------------------------------------------
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
        if isinstance(workflow_id, WorkflowRunHandle):
            handle: WorkflowRunHandle = workflow_id
            return outcome(self._portal.call(self._wait(handle[1], handle[2], timeout)))
        return outcome(self._portal.call(self._wait(workflow_id, run_id, timeout)))

    async def _wait(self, workflow_id: str, run_id: str | None, timeout: float | None) -> RunRecord:
        deadline = None if timeout is None else system_clock.monotonic() + timeout
        pause = 0.001
        while True:
            run = await self._find(workflow_id, run_id)
            if run.status == "continued" and run.continued_to:
                run_id = run.continued_to  # follow continue_as_new to the newest run
                continue
            if run.status in TERMINAL or run.status == "blocked":
                return run
            left = None if deadline is None else deadline - system_clock.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(f"run {run.run_id} of {workflow_id!r} is still {run.status}")
            await self._store.wait_for_change(pause if left is None else min(pause, left))
            pause = min(pause * 2, 0.5)

    def get_run(self, workflow_id: str, *, run_id: str | None = None) -> WorkflowRun:
        """The newest run of ``workflow_id`` (or the run ``run_id``).

        Raises:
            RunNotFoundError: no such run.
        """
        return WorkflowRun.from_record(self._portal.call(self._find(workflow_id, run_id)))

    def history(self, workflow_id: str, *, run_id: str | None = None) -> list[Event]:
        """Every event of the run, in order."""

        async def read() -> list[Event]:
            run = await self._find(workflow_id, run_id)
            return await self._store.read_history(run.run_id)

        return self._portal.call(read())

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
        if status is not None and status not in _STATUSES:
            raise ValueError(f"status must be one of {', '.join(_STATUSES)}, not {status!r}")
        if not 1 <= limit <= 1000 or offset < 0:
            raise ValueError("limit must be 1..1000 and offset at least 0")
        name = workflow.name if isinstance(workflow, WorkflowDefinition) else workflow
        runs = self._portal.call(
            self._store.search_runs(
                workflow_name=name,
                status=status,
                created_after=created_after,
                created_before=created_before,
                limit=limit,
                offset=offset,
            )
        )
        return [WorkflowRun.from_record(r) for r in runs]

    # -- messages, events, cancellation ------------------------------------------------
    def send_workflow_message(
        self, workflow_id: str, name: str, payload: Any = None, *, run_id: str | None = None
    ) -> str:
        """Send a message to a running workflow; returns the message id.

        The sender is ``sender_kind="user"`` with ``KEEPGOING_USER`` or the OS
        login as ``sender_id``. Every send is written to the audit log.

        Raises:
            PayloadError: ``payload`` is not JSON or is over 256 KiB (nothing is stored).
            RunNotFoundError: no such workflow.
            WorkflowNotRunningError: the workflow is not running.
        """
        _check_id(workflow_id, "workflow_id")
        check_name(name, "the message name")
        check_message_payload(payload, f"the payload of message {name!r}")
        request = MessageRequest(
            workflow_id=workflow_id,
            name=name,
            payload=payload,
            sender_kind="user",
            sender_id=current_user(),
            now=system_clock.now(),
            run_id=run_id,
        )
        return self._portal.call(self._store.send_message(request))

    def publish_event(
        self,
        event_type: str,
        correlation_id: str,
        payload: Any = None,
        *,
        event_id: str | None = None,
    ) -> str:
        """Publish an external event; returns its id. Publishing an ``event_id``
        again changes nothing, so deliveries can be retried safely.

        Raises:
            PayloadError: ``payload`` is not JSON or is over 256 KiB.
        """
        check_name(event_type, "the event type")
        check_name(correlation_id, "the correlation id")
        if event_id is not None:
            _check_id(event_id, "event_id")
        check_message_payload(payload, f"the payload of event {event_type!r}")
        request = EventRequest(
            event_type=event_type,
            correlation_id=correlation_id,
            payload=payload,
            event_id=event_id or uuid.uuid4().hex,
            actor_kind="user",
            actor_id=current_user(),
            now=system_clock.now(),
        )
        return self._portal.call(self._store.publish_event(request)).event_id

    def cancel_workflow(
        self, workflow_id: str, reason: str | None = None, *, run_id: str | None = None
    ) -> None:
        """Cancel a running workflow: it sees ``asyncio.CancelledError`` at its
        current await, its ``finally`` blocks run, and it ends as cancelled.

        Raises:
            RunNotFoundError: no such workflow.
            WorkflowNotRunningError: the run has already ended (nothing changes).
        """
        _check_id(workflow_id, "workflow_id")
        request = CancelRequest(
            workflow_id=workflow_id,
            reason=reason or "cancelled by the client",
            actor_kind="user",
            actor_id=current_user(),
            now=system_clock.now(),
            run_id=run_id,
        )
        self._portal.call(self._store.cancel_run(request))

    def lineage(self, workflow_id: str) -> dict[str, Any]:
        """The workflow's newest run, its parent and its children."""
        found = self._portal.call(self._store.lineage(workflow_id))
        return {
            "run": WorkflowRun.from_record(found.run),
            "parent": WorkflowRun.from_record(found.parent) if found.parent else None,
            "children": [WorkflowRun.from_record(c) for c in found.children],
        }

    def list_audit(
        self,
        *,
        limit: int = 100,
        offset: int = 0,
        action: str | None = None,
        workflow_id: str | None = None,
    ) -> list[AuditEntry]:
        """Audit entries (message sends, event publishes, cancels, ...), newest first."""
        return self._portal.call(
            self._store.list_audit(
                limit=limit, offset=offset, action=action, workflow_id=workflow_id
            )
        )

    def list_workers(self) -> list[WorkerRecord]:
        """The workers registered with the store (a worker deregisters when it stops)."""
        return self._portal.call(self._store.list_workers())

    def list_queues(self) -> list[dict[str, Any]]:
        """Every queue with work or a worker, with its depth (see ``Client.list_queues``)."""
        return self._portal.call(queue_summary(self._store, system_clock.now()))

    async def _find(self, workflow_id: str, run_id: str | None) -> RunRecord:
        if run_id is not None:
            run = await self._store.get_run(run_id)
            if run is not None and run.workflow_id == workflow_id:
                return run
            raise RunNotFoundError(f"no run {run_id!r} of workflow id {workflow_id!r}")
        run = await self._store.find_run(workflow_id)
        if run is None:
            raise RunNotFoundError(f"no run has workflow id {workflow_id!r}")
        return run


def _inputs(
    workflow_or_name: WorkflowDefinition[..., Any] | str, value: Any
) -> tuple[str, dict[str, Any], str]:
    if isinstance(workflow_or_name, WorkflowDefinition):
        return (
            workflow_or_name.name,
            workflow_or_name.bind_input(value),
            workflow_or_name.code_version,
        )
    if not isinstance(workflow_or_name, str) or not workflow_or_name:
        raise TypeError(
            f"trigger_workflow needs a @workflow or its name, not {type(workflow_or_name).__name__}"
        )
    known = registry.workflows.get(workflow_or_name)
    if known is not None:
        return known.name, known.bind_input(value), known.code_version
    if value is None:
        return workflow_or_name, {"args": [], "kwargs": {}}, ""
    check_json(value, f"input of workflow {workflow_or_name!r}")
    if isinstance(value, dict):
        return workflow_or_name, {"args": [], "kwargs": value}, ""
    if isinstance(value, list):
        return workflow_or_name, {"args": value, "kwargs": {}}, ""
    raise PayloadError(
        f"input of workflow {workflow_or_name!r} must be a mapping of parameter names "
        f"(or a list), not {type(value).__name__}"
    )


def _check_id(value: str, what: str) -> str:
    if not isinstance(value, str) or not _ID.match(value):
        raise ValueError(
            f"{what} {value!r} is not valid: use 1-200 letters, digits and ._:@/+=- "
            "starting with a letter or digit"
        )
    return value


def current_user() -> str:
    """Who a store-mode client acts as: ``KEEPGOING_USER``, else the OS login."""
    user = os.environ.get("KEEPGOING_USER")
    if user:
        return user
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f"uid-{os.getuid()}"
