"""Workers and queues, with the depth of each queue, and the flow-control limits."""

from __future__ import annotations

from fastapi import APIRouter, Request

from keepgoing._server.auth import ReadsRuns
from keepgoing._server.context import context
from keepgoing._server.limit_schemas import LimitList, LimitView
from keepgoing._server.routes._common import PREFIX, STRICT, documented
from keepgoing._server.schemas import QueueList, QueueView, WorkerList, WorkerView
from keepgoing._views.queues import queue_summary

__all__ = ["router"]

router = APIRouter(prefix=PREFIX, tags=["workers"], dependencies=STRICT)


@router.get("/workers", response_model=WorkerList, responses=documented(), summary="List workers")
async def list_workers(request: Request, _: ReadsRuns) -> WorkerList:
    """The live workers, oldest first (a worker deregisters when it stops), and apart
    from them those the store marked lost: killed, crashed or past their heartbeat
    deadline, with when and why."""
    workers = await context(request).store.list_workers()
    live = [WorkerView.of(w) for w in workers if w.lost_at is None]
    lost = sorted((w for w in workers if w.lost_at is not None), key=lambda w: -(w.lost_at or 0))
    return WorkerList(workers=live, lost=[WorkerView.of(w) for w in lost])


@router.get("/queues", response_model=QueueList, responses=documented(), summary="List queues")
async def list_queues(request: Request, _: ReadsRuns) -> QueueList:
    """Every queue that has work or a worker, with its depth and how many workers serve it."""
    ctx = context(request)
    rows = await queue_summary(ctx.store, ctx.clock.now())
    return QueueList(queues=[QueueView(**row) for row in rows])


@router.get("/limits", response_model=LimitList, responses=documented(), summary="List limits")
async def list_limits(request: Request, _: ReadsRuns) -> LimitList:
    """Every concurrency and rate limit the workers declared at their start, with its
    use now: slots held, attempts waiting, tokens in the bucket."""
    ctx = context(request)
    return LimitList(limits=[LimitView.of(u) for u in await ctx.store.limit_use(ctx.clock.now())])
