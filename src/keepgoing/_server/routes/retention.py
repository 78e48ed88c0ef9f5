"""``GET /api/v1/retention``: the policies in force, so a list can say when a run goes.

A run that ended at ``ended_at`` is deleted from about ``ended_at`` plus its
workflow's policy (``workflows``), else the store's (``runs``); with neither it
is kept. The rule of what may go, whatever its age, is the store's
(``_store/sql/retention.py``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Path, Request
from pydantic import BaseModel, ConfigDict, Field

from keepgoing._server.auth import ReadsRuns
from keepgoing._server.context import context
from keepgoing._server.routes._common import PREFIX, STRICT, documented
from keepgoing._worker.archive import locate, read_archive
from keepgoing._worker.retention import RetentionPolicy
from keepgoing.errors import RunNotFoundError

__all__ = ["router"]

router = APIRouter(prefix=PREFIX, tags=["runs"], dependencies=STRICT)


class RetentionView(BaseModel):
    model_config = ConfigDict(extra="forbid")

    runs: float | None = Field(
        description="The store's policy in seconds after a run ended (null: kept forever)."
    )
    audit: float = Field(description="How long audit entries are kept, in seconds.")
    archive: bool = Field(description="Whether runs are archived before their rows go.")
    workflows: dict[str, float | None] = Field(
        description="Workflows' own policies, by name (null: the store's)."
    )


@router.get("/retention", response_model=RetentionView, responses=documented(), summary="Retention")
async def retention(request: Request, _: ReadsRuns) -> RetentionView:
    """The retention policies in force on this server."""
    ctx = context(request)
    sweep = ctx.orchestrator.retention if ctx.orchestrator is not None else None
    policy = sweep.policy if sweep is not None else RetentionPolicy()
    return RetentionView(
        runs=policy.runs,
        audit=policy.audit,
        archive=policy.archive is not None,
        workflows=await ctx.store.workflow_retention(),
    )


@router.get(
    "/archive/{ident}",
    responses=documented(404),
    summary="An archived run",
)
async def archived(
    request: Request,
    _: ReadsRuns,
    ident: str = Path(description="A run id, or a workflow id (its latest archived run)."),
) -> dict[str, Any]:
    """A run that retention archived and deleted, read from this server's archive:
    ``{"run": {...}, "events": [...], "archived": true}`` (the format of
    `keepgoing history export`, which the replay page opens)."""
    ctx = context(request)
    sweep = ctx.orchestrator.retention if ctx.orchestrator is not None else None
    folder = sweep.policy.archive if sweep is not None else None
    paths = await asyncio.to_thread(locate, folder, ident) if folder else []
    if not paths:
        raise RunNotFoundError(f"no archived run {ident!r}" + ("" if folder else ": no archive"))
    body = await asyncio.to_thread(read_archive, paths[-1])
    return {**body, "archived": True}
