"""Batch start: many runs of one workflow in one store commit, all or none."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, Request, Response

from keepgoing._server.auth import Principal, Triggers
from keepgoing._server.batch_schemas import StartManyBody, StartManyResult
from keepgoing._server.context import ServerContext, context
from keepgoing._server.errors import ApiError
from keepgoing._server.routes._common import PREFIX, STRICT, check_depth, documented
from keepgoing._server.routes.runs import DEFAULT_QUEUE
from keepgoing._server.schemas import StartResult
from keepgoing._store.records import AuditEntry, RunRecord, StartRequest
from keepgoing._views.batch import naming, refuse_repeats
from keepgoing._views.catalog import check_start
from keepgoing._workflow.inputs import start_flow, start_input
from keepgoing.errors import InvalidRequestError, WorkflowAlreadyRunningError

__all__ = ["router"]

router = APIRouter(prefix=PREFIX, tags=["runs"], dependencies=STRICT)


@router.post(
    "/run-batches",
    status_code=201,
    response_model=StartManyResult,
    responses=documented(
        404,
        409,
        reads=False,
        ok={
            "model": StartManyResult,
            "description": "Every run of the batch was started by an earlier request with "
            "the same `request_ids` (or the batch is empty).",
        },
    ),
    summary="Start many runs in one commit",
)
async def start_runs(
    body: StartManyBody,
    request: Request,
    principal: Triggers,
    response: Response,
) -> StartManyResult:
    """Start one run of the workflow per item of `inputs`, all in one store commit:
    when the answer comes every run is started and durable; on an error none was
    started. At most 1,000 runs; `workflow_ids` and `request_ids`, if given, have one
    item per input and mean what they mean for a single start.

    Idempotent by `request_ids`: repeating a batch with the same keys returns the
    same runs (status 200 and `created: false` when it started none) and starts
    nothing twice. A key that already started a run of another workflow or id is a
    409 `request_conflict`; a `workflow_id` with an open run is a 409
    `workflow_running` (`details.start` is its place in the batch). Lists of
    different lengths, or two items with the same workflow or request id, are a 400.
    """
    ctx = context(request)
    inputs = body.inputs
    queue = body.task_queue or DEFAULT_QUEUE
    for what, items in (("workflow_ids", body.workflow_ids), ("request_ids", body.request_ids)):
        if items is not None and len(items) != len(inputs):
            raise ApiError(
                400,
                "invalid_request",
                f"trigger_many got {len(inputs)} inputs but {len(items)} {what}: give one per run",
            )
    if not inputs:
        response.status_code = 200
        return StartManyResult(runs=[])
    warning = await check_start(
        ctx.store, body.workflow, queue, strict=body.strict, known=ctx.known_queues
    )
    now = ctx.clock.now()
    starts: list[StartRequest] = []
    for i, value in enumerate(inputs):
        with naming(i):
            check_depth(value, f"the input of workflow {body.workflow!r}")
            name, stored, version = start_input(body.workflow, value)
            flow, flow_key = start_flow(name, stored)
        run_id = body.request_ids[i] if body.request_ids is not None else uuid.uuid4().hex
        given = body.workflow_ids[i] if body.workflow_ids is not None else None
        starts.append(
            StartRequest(
                run_id,
                given or f"{name}-{run_id}",
                name,
                stored,
                queue,
                version,
                now,
                priority=body.priority,
                flow=flow,
                flow_key=flow_key,
            )
        )
    refuse_repeats([s.run_id for s in starts], "request_id")
    refuse_repeats([s.workflow_id for s in starts], "workflow_id")
    try:
        started = await ctx.store.start_runs(starts)
    except WorkflowAlreadyRunningError as exc:
        notes = getattr(exc, "__notes__", [])
        at = next((i for i, s in enumerate(starts) if s.workflow_id == exc.workflow_id), None)
        raise ApiError(
            409,
            exc.code,
            "; ".join([str(exc), *notes]),
            {"workflow_id": exc.workflow_id, "run_id": exc.run_id, "start": at, "notes": notes},
        ) from exc
    except InvalidRequestError as exc:  # a request_id that started another run
        raise ApiError(409, "request_conflict", str(exc)) from exc
    created = [run for run, new in started if new]
    if created:
        await _audit(ctx, principal, created, queue)
    else:
        response.status_code = 200
    return StartManyResult(
        runs=[
            StartResult(
                workflow_name=run.workflow_name,
                workflow_id=run.workflow_id,
                run_id=run.run_id,
                created=new,
                existing=run.run_id != start.run_id,  # a singleton's skip
            )
            for (run, new), start in zip(started, starts, strict=True)
        ],
        warning=warning.text if warning else None,
        warning_code=warning.code if warning else None,
    )


async def _audit(ctx: ServerContext, who: Principal, runs: list[RunRecord], queue: str) -> None:
    """One entry for the batch: how many runs it started, and their run ids."""
    entry = AuditEntry(
        at=ctx.clock.now(),
        actor_kind=who.kind,
        actor_id=who.id,
        action="workflow.trigger_many",
        detail={
            "workflow": runs[0].workflow_name,
            "task_queue": queue,
            "runs": len(runs),
            "run_ids": [run.run_id for run in runs],
        },
    )
    await ctx.store.append_audit(entry)
