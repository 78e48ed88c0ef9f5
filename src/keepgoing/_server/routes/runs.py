"""Runs: start (idempotent), read, list, history, wait for the result, lineage, cancel."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response

from keepgoing._history.codec import encode
from keepgoing._server.auth import CancelsRuns, Principal, ReadsRuns, Triggers
from keepgoing._server.context import ServerContext, context
from keepgoing._server.errors import ApiError
from keepgoing._server.routes._common import (
    PREFIX,
    STRICT,
    RunIdQuery,
    WorkflowIdPath,
    check_depth,
    documented,
    find_run,
)
from keepgoing._server.routes.run_filters import run_filter
from keepgoing._server.schemas import (
    CancelBody,
    CancelResult,
    HistoryView,
    LineageView,
    ResultView,
    RunList,
    RunView,
    StartBody,
    StartResult,
    UnblockBody,
    UnblockResult,
)
from keepgoing._store.doorbell import WaitKey
from keepgoing._store.inspect_protocol import RunCursor, RunFilter
from keepgoing._store.records import TERMINAL, AuditEntry, CancelRequest, RunRecord, StartRequest
from keepgoing._views.catalog import check_start
from keepgoing._views.queues import serving
from keepgoing._views.recovery import origins_view
from keepgoing._views.waiting import Served
from keepgoing._workflow.inputs import start_input
from keepgoing.errors import WorkflowAlreadyRunningError

__all__ = ["router"]

router = APIRouter(prefix=PREFIX, tags=["runs"], dependencies=STRICT)

DEFAULT_QUEUE = "default"


@router.post(
    "/runs",
    status_code=201,
    response_model=StartResult,
    responses=documented(
        404,
        409,
        reads=False,
        ok={"model": StartResult, "description": "The run this request already started."},
    ),
    summary="Start a run",
)
async def start_run(
    body: StartBody,
    request: Request,
    principal: Triggers,
    response: Response,
) -> StartResult:
    """Start a run of a workflow. A name that no worker has served yet is
    accepted: the run is queued and waits for a worker that serves it (`strict`
    refuses such a name with a 404 instead; a name close to served ones comes
    back with a `warning`, `warning_code` `unknown_workflow`). So is a `task_queue`
    that no group, worker or deploy has ever served: `warning_code` `unknown_queue`
    and a `warning` naming the closest known queue, or with `strict` a 404
    `queue_not_found`.

    Idempotent: repeating a start with the same `request_id`, or with the same
    `workflow_id`, workflow and input while that run is open, returns the
    existing run with status 200 and `created: false`. A different start with a
    running `workflow_id` is a 409.
    """
    ctx = context(request)
    queue = body.task_queue or DEFAULT_QUEUE
    check_depth(body.input, f"the input of workflow {body.workflow!r}")
    name, inputs, version = start_input(body.workflow, body.input)
    warning = await check_start(ctx.store, name, queue, strict=body.strict, known=ctx.known_queues)
    run_id = body.request_id or uuid.uuid4().hex
    if body.request_id is not None:
        earlier = await ctx.store.get_run(run_id)
        if earlier is not None:
            return _again(earlier, body, name, response)
    workflow_id = body.workflow_id or f"{name}-{run_id}"
    start = StartRequest(run_id, workflow_id, name, inputs, queue, version, ctx.clock.now())
    try:
        run = await ctx.store.start_run(start)
    except WorkflowAlreadyRunningError as exc:
        running = await ctx.store.get_run(exc.run_id)
        if running is None or (running.workflow_name, running.input, running.task_queue) != (
            name,
            inputs,
            queue,
        ):
            raise
        response.status_code = 200
        return StartResult(
            workflow_name=name, workflow_id=workflow_id, run_id=running.run_id, created=False
        )
    await _audit(ctx, principal, run, queue)
    return StartResult(
        workflow_name=run.workflow_name,
        workflow_id=run.workflow_id,
        run_id=run.run_id,
        created=True,
        warning=warning.text if warning else None,
        warning_code=warning.code if warning else None,
    )


def _again(earlier: RunRecord, body: StartBody, name: str, response: Response) -> StartResult:
    same_id = body.workflow_id is None or body.workflow_id == earlier.workflow_id
    if not same_id or earlier.workflow_name != name:
        raise ApiError(
            409,
            "request_conflict",
            f"request_id {earlier.run_id} already started run {earlier.run_id} of "
            f"{earlier.workflow_name!r} (workflow id {earlier.workflow_id!r}); "
            "use a new request_id for a different start",
        )
    response.status_code = 200
    return StartResult(
        workflow_name=earlier.workflow_name,
        workflow_id=earlier.workflow_id,
        run_id=earlier.run_id,
        created=False,
    )


async def _audit(ctx: ServerContext, who: Principal, run: RunRecord, queue: str) -> None:
    entry = AuditEntry(
        at=ctx.clock.now(),
        actor_kind=who.kind,
        actor_id=who.id,
        action="workflow.trigger",
        workflow_id=run.workflow_id,
        run_id=run.run_id,
        detail={"workflow": run.workflow_name, "task_queue": queue},
    )
    await ctx.store.append_audit(entry)


@router.get("/runs", response_model=RunList, responses=documented(), summary="List runs")
async def list_runs(
    request: Request,
    _: ReadsRuns,
    filters: Annotated[RunFilter, Depends(run_filter)],
    cursor: Annotated[
        str | None,
        Query(max_length=200, description="The `next_cursor` of the previous page."),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    offset: Annotated[
        int | None,
        Query(ge=0, le=1_000_000_000, description="Old paging by position; prefer `cursor`."),
    ] = None,
) -> RunList:
    """Runs, newest first, filtered by status (one or several: `status=a&status=b` or
    `status=a,b`), workflow name, creation time (UNIX seconds: `since <= created_at <
    until`; `created_after`/`created_before` are the same), `id` (a workflow id or run
    id equal to it or starting with it) and `q` (a case-insensitive substring of the
    workflow id, run id, workflow name, blocked reason or error). Pages are keyset
    pages: pass `next_cursor` back as `cursor`; it is null on the last page."""
    if cursor is not None and offset:
        raise ApiError(400, "invalid_request", "pass either cursor or offset, not both")
    after = RunCursor.decode(cursor) if cursor is not None else None
    ctx = context(request)
    page = await ctx.store.page_runs(filters, limit=limit, after=after, offset=offset or 0)
    served = await _served(ctx, page.runs)
    more = page.next_cursor is not None
    return RunList(
        runs=[RunView.of(r, served) for r in page.runs],
        next_cursor=page.next_cursor.encode() if page.next_cursor is not None else None,
        next_offset=(offset or 0) + limit if more and offset is not None else None,
    )


@router.get(
    "/runs/{workflow_id:kgid}/history",
    response_model=HistoryView,
    responses=documented(404),
    summary="A run's history",
)
async def history(
    workflow_id: WorkflowIdPath,
    request: Request,
    _: ReadsRuns,
    run_id: RunIdQuery = None,
) -> HistoryView:
    """Every event of the run in order: the format of `keepgoing history export`."""
    store = context(request).store
    run = await find_run(store, workflow_id, run_id)
    events = await store.read_history(run.run_id)
    return HistoryView(
        workflow_id=run.workflow_id, run_id=run.run_id, events=[encode(e) for e in events]
    )


@router.get(
    "/runs/{workflow_id:kgid}/result",
    response_model=ResultView,
    responses=documented(404),
    summary="Wait for a run's result",
)
async def result(
    workflow_id: WorkflowIdPath,
    request: Request,
    _: ReadsRuns,
    run_id: RunIdQuery = None,
    timeout: Annotated[float, Query(ge=0, le=60, allow_inf_nan=False)] = 30.0,
) -> ResultView:
    """A long poll: answers when the run ends (or is blocked), or after `timeout`
    seconds (at most 60, capped by the server) with `done: false`."""
    ctx = context(request)
    key = WaitKey()  # the store remembers what each waiter has seen, by weak reference
    deadline = ctx.clock.monotonic() + min(timeout, ctx.long_poll_max)
    await ctx.store.wait_for_change(0, key)  # from here on, no change is missed
    while True:
        run = await find_run(ctx.store, workflow_id, run_id)
        done = run.status in TERMINAL or run.status == "blocked"
        left = deadline - ctx.clock.monotonic()
        if done or left <= 0:
            return ResultView(done=done, run=RunView.of(run))
        await ctx.store.wait_for_change(min(left, 1.0), key)


@router.get(
    "/runs/{workflow_id:kgid}/lineage",
    response_model=LineageView,
    responses=documented(404),
    summary="A run's parent and children",
)
async def lineage(workflow_id: WorkflowIdPath, request: Request, _: ReadsRuns) -> LineageView:
    """The newest run of the workflow id, the run that started it, and the runs it started."""
    store = context(request).store
    found = await store.lineage(workflow_id)
    return LineageView(
        run=RunView.of(found.run),
        parent=RunView.of(found.parent) if found.parent is not None else None,
        children=[RunView.of(c) for c in found.children],
        **origins_view(await store.run_origins(found.run.run_id)),
    )


@router.post(
    "/runs/{workflow_id:kgid}/cancel",
    status_code=202,
    response_model=CancelResult,
    responses=documented(404, 409, reads=False),
    summary="Cancel a run",
)
async def cancel(
    workflow_id: WorkflowIdPath,
    request: Request,
    principal: CancelsRuns,
    body: CancelBody | None = None,
) -> CancelResult:
    """Ask the open run to stop: its workflow sees `CancelledError` at its current
    await and its `finally` blocks run. A run that has ended is a 409."""
    ctx = context(request)
    body = body or CancelBody.model_validate({})
    run = await ctx.store.cancel_run(
        CancelRequest(
            workflow_id=workflow_id,
            reason=body.reason or f"cancelled by {principal.kind} {principal.id}",
            actor_kind=principal.kind,
            actor_id=principal.id,
            now=ctx.clock.now(),
            run_id=body.run_id,
        )
    )
    return CancelResult(run=RunView.of(run))


@router.post(
    "/runs/{workflow_id:kgid}/unblock",
    response_model=UnblockResult,
    responses=documented(404, 409, reads=False),
    summary="Retry a blocked run now",
)
async def unblock(
    workflow_id: WorkflowIdPath,
    request: Request,
    principal: CancelsRuns,
    body: UnblockBody | None = None,
) -> UnblockResult:
    """Make the blocked run runnable again (permission `runs.cancel` or `admin`): the
    next worker that serves it replays it. If its code replays the history the run
    continues and no finished step runs again; if not, it is blocked again with the
    new diff. A run that is not blocked is a 409 (`workflow_not_running`)."""
    ctx = context(request)
    body = body or UnblockBody.model_validate({})
    now = ctx.clock.now()
    run = await ctx.store.unblock_run(workflow_id, body.run_id, now)
    await ctx.store.append_audit(
        AuditEntry(
            at=now,
            actor_kind=principal.kind,
            actor_id=principal.id,
            action="workflow.unblock",
            workflow_id=run.workflow_id,
            run_id=run.run_id,
        )
    )
    return UnblockResult(run=RunView.of(run))


@router.get(
    "/runs/{workflow_id:kgid}",
    response_model=RunView,
    responses=documented(404),
    summary="Get a run",
)
async def get_run(
    workflow_id: WorkflowIdPath,
    request: Request,
    _: ReadsRuns,
    run_id: RunIdQuery = None,
) -> RunView:
    """The newest run of the workflow id, or the run `run_id` of it."""
    ctx = context(request)
    run = await find_run(ctx.store, workflow_id, run_id)
    view = RunView.of(run, await _served(ctx, [run]))
    slot = await ctx.store.schedule_of_run(run.run_id)
    if slot is not None:
        view.schedule_id, view.schedule_slot = slot.schedule_id, slot.slot_at
    return view


async def _served(ctx: ServerContext, runs: Sequence[RunRecord] = ()) -> Served:
    return await serving(ctx.store, ctx.clock.now(), runs)
