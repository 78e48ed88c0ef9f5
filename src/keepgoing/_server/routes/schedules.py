"""Schedules: list, show, create, change, pause, unpause, trigger, backfill, delete.

Permissions: ``schedules.read`` to list and show, ``schedules.write`` for the
rest (``admin`` implies both). Every change goes through
:mod:`keepgoing._schedules.commands`, which audits it with the caller as the
actor. ``POST /declared-schedules`` is what a deploy over HTTP sends: the
schedules its file declares, kept in step as ``_schedules/declared.py`` says.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from pydantic import Field

from keepgoing._schedules import commands as ops
from keepgoing._schedules.commands import Actor, ScheduleRequest
from keepgoing._schedules.declared import declared_from_body, sync_declared
from keepgoing._server.auth import Principal, ReadsSchedules, WritesSchedules
from keepgoing._server.context import context
from keepgoing._server.routes._common import PREFIX, STRICT, documented
from keepgoing._server.schemas import _Request
from keepgoing._store.schedules_protocol import ScheduleAction
from keepgoing.errors import InvalidScheduleError

__all__ = ["router"]

router = APIRouter(prefix=PREFIX, tags=["schedules"], dependencies=STRICT)

ScheduleId = Annotated[
    str, Path(min_length=1, max_length=151, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@+=-]*$")
]
Duration = str | float | None


class ScheduleFields(_Request):
    """The fields of a schedule (see ``Client.create_schedule``)."""

    workflow: str | None = Field(None, min_length=1, max_length=200)
    input: dict[str, Any] | list[Any] | None = Field(
        None, description="Parameter names to values, or positional values."
    )
    cron: str | None = Field(None, max_length=200)
    every: Duration = None
    offset: Duration = None
    timezone: str | None = Field(None, max_length=100)
    overlap: str | None = Field(None, max_length=20)
    catchup_window: Duration = None
    jitter: Duration = None
    task_queue: str | None = Field(None, max_length=200)
    start_at: float | None = None
    end_at: float | None = None
    paused: bool | None = None
    note: str | None = Field(None, max_length=2000)


class CreateBody(ScheduleFields):
    schedule_id: str = Field(min_length=1, max_length=151)


class NoteBody(_Request):
    note: str | None = Field(None, max_length=2000)


class BackfillBody(_Request):
    start: float
    end: float
    overlap: str | None = Field(None, max_length=20)


class DeclaredBody(_Request):
    declared: list[dict[str, Any]] = Field(default_factory=list, max_length=1000)
    queue: str = Field(min_length=1, max_length=200)


def _actor(principal: Principal) -> Actor:
    return Actor(principal.kind, principal.id)


def _action(action: ScheduleAction) -> dict[str, Any]:
    return dict(action.__dict__)


@router.get("/schedules", responses=documented(), summary="List schedules")
async def list_schedules(request: Request, principal: ReadsSchedules) -> dict[str, Any]:
    ctx = context(request)
    found = await ops.list_all(ctx.store, ctx.clock.now())
    return {"schedules": [s.to_body() for s in found]}


@router.post("/schedules", responses=documented(409, reads=False), summary="Create a schedule")
async def create_schedule(
    request: Request, body: CreateBody, principal: WritesSchedules
) -> dict[str, Any]:
    ctx = context(request)
    given = body.model_dump(exclude_none=True, exclude={"schedule_id"})
    if "workflow" not in given:
        raise InvalidScheduleError("a schedule needs its workflow")
    info = await ops.create(
        ctx.store,
        body.schedule_id,
        ScheduleRequest(**given),
        actor=_actor(principal),
        now=ctx.clock.now(),
    )
    return info.to_body()


@router.get("/schedules/{schedule_id}", responses=documented(404), summary="Show a schedule")
async def get_schedule(
    request: Request, schedule_id: ScheduleId, principal: ReadsSchedules
) -> dict[str, Any]:
    ctx = context(request)
    return (await ops.describe(ctx.store, schedule_id, ctx.clock.now())).to_body()


@router.patch(
    "/schedules/{schedule_id}", responses=documented(404, reads=False), summary="Change a schedule"
)
async def update_schedule(
    request: Request, schedule_id: ScheduleId, body: ScheduleFields, principal: WritesSchedules
) -> dict[str, Any]:
    ctx = context(request)
    record = await ctx.store.get_schedule(schedule_id)
    if record is None:
        await ops.describe(ctx.store, schedule_id, ctx.clock.now())  # raises not found
        raise AssertionError
    changes = body.model_dump(exclude_unset=True)
    if changes.get("cron") is not None:
        changes.setdefault("every", None)
        changes.setdefault("offset", None)
    if changes.get("every") is not None:
        changes.setdefault("cron", None)
    req = ops.request_of(record)
    req = ScheduleRequest(**{**req.__dict__, **changes})
    info = await ops.update(
        ctx.store, schedule_id, req, actor=_actor(principal), now=ctx.clock.now()
    )
    return info.to_body()


@router.post(
    "/schedules/{schedule_id}/pause", responses=documented(404, reads=False), summary="Pause"
)
async def pause_schedule(
    request: Request, schedule_id: ScheduleId, body: NoteBody, principal: WritesSchedules
) -> dict[str, Any]:
    ctx = context(request)
    info = await ops.pause(
        ctx.store, schedule_id, note=body.note, actor=_actor(principal), now=ctx.clock.now()
    )
    return info.to_body()


@router.post(
    "/schedules/{schedule_id}/unpause", responses=documented(404, reads=False), summary="Unpause"
)
async def unpause_schedule(
    request: Request, schedule_id: ScheduleId, body: NoteBody, principal: WritesSchedules
) -> dict[str, Any]:
    ctx = context(request)
    info = await ops.unpause(
        ctx.store, schedule_id, note=body.note, actor=_actor(principal), now=ctx.clock.now()
    )
    return info.to_body()


@router.post(
    "/schedules/{schedule_id}/trigger",
    responses=documented(404, reads=False),
    summary="Start one now",
)
async def trigger_schedule(
    request: Request, schedule_id: ScheduleId, principal: WritesSchedules
) -> dict[str, Any]:
    ctx = context(request)
    action = await ops.trigger(ctx.store, schedule_id, actor=_actor(principal), now=ctx.clock.now())
    return _action(action)


@router.post(
    "/schedules/{schedule_id}/backfill",
    responses=documented(404, reads=False),
    summary="Backfill a range",
)
async def backfill_schedule(
    request: Request, schedule_id: ScheduleId, body: BackfillBody, principal: WritesSchedules
) -> dict[str, Any]:
    ctx = context(request)
    actions = await ops.backfill(
        ctx.store,
        schedule_id,
        body.start,
        body.end,
        overlap=body.overlap,
        actor=_actor(principal),
        now=ctx.clock.now(),
    )
    return {"actions": [_action(a) for a in actions]}


@router.delete("/schedules/{schedule_id}", responses=documented(404), summary="Delete a schedule")
async def delete_schedule(
    request: Request, schedule_id: ScheduleId, principal: WritesSchedules
) -> dict[str, Any]:
    ctx = context(request)
    await ops.delete(ctx.store, schedule_id, actor=_actor(principal), now=ctx.clock.now())
    return {"deleted": schedule_id}


@router.post(
    "/declared-schedules",
    responses=documented(reads=False),
    summary="Register a deployed file's declared schedules",
)
async def declared_schedules(
    request: Request, body: DeclaredBody, principal: WritesSchedules
) -> dict[str, Any]:
    ctx = context(request)
    try:
        declared = declared_from_body(body.declared)
    except (TypeError, KeyError) as exc:
        raise InvalidScheduleError(f"a declared schedule is malformed: {exc}") from None
    changes = await sync_declared(
        ctx.store,
        declared,
        workflows=None,
        queue=body.queue,
        actor=_actor(principal),
        now=ctx.clock.now(),
    )
    return {"changes": changes}
