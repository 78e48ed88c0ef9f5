"""Kill the worker: by its id, or the one running a run's current step.

A plain ``keepgoing worker`` on this server's machine is sent ``SIGKILL``
through its registered pid, after proving that the process at that pid is that
worker: it started at the recorded time and holds the nonce whose hash the row
carries (``_worker/process.py``). A worker elsewhere, one that did not register
its identity, and a row that names a process it cannot prove (a forged row) are
refused with 409 ``worker_not_killable`` naming why, and the refusal is audited
(``worker.kill_refused``), so an attempt to kill through a forged row is on
record. Each kill is audited (``worker.kill``) with the caller as its actor, and
recorded as a stop of that worker before the signal (``_worker/worker_stops.py``),
so the attempts it loses carry the cause ``killed_by_request`` and count
against no limit, unless the request came from the worker's own process or a
descendant of it (found from the request's connection, ``_procinfo.peer_pid``):
a task killing its own worker is ``stopped_by_task`` and counts against its
``max_worker_losses`` (``_store/worker_stops.py``).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

from fastapi import APIRouter, Path, Request
from pydantic import BaseModel, ConfigDict, Field

from keepgoing._procinfo import peer_pid
from keepgoing._server.auth import Principal, require
from keepgoing._server.context import ServerContext, context
from keepgoing._server.errors import ApiError
from keepgoing._server.inspect_schemas import KillResult
from keepgoing._server.routes._common import (
    PREFIX,
    STRICT,
    WorkflowIdPath,
    documented,
    find_run,
)
from keepgoing._server.schemas import ID_PATTERN
from keepgoing._store.records import AuditEntry, RunRecord, WorkerRecord, WorkerStop
from keepgoing._store.worker_stops import KILLED_BY_REQUEST
from keepgoing._worker import process
from keepgoing._worker.worker_stops import kill_recorded

__all__ = ["router"]

router = APIRouter(prefix=PREFIX, tags=["workers"], dependencies=STRICT)

KillsWorkers = Annotated[Principal, require("workers.kill")]
WorkerIdPath = Annotated[
    str, Path(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@+-]{0,199}$", description="A worker id.")
]


#: Where a kill was asked from, as the caller says; it only labels the loss
#: ("worker killed from the UI by alice"), the actor is the authenticated caller.
Via = Literal["api", "ui", "cli"]


class KillBody(BaseModel):
    model_config = ConfigDict(extra="ignore")

    via: Via = Field(default="api", description="Where the kill was asked from.")


class KillRunBody(KillBody):
    model_config = ConfigDict(extra="ignore")

    run_id: str | None = Field(default=None, pattern=ID_PATTERN)
    cmd: int | None = Field(
        default=None,
        ge=1,
        le=2**31,
        description="The step whose worker to kill (default: "
        "the step started last among the running ones).",
    )


async def _kill(
    ctx: ServerContext,
    who: Principal,
    worker: WorkerRecord,
    run: RunRecord | None = None,
    cmd: int | None = None,
    via: str = "api",
    origin: int | None = None,
) -> KillResult:
    # The stop is recorded before the signal, so the reaper that takes the
    # worker's attempts knows the loss was asked for (``_store/worker_stops.py``); the
    # store traces it to the task when ``origin`` is the worker's own process.
    stop = WorkerStop(worker.worker_id, KILLED_BY_REQUEST, who.kind, who.id, via, origin_pid=origin)
    try:
        killed = await kill_recorded(ctx.store, worker, stop, ctx.clock.now())
    except process.NotKillable as exc:
        refused = {
            "worker_id": worker.worker_id,
            "host": worker.host,
            "pid": worker.pid,
            "via": via,
        }
        await _audit(ctx, who, run, "worker.kill_refused", {**refused, "reason": exc.reason})
        raise ApiError(
            409,
            "worker_not_killable",
            f"worker {worker.worker_id}: {exc}",
            {"reason": exc.reason, "worker_id": worker.worker_id, "host": worker.host},
        ) from None
    detail: dict[str, object] = {
        "worker_id": worker.worker_id,
        "host": killed.host,
        "pid": killed.pid,
        "via": via,
    }
    if cmd is not None:
        detail["cmd"] = cmd
    await _audit(ctx, who, run, "worker.kill", detail)
    return KillResult(
        worker_id=worker.worker_id,
        host=killed.host,
        pid=killed.pid,
        run_id=run.run_id if run is not None else None,
        cmd=cmd,
    )


async def _audit(
    ctx: ServerContext,
    who: Principal,
    run: RunRecord | None,
    action: str,
    detail: dict[str, object],
) -> None:
    await ctx.store.append_audit(
        AuditEntry(
            at=ctx.clock.now(),
            actor_kind=who.kind,
            actor_id=who.id,
            action=action,
            workflow_id=run.workflow_id if run is not None else None,
            run_id=run.run_id if run is not None else None,
            detail=detail,
        )
    )


async def _requester(request: Request) -> int | None:
    """The process on this machine that sent ``request``, if it can be found (a scan
    of ``/proc``, on a thread: the event loop goes on)."""
    client, server = request.client, request.scope.get("server")
    if client is None or not server or not client.port:
        return None
    peer, local = (client.host, client.port), (str(server[0]), int(server[1]))
    return await asyncio.to_thread(peer_pid, peer, local)


async def _worker(ctx: ServerContext, worker_id: str) -> WorkerRecord:
    for worker in await ctx.store.list_workers():
        if worker.worker_id == worker_id:
            return worker
    raise ApiError(
        404, "worker_not_found", f"no registered worker {worker_id!r} (it may have stopped)"
    )


@router.post(
    "/workers/{worker_id}/kill",
    response_model=KillResult,
    responses=documented(404, 409, reads=False),
    summary="Kill a worker (SIGKILL)",
)
async def kill_worker(
    worker_id: WorkerIdPath,
    request: Request,
    principal: KillsWorkers,
    body: KillBody | None = None,
) -> KillResult:
    """Send `SIGKILL` to a plain `keepgoing worker` on this server's machine, by its
    registered pid once it is checked to still be that worker (permission
    `workers.kill` or `admin`). Its attempts are retried on other workers, as after
    any crash, and each such loss is recorded with cause `killed_by_request` and the
    caller as its actor: it does not count against the task's `max_worker_losses`,
    unless the request comes from that worker's own process or a descendant of it
    (a task killing its own worker): then the cause is `stopped_by_task`, which
    counts. A worker on another host, or inside another program, is a 409
    `worker_not_killable` whose `details.reason` says why."""
    ctx = context(request)
    via = body.via if body is not None else "api"
    worker = await _worker(ctx, worker_id)
    return await _kill(ctx, principal, worker, via=via, origin=await _requester(request))


@router.post(
    "/runs/{workflow_id:kgid}/kill-worker",
    response_model=KillResult,
    responses=documented(404, 409, reads=False),
    summary="Kill the worker running a run's current step",
)
async def kill_run_worker(
    workflow_id: WorkflowIdPath,
    request: Request,
    principal: KillsWorkers,
    body: KillRunBody | None = None,
) -> KillResult:
    """Find the worker running the run's current step (or step `cmd`) and kill it as
    `POST /workers/{id}/kill` does. 409 `nothing_running` when no step of the run is
    running now."""
    ctx = context(request)
    body = body or KillRunBody()
    run = await find_run(ctx.store, workflow_id, body.run_id)
    rows = [
        t
        for t in await ctx.store.run_tasks(run.run_id)
        if t.status == "running" and t.lease_owner and (body.cmd is None or t.cmd == body.cmd)
    ]
    if run.status != "running" or not rows:
        which = f"step {body.cmd} of " if body.cmd is not None else ""
        raise ApiError(
            409,
            "nothing_running",
            f"no worker is running {which}run {run.run_id} now (it is {run.status})",
        )
    current = max(rows, key=lambda t: (t.started_at or 0.0, t.cmd))
    assert current.lease_owner is not None
    worker = await _worker(ctx, current.lease_owner)
    return await _kill(
        ctx, principal, worker, run, current.cmd, body.via, await _requester(request)
    )
