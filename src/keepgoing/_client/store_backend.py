"""The store backend: :class:`keepgoing.Client` talking to the store directly.

Every call runs on a private event loop (a :class:`~keepgoing._portal.Portal`);
``run_here`` runs the tasks in this process. It checks what the server would
check (ids, names, payloads) before the store sees it. What each call does
and raises is documented once, on :class:`keepgoing.Client`.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

from keepgoing._client.orchestrator import TriggerWatch
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
from keepgoing._client.store_recovery import StoreRecoveryCalls, current_user
from keepgoing._clock import system_clock
from keepgoing._history.events import Event
from keepgoing._open_store import store_from_url
from keepgoing._payload import check_message_payload
from keepgoing._portal import Portal
from keepgoing._store.doorbell import WaitKey
from keepgoing._store.inspect_protocol import RunCursor, RunFilter
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
    WorkerStop,
)
from keepgoing._store.worker_stops import KILLED_BY_REQUEST
from keepgoing._views import operations
from keepgoing._views.batch import batch_lists, naming, refuse_repeats
from keepgoing._views.batch import check_id as _check_id
from keepgoing._views.batch import check_request_id as _check_request_id
from keepgoing._views.catalog import DEFAULT_QUEUE, StartWarning, check_start
from keepgoing._views.operations import Operation
from keepgoing._views.queues import queue_summary, serving
from keepgoing._views.waiting import Served
from keepgoing._worker import process
from keepgoing._worker.inprocess import drive
from keepgoing._worker.settings import WorkerSettings
from keepgoing._worker.worker import Worker
from keepgoing._worker.worker_stops import kill_recorded
from keepgoing._workflow.inputs import start_input
from keepgoing._workflow.messages import check_name
from keepgoing._workflow.registry import registry
from keepgoing._workflow.workflow import WorkflowDefinition
from keepgoing.errors import InvalidRequestError, RunNotFoundError

__all__ = ["StoreBackend", "current_user"]

_STATUSES = ("running", "blocked", "completed", "failed", "cancelled", "continued")
#: How often a waiting client reads the run with no wake-up (one lost between processes).
SAFETY_POLL = 0.5
T = TypeVar("T")


class StoreBackend(StoreRecoveryCalls):
    """The :class:`~keepgoing._client.backend.Backend` on a :class:`Store`."""

    def __init__(self, store: str | Store | None = None) -> None:
        self._store = store if isinstance(store, Store) else store_from_url(store)
        self._known_queues: set[str] = set()  # served once, so known for good
        self._watch = TriggerWatch(self._store)  # starts a background orchestrator
        self._portal = Portal()
        try:
            self._portal.call(self._store.open())
        except BaseException:
            self._portal.close()
            raise

    @property
    def store(self) -> Store:
        return self._store

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` (a store operation) on this backend's event loop."""
        return self._portal.call(coro)

    def close(self) -> None:
        """Close the store and its event loop."""
        try:
            self._portal.call(self._store.close())
        finally:
            self._portal.close()

    # -- starting runs ----------------------------------------------------------
    def start(self, request: Start) -> tuple[WorkflowRunHandle, StartWarning | None]:
        return self._portal.call(
            self._start(
                request.workflow,
                request.input,
                request.workflow_id,
                request.task_queue or DEFAULT_QUEUE,
                request_id=request.request_id,
                strict=request.strict,
            )
        )

    async def _start(
        self,
        workflow_or_name: WorkflowDefinition[..., Any] | str,
        value: Any,
        workflow_id: str | None,
        queue: str,
        *,
        request_id: str | None = None,
        strict: bool = False,
        check: bool = True,
    ) -> tuple[WorkflowRunHandle, StartWarning | None]:
        name, inputs, version = start_input(workflow_or_name, value)
        queue = _check_id(queue, "task_queue")
        warning = None
        if check:
            by_name = not isinstance(workflow_or_name, WorkflowDefinition)
            warning = await check_start(
                self._store,
                name if by_name and name not in registry.workflows else None,
                queue,
                strict=strict,
                known=self._known_queues,
            )
        if request_id is not None:
            earlier = await self._store.get_run(_check_request_id(request_id))
            if earlier is not None:
                return _again(earlier, workflow_id, name), None
        run_id = request_id or uuid.uuid4().hex
        workflow_id = _check_id(workflow_id, "workflow_id") if workflow_id else f"{name}-{run_id}"
        run = await self._store.start_run(
            StartRequest(
                run_id=run_id,
                workflow_id=workflow_id,
                workflow_name=name,
                input=inputs,
                task_queue=queue,
                code_version=version,
                now=system_clock.now(),
            )
        )
        if check:
            await self._watch.started(queue)
        return WorkflowRunHandle(run.workflow_name, run.workflow_id, run.run_id), warning

    def start_many(self, request: StartMany) -> tuple[list[WorkflowRunHandle], StartWarning | None]:
        return self._portal.call(self._start_many(request))

    async def _start_many(
        self, request: StartMany
    ) -> tuple[list[WorkflowRunHandle], StartWarning | None]:
        inputs, ids, request_ids = batch_lists(
            request.inputs, request.workflow_ids, request.request_ids
        )
        if not inputs:
            return [], None
        queue = _check_id(request.task_queue or DEFAULT_QUEUE, "task_queue")
        workflow = request.workflow
        by_name = not isinstance(workflow, WorkflowDefinition) and (
            isinstance(workflow, str) and workflow and workflow not in registry.workflows
        )
        warning = await check_start(
            self._store,
            workflow if by_name and isinstance(workflow, str) else None,
            queue,
            strict=request.strict,
            known=self._known_queues,
        )
        now = system_clock.now()
        requests: list[StartRequest] = []
        for i, value in enumerate(inputs):
            with naming(i):
                name, stored, version = start_input(workflow, value)
                rid = request_ids[i] if request_ids is not None else None
                run_id = _check_request_id(rid) if rid is not None else uuid.uuid4().hex
                wid = ids[i] if ids is not None else None
                workflow_id = _check_id(wid, "workflow_id") if wid is not None else None
            requests.append(
                StartRequest(
                    run_id=run_id,
                    workflow_id=workflow_id or f"{name}-{run_id}",
                    workflow_name=name,
                    input=stored,
                    task_queue=queue,
                    code_version=version,
                    now=now,
                )
            )
        refuse_repeats([r.run_id for r in requests], "request_id")
        refuse_repeats([r.workflow_id for r in requests], "workflow_id")
        started = await self._store.start_runs(requests)
        await self._watch.started(queue)
        handles = [WorkflowRunHandle(r.workflow_name, r.workflow_id, r.run_id) for r, _ in started]
        return handles, warning

    def run_here(self, request: RunHere) -> WorkflowRun:
        """Runs the tasks here, on a worker of this process's own."""
        workflow = request.workflow
        if not isinstance(workflow, WorkflowDefinition):
            raise TypeError(f"run_workflow needs a @workflow, not {type(workflow).__name__}")
        ended = self._portal.call(
            self._run_here(workflow, request.input, request.workflow_id, request.restart)
        )
        return WorkflowRun.from_record(ended)

    async def _run_here(
        self,
        workflow: WorkflowDefinition[..., Any],
        value: Any,
        workflow_id: str | None,
        restart: bool,
    ) -> RunRecord:
        run = None
        if workflow_id is not None:
            run = await self._store.find_run(_check_id(workflow_id, "workflow_id"))
        if run is not None and run.workflow_name != workflow.name:
            raise InvalidRequestError(
                f"workflow id {workflow_id!r} belongs to a run of {run.workflow_name!r}, "
                f"not of {workflow.name!r}; use another workflow_id"
            )
        if run is not None and run.status in TERMINAL and not restart:
            return await self._wait(run.workflow_id, run.run_id, None)
        if run is None or run.status in TERMINAL:
            queue = f"local.{uuid.uuid4().hex[:12]}"  # this call's own worker serves it
            handle, _ = await self._start(workflow, value, workflow_id, queue, check=False)
            run = await self._store.get_run(handle.run_id)
            assert run is not None
        settings = WorkerSettings.from_env(queues=(run.task_queue,), concurrency=16)
        worker = Worker(self._store, settings=settings)
        try:
            ended = await drive(worker, run.run_id, settle_children=True)
        finally:
            await worker.stop_local()
            await self._store.release_tasks(worker.worker_id, system_clock.now())
        return ended

    # -- reading ----------------------------------------------------------------------
    def wait(self, run: RunRef, timeout: float | None) -> WorkflowRun:
        ended = self._portal.call(self._wait(run.workflow_id, run.run_id, timeout))
        return WorkflowRun.from_record(ended)

    def start_and_wait(self, request: Start, timeout: float | None) -> WorkflowRun:
        """Start and wait in one call on the loop: listening for changes begins before
        the start commits, so the run's end cannot be missed and is not polled for."""

        async def start_and_wait() -> RunRecord:
            key = WaitKey()
            await self._store.wait_for_change(0, key)  # from here on no change is missed
            handle, _ = await self._start(
                request.workflow,
                request.input,
                request.workflow_id,
                request.task_queue or DEFAULT_QUEUE,
                request_id=request.request_id,
                strict=request.strict,
            )
            return await self._wait(handle.workflow_id, handle.run_id, timeout, key)

        return WorkflowRun.from_record(self._portal.call(start_and_wait()))

    async def _wait(
        self,
        workflow_id: str,
        run_id: str | None,
        timeout: float | None,
        key: WaitKey | None = None,
    ) -> RunRecord:
        """The run once it ends (or is blocked), woken by the store's change signal.

        ``key`` was waited on before the run started, or is taken here before the
        first read: no change after that is missed, and ``SAFETY_POLL`` only covers
        a wake-up lost between processes.
        """
        deadline = None if timeout is None else system_clock.monotonic() + timeout
        if key is None:
            key = WaitKey()
            await self._store.wait_for_change(0, key)
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
            pause = SAFETY_POLL if left is None else min(SAFETY_POLL, left)
            await self._store.wait_for_change(pause, key)

    def get_run(self, run: RunRef) -> WorkflowRun:

        async def read() -> WorkflowRun:
            found = await self._find(run.workflow_id, run.run_id)
            view = WorkflowRun.from_record(found, await self._served([found]))
            slot = await self._store.schedule_of_run(found.run_id)
            if slot is None:
                return view
            return dataclasses.replace(
                view, schedule_id=slot.schedule_id, schedule_slot=slot.slot_at
            )

        return self._portal.call(read())

    async def _served(self, runs: Sequence[RunRecord] = ()) -> Served:
        return await serving(self._store, system_clock.now(), runs)

    def history(self, run: RunRef) -> list[Event]:

        async def read() -> list[Event]:
            found = await self._find(run.workflow_id, run.run_id)
            return await self._store.read_history(found.run_id)

        return self._portal.call(read())

    def list_runs(self, query: RunQuery) -> list[WorkflowRun]:
        if query.status is not None and query.status not in _STATUSES:
            raise ValueError(f"status must be one of {', '.join(_STATUSES)}, not {query.status!r}")
        if not 1 <= query.limit <= 1000 or query.offset < 0:
            raise ValueError("limit must be 1..1000 and offset at least 0")

        async def read() -> list[WorkflowRun]:
            runs = await self._store.search_runs(
                workflow_name=query.workflow_name,
                status=query.status,
                created_after=query.created_after,
                created_before=query.created_before,
                limit=query.limit,
                offset=query.offset,
            )
            served = await self._served(runs) if any(r.status == "running" for r in runs) else None
            return [WorkflowRun.from_record(r, served) for r in runs]

        return self._portal.call(read())

    # -- messages, events, cancellation ------------------------------------------------
    def send_message(self, message: MessageSend) -> str:
        """The sender is the user :func:`current_user` names."""
        name, payload = message.name, message.payload
        _check_id(message.run.workflow_id, "workflow_id")
        check_name(name, "the message name")
        check_message_payload(payload, f"the payload of message {name!r}")
        request = MessageRequest(
            workflow_id=message.run.workflow_id,
            name=name,
            payload=payload,
            sender_kind="user",
            sender_id=current_user(),
            now=system_clock.now(),
            run_id=message.run.run_id,
        )
        return self._portal.call(self._store.send_message(request))

    def publish_event(self, event: EventSend) -> str:
        check_name(event.event_type, "the event type")
        check_name(event.correlation_id, "the correlation id")
        if event.event_id is not None:
            _check_id(event.event_id, "event_id")
        check_message_payload(event.payload, f"the payload of event {event.event_type!r}")
        request = EventRequest(
            event_type=event.event_type,
            correlation_id=event.correlation_id,
            payload=event.payload,
            event_id=event.event_id or uuid.uuid4().hex,
            actor_kind="user",
            actor_id=current_user(),
            now=system_clock.now(),
        )
        return self._portal.call(self._store.publish_event(request)).event_id

    def cancel(self, run: RunRef, reason: str | None) -> None:
        _check_id(run.workflow_id, "workflow_id")
        request = CancelRequest(
            workflow_id=run.workflow_id,
            reason=reason or "cancelled by the client",
            actor_kind="user",
            actor_id=current_user(),
            now=system_clock.now(),
            run_id=run.run_id,
        )
        self._portal.call(self._store.cancel_run(request))

    def unblock(self, run: RunRef) -> WorkflowRun:
        """Unblocks the run and writes the audit entry."""
        _check_id(run.workflow_id, "workflow_id")

        async def unblock() -> RunRecord:
            now = system_clock.now()
            found = await self._store.unblock_run(run.workflow_id, run.run_id, now)
            await self._store.append_audit(
                AuditEntry(
                    at=now,
                    actor_kind="user",
                    actor_id=current_user(),
                    action="workflow.unblock",
                    workflow_id=found.workflow_id,
                    run_id=found.run_id,
                )
            )
            return found

        return WorkflowRun.from_record(self._portal.call(unblock()))

    def list_audit(self, query: AuditQuery) -> list[AuditEntry]:
        return self._portal.call(
            self._store.list_audit(
                limit=query.limit,
                offset=query.offset,
                action=query.action,
                workflow_id=query.workflow_id,
            )
        )

    def list_workers(self) -> list[WorkerRecord]:
        return self._portal.call(self._store.list_workers())

    def page_runs(
        self, filters: RunFilter, *, limit: int = 50, cursor: str | None = None
    ) -> RunsPage:
        if not 1 <= limit <= 1000:
            raise InvalidRequestError(f"limit must be 1..1000, not {limit}")
        after = RunCursor.decode(cursor) if cursor is not None else None

        async def read() -> RunsPage:
            page = await self._store.page_runs(filters, limit=limit, after=after)
            running = any(r.status == "running" for r in page.runs)
            served = await self._served(page.runs) if running else None
            return RunsPage(
                [WorkflowRun.from_record(r, served) for r in page.runs],
                page.next_cursor.encode() if page.next_cursor is not None else None,
            )

        return self._portal.call(read())

    def count_runs(self, filters: RunFilter) -> dict[str, int]:
        return self._portal.call(self._store.count_runs_by_status(filters))

    def count_trouble(self, filters: RunFilter) -> dict[str, int]:
        return self._portal.call(self._store.count_trouble(filters))

    def attempt_logs(
        self,
        workflow_id: str,
        *,
        run_id: str | None = None,
        cmd: int | None = None,
        attempt: int | None = None,
    ) -> list[dict[str, Any]]:
        async def read() -> list[dict[str, Any]]:
            run = await self._find(workflow_id, run_id)
            found = await self._store.attempt_logs(run.run_id, cmd=cmd, attempt=attempt)
            return [
                {k: v for k, v in dataclasses.asdict(x).items() if k != "run_id"} for x in found
            ]

        return self._portal.call(read())

    def kill_worker(self, worker_id: str, *, via: str = "api") -> dict[str, Any]:
        async def kill() -> dict[str, Any]:
            worker = next(
                (w for w in await self._store.list_workers() if w.worker_id == worker_id), None
            )
            if worker is None:
                raise InvalidRequestError(
                    f"no registered worker {worker_id!r} (it may have stopped)"
                )
            user = current_user()
            stop = WorkerStop(worker_id, KILLED_BY_REQUEST, "user", user, via)
            try:
                killed = await kill_recorded(self._store, worker, stop, system_clock.now())
            except process.NotKillable as exc:
                refused = {"worker_id": worker_id, "pid": worker.pid, "reason": exc.reason}
                await self._store.append_audit(
                    AuditEntry(
                        at=system_clock.now(),
                        actor_kind="user",
                        actor_id=user,
                        action="worker.kill_refused",
                        detail={**refused, "host": worker.host, "via": via},
                    )
                )
                raise InvalidRequestError(f"worker {worker_id}: {exc}") from None
            detail = {"worker_id": worker_id, "host": killed.host, "pid": killed.pid, "via": via}
            await self._store.append_audit(
                AuditEntry(
                    at=system_clock.now(),
                    actor_kind="user",
                    actor_id=user,
                    action="worker.kill",
                    detail=detail,
                )
            )
            return {**detail, "signal": "SIGKILL"}

        return self._portal.call(kill())

    # -- operations -------------------------------------------------------------------
    def get_operation(self, operation_id: str) -> Operation:
        return self._portal.call(operations.read_operation(self._store, operation_id))

    def list_reviews(self, limit: int) -> list[Operation]:
        return self._portal.call(operations.read_reviews(self._store, limit=limit))

    def review_operation(
        self, operation_id: str, decision: str, result: Any, reason: str | None
    ) -> Operation:
        """The reviewer is the user :func:`current_user` names."""
        return self._portal.call(
            operations.review_operation(
                self._store,
                operation_id,
                decision,
                result=result,
                reason=reason,
                sender_kind="user",
                sender_id=current_user(),
                now=system_clock.now(),
            )
        )

    def list_queues(self) -> list[dict[str, Any]]:
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


def _again(earlier: RunRecord, workflow_id: str | None, name: str) -> WorkflowRunHandle:
    """The run an earlier start with the same ``request_id`` made (as the HTTP API does)."""
    if (workflow_id is not None and workflow_id != earlier.workflow_id) or (
        earlier.workflow_name != name
    ):
        raise InvalidRequestError(
            f"request_id {earlier.run_id} already started run {earlier.run_id} of "
            f"{earlier.workflow_name!r} (workflow id {earlier.workflow_id!r}); "
            "use a new request_id for a different start"
        )
    return WorkflowRunHandle(earlier.workflow_name, earlier.workflow_id, earlier.run_id)
