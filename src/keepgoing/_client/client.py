"""``Client``: the one entry point for callers outside workflows.

Each method is documented here, once. It does what both transports share
(waiting for a result with ``wait=True``, turning an ended run into its
result or error, resolving a workflow to its name) and hands one request
record (:mod:`keepgoing._client.requests`) to its
:class:`~keepgoing._client.backend.Backend`: the store directly
(``store=...``, the default) or, once a server is configured, HTTP.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

from keepgoing._client.backend import Backend
from keepgoing._client.groups import GroupClient
from keepgoing._client.recovery import RecoveryMethods
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
from keepgoing._client.runs import RunsPage, WorkflowRun, WorkflowRunHandle, outcome
from keepgoing._client.schedules import ScheduleMethods
from keepgoing._client.store_backend import StoreBackend
from keepgoing._history.events import Event
from keepgoing._run_flow import check_priority
from keepgoing._store.inspect_protocol import RUN_STATUSES, RunFilter
from keepgoing._store.protocol import Store
from keepgoing._store.records import AuditEntry, WorkerRecord
from keepgoing._store.trouble import MARKERS
from keepgoing._views.catalog import warn_unknown
from keepgoing._views.operations import Operation
from keepgoing._workflow.workflow import WorkflowDefinition
from keepgoing.errors import ConfigurationError, InvalidRequestError

__all__ = ["Client"]


class Client(RecoveryMethods, ScheduleMethods):
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
            default ``KEEPGOING_STORE``, else the project's: ``keepgoing.db`` in the
            ``.keepgoing/`` folder of the working directory or of its nearest parent
            that has one (as git finds ``.git``), made in the working directory when
            none has.

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
        self._backend: Backend
        if url:
            from keepgoing._client.http_backend import HttpBackend  # noqa: PLC0415 (httpx is slow to import)

            self._backend = HttpBackend(url, token or os.environ.get("KEEPGOING_TOKEN"))
        else:
            self._backend = StoreBackend(store)

    @classmethod
    def _over(cls, backend: Backend) -> Client:
        """A client over ``backend`` as it is (an HTTP backend with a test transport)."""
        client = cls.__new__(cls)
        client._backend = backend
        return client

    @property
    def store(self) -> Store:
        """The store, in store mode (``ConfigurationError`` in HTTP mode)."""
        return self._backend.store

    @property
    def groups(self) -> GroupClient:
        """Worker groups: deploy, show, scale, kill, remove; kept secrets."""
        return GroupClient(self._backend)  # type: ignore[arg-type]

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
        request_id: str | None = None,
        strict: bool = False,
        priority: int = 0,
    ) -> Any:
        """Start a run; return its :class:`WorkflowRunHandle`, or with ``wait=True`` its result.

        ``input`` maps parameter names to JSON values. The default
        ``workflow_id`` is ``<name>-<uuid>``.

        A workflow may be started by name before any worker serves it: the run
        is queued and waits for a worker that serves its name (``get_run``
        says ``waiting_for="waiting for a worker that serves NAME"``), and
        messages sent to it meanwhile are kept. A name that no worker has
        served but that is close to one that has issues
        :class:`~keepgoing.UnknownWorkflowWarning`; ``strict=True`` refuses
        any name no worker has served instead. A ``task_queue`` that no group,
        worker or deploy of the store has ever served (a typo, or another
        system's queue name) issues :class:`~keepgoing.UnknownQueueWarning`
        naming the closest known queue, and ``get_run`` says "waiting on queue Q,
        which nothing serves"; ``strict=True`` refuses it instead
        (``default`` is always known).

        ``request_id`` (32 hex digits) makes the start idempotent: repeating
        it returns the run it started (it becomes the run id).

        ``priority`` (an int, default 0) orders the claims: higher first, but each
        point is worth only a minute of waiting, so an older run is never
        starved (see the guide's Flow control section). Its tasks inherit it.
        A workflow with ``concurrency=`` queues a start over its limit; a
        singleton's ``on_conflict="skip"`` returns the open run's handle with
        ``existing=True``.

        Raises:
            WorkflowAlreadyRunningError: ``workflow_id`` has a run that has not ended.
            WorkflowNotFoundError: with ``strict=True``, a name no worker has served.
            QueueNotFoundError: with ``strict=True``, a queue nothing has served.
            InvalidRequestError: ``request_id`` already started a different run.
            PayloadError: ``input`` is not JSON (the message names the value).
            WorkflowFailedError: with ``wait=True``, the run failed.
        """
        request = Start(
            workflow_or_name,
            input,
            workflow_id,
            task_queue,
            request_id,
            strict,
            check_priority(priority),
        )
        if wait and isinstance(workflow_or_name, WorkflowDefinition):
            # No warning to give first (it is for names): one call starts and waits.
            return outcome(self._backend.start_and_wait(request, timeout))
        handle, warning = self._backend.start(request)
        warn_unknown(warning)
        return self.result(handle, timeout=timeout) if wait else handle

    def trigger_many(
        self,
        workflow_or_name: WorkflowDefinition[..., Any] | str,
        inputs: Sequence[Any],
        *,
        workflow_ids: Sequence[str] | None = None,
        request_ids: Sequence[str] | None = None,
        task_queue: str | None = None,
        strict: bool = False,
        priority: int = 0,
    ) -> list[WorkflowRunHandle]:
        """Start one run of the workflow per item of ``inputs``, all in one commit.

        Returns the handles in the order of ``inputs``. When it returns, every run
        is started and durable; when it raises, none was started. One commit for
        the batch is what makes it fast: a producer on one thread pays one disk
        flush for many starts instead of one each. At most 1,000 runs at once.

        ``workflow_ids`` and ``request_ids``, if given, have one item per input
        and mean what they mean for :meth:`trigger_workflow`: a ``request_id``
        that already started its run returns that run again (a retried batch
        starts nothing twice). ``priority`` is every run's, as for
        :meth:`trigger_workflow`.

        Works on the store and through a server alike: over HTTP the batch is
        one request (``POST /api/v1/run-batches``) carrying a ``request_id`` per
        run, so it is retried safely; it must fit the server's body limit.

        Raises:
            WorkflowAlreadyRunningError: a ``workflow_id`` has a run that has not
                ended (the error's note names the item); nothing was started.
            InvalidRequestError: two items share a workflow or request id, or a
                ``request_id`` already started a different run.
            PayloadError: an input is not JSON (``start #i`` names the item).
            ValueError: lists of different lengths, over 1,000 runs, a bad id.
            PayloadTooLargeError: over HTTP, the batch is over the server's body limit.
        """
        request = StartMany(
            workflow_or_name,
            inputs,
            workflow_ids,
            request_ids,
            task_queue,
            strict,
            check_priority(priority),
        )
        handles, warning = self._backend.start_many(request)
        warn_unknown(warning)
        return handles

    def run_workflow(
        self,
        workflow: WorkflowDefinition[..., Any],
        input: Any = None,
        *,
        workflow_id: str | None = None,
        restart: bool = False,
    ) -> Any:
        """Run ``workflow`` with its tasks in this process, coordinated through the store.

        Blocks until the run ends. Every step is recorded in the store, so if
        this process dies, calling again with the same ``workflow_id`` resumes
        the run from its last finished step. Calling again after the run has
        ended returns its recorded result (or raises its recorded error) and
        runs nothing: the idempotent start a crashed caller relies on when it
        retries. ``restart=True`` starts an ended ``workflow_id`` again.

        Raises:
            InvalidRequestError: ``workflow_id`` belongs to another workflow's run.
            WorkflowFailedError: the run failed or was cancelled.
        """
        return outcome(self._backend.run_here(RunHere(workflow, input, workflow_id, restart)))

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
            run = RunRef(workflow_id.workflow_id, workflow_id.run_id)
        else:
            run = RunRef(workflow_id, run_id)
        return outcome(self._backend.wait(run, timeout))

    def get_run(self, workflow_id: str, *, run_id: str | None = None) -> WorkflowRun:
        """The newest run of ``workflow_id`` (or the run ``run_id``).

        Raises:
            RunNotFoundError: no such run.
        """
        return self._backend.get_run(RunRef(workflow_id, run_id))

    def history(self, workflow_id: str, *, run_id: str | None = None) -> list[Event]:
        """Every event of the run, in order."""
        return self._backend.history(RunRef(workflow_id, run_id))

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
        name = workflow.name if isinstance(workflow, WorkflowDefinition) else workflow
        query = RunQuery(name, status, limit, offset, created_after, created_before)
        return self._backend.list_runs(query)

    def page_runs(
        self,
        *,
        status: str | Sequence[str] | None = None,
        workflow: str | WorkflowDefinition[..., Any] | None = None,
        since: float | None = None,
        until: float | None = None,
        id: str | None = None,
        text: str | None = None,
        limit: int = 50,
        cursor: str | None = None,
        needs_patch: str | None = None,
        revision: int | None = None,
        trouble: str | Sequence[str] | None = None,
    ) -> RunsPage:
        """One page of runs, newest first: of these statuses (one or several), of one
        workflow, created in ``[since, until)`` (UNIX seconds), whose workflow id or
        run id is ``id`` or starts with it, or holding ``text`` (case-insensitive) in
        the workflow id, run id, workflow name, blocked reason or error. Pass the
        page's ``next_cursor`` as ``cursor`` for the next one.

        ``needs_patch``: only runs not ended that have not passed
        ``keepgoing.patched(needs_patch)`` (while any is listed, keep the old
        branch). ``revision``: only runs pinned to this group revision.
        ``trouble``: only runs carrying every one of these markers (one or several):
        ``worker_lost``, ``retried``, ``rate_limited``, ``waiting_for_review``,
        ``blocked``; each run's counts are in its ``trouble``.

        Raises:
            InvalidRequestError: an unknown status or marker, ``since > until``, a bad
                cursor or ``limit`` outside 1..1000.
        """
        filters = _filter(status, workflow, since, until, id, text, trouble)
        if needs_patch is not None and (not isinstance(needs_patch, str) or not needs_patch):
            raise InvalidRequestError("needs_patch must be a change id")
        filters = dataclasses.replace(filters, needs_patch=needs_patch, revision=revision)
        return self._backend.page_runs(filters, limit=limit, cursor=cursor)

    def count_runs(
        self,
        *,
        status: str | Sequence[str] | None = None,
        workflow: str | WorkflowDefinition[..., Any] | None = None,
        since: float | None = None,
        until: float | None = None,
        id: str | None = None,
        text: str | None = None,
        trouble: str | Sequence[str] | None = None,
    ) -> dict[str, int]:
        """How many runs matching the filters of :meth:`page_runs` are in each status."""
        return self._backend.count_runs(_filter(status, workflow, since, until, id, text, trouble))

    def count_trouble(
        self,
        *,
        status: str | Sequence[str] | None = None,
        workflow: str | WorkflowDefinition[..., Any] | None = None,
        since: float | None = None,
        until: float | None = None,
        id: str | None = None,
        text: str | None = None,
    ) -> dict[str, int]:
        """How many runs matching the filters of :meth:`page_runs` carry each trouble
        marker: ``worker_lost``, ``retried``, ``rate_limited``, ``waiting_for_review``
        and ``blocked`` (each present, zero included)."""
        return self._backend.count_trouble(_filter(status, workflow, since, until, id, text))

    def attempt_logs(
        self,
        workflow_id: str,
        *,
        run_id: str | None = None,
        cmd: int | None = None,
        attempt: int | None = None,
    ) -> list[dict[str, Any]]:
        """What each attempt of the run (of step ``cmd``, attempt ``attempt``) printed
        and logged, as its worker stored it: ``cmd``, ``attempt``, ``worker_id``,
        ``at``, ``text`` (at most 64 KiB, secrets redacted), ``size`` and
        ``truncated``. An attempt whose worker died before its outcome has none."""
        return self._backend.attempt_logs(workflow_id, run_id=run_id, cmd=cmd, attempt=attempt)

    def kill_worker(self, worker_id: str, *, via: str = "api") -> dict[str, Any]:
        """SIGKILL the plain ``keepgoing worker`` ``worker_id`` on this machine (the
        server's machine, through a server), checked to be that process; audited.

        The attempts it loses are recorded with cause ``killed_by_request`` (the
        caller as actor, ``via`` — ``"api"``, ``"ui"`` or ``"cli"`` — as where it
        was asked from) and do not count against ``max_worker_losses``.

        Raises:
            InvalidRequestError: it cannot be killed from here (another host, not a
                plain ``keepgoing worker``, gone, or its pid reused); the message says why.
        """
        return self._backend.kill_worker(worker_id, via=via)

    # -- operations ---------------------------------------------------------------------
    def get_operation(self, operation_id: str) -> Operation:
        """The status of a step's operation, by the id ``operation_id()`` gave the task.

        A caller that lost its answer reconciles against keepgoing with it:
        ``status`` is ``pending``, ``running``, ``uncertain`` (its attempt raised
        :class:`~keepgoing.UncertainOutcome`; ``waiting_for_review`` while the
        run is open, with the ``evidence``), ``completed`` (with ``result``),
        ``failed`` (with ``error``) or ``cancelled``. A step a reviewer sent
        back to run again keeps its operation id: the status is its newest round's.

        Raises:
            InvalidRequestError: not an operation id (``op-<run_id>-<step>``, at
                most 220 characters; HTTP 400 ``invalid_operation_id``).
            OperationNotFoundError: no run has that step (HTTP 404).
        """
        return self._backend.get_operation(operation_id)

    def list_reviews(self, *, limit: int = 100) -> list[Operation]:
        """Operations waiting for a reviewer (status ``uncertain`` in open runs),
        oldest run first, each with its ``evidence``."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 1000:
            raise InvalidRequestError(f"limit must be an int in 1..1000, not {limit!r}")
        return self._backend.list_reviews(limit)

    def review_operation(
        self,
        operation_id: str,
        decision: str,
        *,
        result: Any = None,
        reason: str | None = None,
    ) -> Operation:
        """Decide an uncertain operation; the run waiting at the step carries on.

        ``decision`` is ``"approve"`` (the step returns ``result``: what the write
        did, as the reviewer found it), ``"retry"`` (the step runs again under the
        same operation id) or ``"fail"`` (the workflow gets ``TaskFailedError``,
        with ``reason``). The decision is sent as a message with the caller's
        identity (a server stamps it from the token) and audited as
        ``operation.review``, in one store transaction that accepts it only while
        the step is uncertain and waited for, once: of two reviewers deciding at
        the same moment, one is refused. Returns the operation as it stood before
        the decision.

        Raises:
            InvalidRequestError: a bad id, decision or reason, or a result with
                retry or fail.
            OperationNotFoundError: no run has that step.
            OperationNotUncertainError: it is not waiting for review: decided
                already, its run ended, or its workflow stopped waiting (HTTP 409).
            PayloadError: ``result`` is not JSON a store can carry.
        """
        return self._backend.review_operation(operation_id, decision, result, reason)

    def send_workflow_message(
        self, workflow_id: str, name: str, payload: Any = None, *, run_id: str | None = None
    ) -> str:
        """Send a message to a running workflow; returns the message id.

        The payload must be JSON and at most 256 KiB. In store mode the sender
        is ``sender_kind="user"`` with ``KEEPGOING_USER`` or the OS login.
        Every send is written to the audit log.

        A run that waits for a worker that serves its name is running: messages
        to it are kept until it asks for them.

        Raises:
            PayloadError: the payload is not JSON or too large; nothing is stored.
            RunNotFoundError: no run has this workflow id (HTTP 404 ``run_not_found``).
            WorkflowNotRunningError: the workflow's run has ended (HTTP 409
                ``workflow_not_running``).
            InvalidRequestError: ``name`` starts with ``review:``, kept for review
                decisions (:meth:`review_operation` sends those).
        """
        return self._backend.send_message(MessageSend(RunRef(workflow_id, run_id), name, payload))

    def publish_event(
        self,
        event_type: str,
        correlation_id: str,
        payload: Any = None,
        *,
        event_id: str | None = None,
    ) -> str:
        """Publish an external event for the runs waiting on its type and correlation id.

        Stored durably and de-duplicated by ``event_id``: publishing an
        ``event_id`` again changes nothing, so deliveries can be retried
        safely. An event published before a wait starts is matched when it
        does. Returns the event id.

        Raises:
            PayloadError: ``payload`` is not JSON or is over 256 KiB.
        """
        return self._backend.publish_event(EventSend(event_type, correlation_id, payload, event_id))

    def cancel_workflow(
        self, workflow_id: str, reason: str | None = None, *, run_id: str | None = None
    ) -> None:
        """Cancel a running workflow (recorded in its history and the audit log).

        The workflow sees ``asyncio.CancelledError`` at its current await, its
        ``finally`` blocks run, and it ends as cancelled.

        Raises:
            RunNotFoundError: no such workflow.
            WorkflowNotRunningError: the run has already ended; nothing changes.
        """
        self._backend.cancel(RunRef(workflow_id, run_id), reason)

    def unblock_workflow(self, workflow_id: str, *, run_id: str | None = None) -> WorkflowRun:
        """Retry a blocked run now and return it (``running`` again).

        A blocked run is also retried by itself when a worker with other code
        starts, and every few minutes (with backoff). If the code of the
        worker that takes it replays the history, the run continues and no
        finished step runs again; if not, it is blocked again with the new diff.
        Written to the audit log.

        Raises:
            RunNotFoundError: no such workflow.
            WorkflowNotRunningError: the run is not blocked; nothing changes.
        """
        return self._backend.unblock(RunRef(workflow_id, run_id))

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
        """Audit entries (message sends, event publishes, cancels, ...), newest first."""
        return self._backend.list_audit(AuditQuery(limit, offset, action, workflow_id))

    def list_workers(self, *, include_lost: bool = False) -> list[WorkerRecord]:
        """The live workers registered with the store, oldest first (a worker
        deregisters when it stops). With ``include_lost``, also those the store marked
        lost in the last day (killed, crashed, or past their heartbeat deadline):
        their ``lost_at`` and ``lost_reason`` say when and why."""
        workers = self._backend.list_workers()
        return [w for w in workers if include_lost or w.lost_at is None]

    def list_queues(self) -> list[dict[str, Any]]:
        """Every queue with work or a worker: ``queue``, ``depth`` (runnable runs plus
        ready tasks), ``runnable_runs``, ``ready_tasks``, ``delayed_tasks``,
        ``running_tasks`` and ``workers`` (how many serve it)."""
        return self._backend.list_queues()


def _filter(
    status: str | Sequence[str] | None,
    workflow: str | WorkflowDefinition[..., Any] | None,
    since: float | None,
    until: float | None,
    id: str | None,
    text: str | None,
    trouble: str | Sequence[str] | None = None,
) -> RunFilter:
    markers: list[str] = []
    for value in [trouble] if isinstance(trouble, str) else list(trouble or ()):
        markers += [part.strip() for part in value.split(",") if part.strip()]
    unknown = [m for m in markers if m not in MARKERS]
    if unknown:
        raise InvalidRequestError(
            f"unknown trouble marker {unknown[0]!r}; use one of {', '.join(MARKERS)}"
        )
    statuses: list[str] = []
    for value in [status] if isinstance(status, str) else list(status or ()):
        statuses += [part.strip() for part in value.split(",") if part.strip()]
    bad = [s for s in statuses if s not in RUN_STATUSES]
    if bad:
        raise InvalidRequestError(
            f"unknown status {bad[0]!r}; a run's status is one of {', '.join(RUN_STATUSES)}"
        )
    if since is not None and until is not None and since > until:
        raise InvalidRequestError(f"since ({since:g}) is after until ({until:g})")
    name = workflow.name if isinstance(workflow, WorkflowDefinition) else workflow
    return RunFilter(
        tuple(dict.fromkeys(statuses)),
        name,
        since,
        until,
        id or None,
        text or None,
        trouble=tuple(dict.fromkeys(markers)),
    )
