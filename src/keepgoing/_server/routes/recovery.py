"""Recovery routes: the progress a run publishes (``keepgoing.set_status``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict

from keepgoing._client.recovery import read_status
from keepgoing._server.auth import ReadsRuns
from keepgoing._server.context import context
from keepgoing._server.routes._common import PREFIX, STRICT, WorkflowIdPath, documented
from keepgoing._store.records import TERMINAL
from keepgoing.errors import InvalidRequestError

__all__ = ["StatusView", "router"]

router = APIRouter(prefix=PREFIX, tags=["runs"], dependencies=STRICT)


class PublishedValue(BaseModel):
    model_config = ConfigDict(extra="forbid")
    value: Any
    at: float


class StatusView(BaseModel):
    """The newest value of each key the run published; ``ended``: it publishes no more."""

    model_config = ConfigDict(extra="forbid")
    workflow_id: str
    run_id: str
    ended: bool
    values: dict[str, PublishedValue]


@router.get(
    "/runs/{workflow_id:kgid}/status",
    response_model=StatusView,
    responses=documented(404),
    summary="The progress a run publishes",
)
async def status(
    workflow_id: WorkflowIdPath,
    request: Request,
    _: ReadsRuns,
    key: Annotated[str | None, Query(max_length=200)] = None,
    wait: Annotated[float | None, Query(ge=0, le=60, allow_inf_nan=False)] = None,
) -> StatusView:
    """The newest values the run published with `keepgoing.set_status`, or only `key`'s.
    With `key` and `wait`, a long poll: answers once the value appears, the run ends,
    or `wait` seconds pass (capped by the server)."""
    ctx = context(request)
    if wait is not None:
        wait = min(wait, ctx.long_poll_max)
    try:
        found = await read_status(ctx.store, workflow_id, key, wait)
    except ValueError as exc:
        raise InvalidRequestError(str(exc)) from None
    return StatusView(
        workflow_id=found.run.workflow_id,
        run_id=found.run.run_id,
        ended=found.run.status in TERMINAL,
        values={v.name: PublishedValue(value=v.value, at=v.at) for v in found.values},
    )
