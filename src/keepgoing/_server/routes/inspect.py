"""Inspecting runs: counts by status, a run's steps and its attempts' logs.

The steps are derived by ``keepgoing._views.steps`` (shared with the CLI).

The counts sit at ``/run-counts``, outside ``/runs/``: every path under it is a
run's, so a workflow whose id is ``counts`` is still readable.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from keepgoing._server.auth import ReadsRuns
from keepgoing._server.context import context
from keepgoing._server.inspect_schemas import AttemptLogList, AttemptLogView, RunCounts, StepsView
from keepgoing._server.routes._common import (
    PREFIX,
    STRICT,
    RunIdQuery,
    WorkflowIdPath,
    documented,
    find_run,
)
from keepgoing._server.routes.run_filters import run_filter
from keepgoing._store.inspect_protocol import RunFilter
from keepgoing._views import steps as run_steps

__all__ = ["router"]

router = APIRouter(prefix=PREFIX, tags=["runs"], dependencies=STRICT)


@router.get("/run-counts", response_model=RunCounts, responses=documented(), summary="Count runs")
async def counts(
    request: Request, _: ReadsRuns, filters: Annotated[RunFilter, Depends(run_filter)]
) -> RunCounts:
    """How many runs in each status match the filters (the same filters as the list),
    and how many carry each trouble marker. The navigation's count of runs waiting
    for review is `trouble.waiting_for_review`."""
    store = context(request).store
    found = await store.count_runs_by_status(filters)
    trouble = await store.count_trouble(filters)
    return RunCounts(counts=found, total=sum(found.values()), trouble=trouble)


@router.get(
    "/runs/{workflow_id:kgid}/logs",
    response_model=AttemptLogList,
    responses=documented(404),
    summary="What a run's attempts printed",
)
async def logs(
    workflow_id: WorkflowIdPath,
    request: Request,
    _: ReadsRuns,
    run_id: RunIdQuery = None,
    cmd: Annotated[int | None, Query(ge=1, le=2**31, description="One step.")] = None,
    attempt: Annotated[int | None, Query(ge=1, le=2**31, description="One attempt.")] = None,
) -> AttemptLogList:
    """Each attempt's stdout, stderr and `logging` records, as its worker stored them
    with the attempt's outcome: at most 64 KiB per attempt (cut with a marker), with
    secrets redacted. An attempt whose worker died before recording its outcome has
    no log."""
    store = context(request).store
    run = await find_run(store, workflow_id, run_id)
    found = await store.attempt_logs(run.run_id, cmd=cmd, attempt=attempt)
    return AttemptLogList(
        workflow_id=run.workflow_id,
        run_id=run.run_id,
        logs=[
            AttemptLogView(
                cmd=x.cmd,
                attempt=x.attempt,
                worker_id=x.worker_id,
                at=x.at,
                text=x.text,
                size=x.size,
                truncated=x.truncated,
            )
            for x in found
        ],
    )


@router.get(
    "/runs/{workflow_id:kgid}/steps",
    response_model=StepsView,
    responses=documented(404),
    summary="A run's steps for the checkpoint inspector",
)
async def steps(
    workflow_id: WorkflowIdPath,
    request: Request,
    _: ReadsRuns,
    run_id: RunIdQuery = None,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
) -> StepsView:
    """Each task step, by `cmd`: its inputs, output, status, every attempt (worker,
    start, end, duration, error with traceback, `outcome` and `cause` — e.g.
    `worker_lost` with the dead worker's id, or `killed_by_request` with who asked),
    its operation id, the volume versions it wrote, `reused_output` when a
    replacement worker carried on from its saved output, and `usage`: its model
    calls' tokens and cost from the gateway's ledger, on the step and on each attempt
    (so a retried step shows what each attempt cost). Paged by `offset`/`limit`."""
    store = context(request).store
    run = await find_run(store, workflow_id, run_id)
    events = await store.read_history(run.run_id)
    tasks = await store.run_tasks(run.run_id)
    # Kills by worker id name no run: every recent one, matched by the worker.
    kills = await store.list_audit(action="worker.kill", limit=1000)
    usage = await store.gateway_usage(run_steps.usage_query(run.run_id))
    every = run_steps.build_steps(run.run_id, events, tasks, kills, usage.rows)
    found = run_steps.page(every, offset, limit)
    return StepsView(
        workflow_id=run.workflow_id,
        run_id=run.run_id,
        status=run.status,
        total=found.total,
        next_offset=found.next_offset,
        steps=[s.as_dict() for s in found.steps],
    )
