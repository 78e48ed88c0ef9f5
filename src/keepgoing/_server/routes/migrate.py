"""Moving a run in flight to another revision of its worker group (permission
``groups.write``); the move is audited. ``migrate`` is one of the run actions
the raw-path router knows (:mod:`keepgoing._server.routing`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import Field

from keepgoing._groups.upgrade import migrate_run
from keepgoing._server.auth import WritesGroups
from keepgoing._server.context import context
from keepgoing._server.routes._common import PREFIX, STRICT, WorkflowIdPath, documented
from keepgoing._server.routes.groups import _audit
from keepgoing._server.schemas import _Request

__all__ = ["router"]

router = APIRouter(prefix=PREFIX, tags=["groups"], dependencies=STRICT)


class MigrateBody(_Request):
    to_revision: int = Field(ge=1, le=2**31)
    run_id: str | None = Field(None, min_length=1, max_length=200)
    force: bool = False
    check_time_limit: float = Field(60.0, gt=0, le=3600)


@router.post(
    "/runs/{workflow_id:kgid}/migrate",
    responses=documented(404, 409, reads=False),
    summary="Move a run to another revision of its group",
)
async def migrate(
    workflow_id: WorkflowIdPath, request: Request, body: MigrateBody, principal: WritesGroups
) -> dict[str, Any]:
    """Move the open run to revision `to_revision` of the group serving it (permission
    `groups.write`), after replaying its history on that revision's source: a run
    that would block there is a 409 (`deploy_refused`, the report in `details`)
    unless `force`."""
    ctx = context(request)
    moved = await migrate_run(
        ctx.store,
        workflow_id,
        to_revision=body.to_revision,
        now=ctx.clock.now(),
        run_id=body.run_id,
        force=body.force,
        time_limit=body.check_time_limit,
    )
    await _audit(
        request,
        principal,
        "workflow.migrate",
        {"run_id": moved.run_id, "from": moved.from_revision, "to": moved.to_revision},
    )
    return moved.to_body()
