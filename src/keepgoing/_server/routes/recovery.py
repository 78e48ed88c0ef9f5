"""Recovery routes: the progress a run publishes (``keepgoing.set_status``), and
resuming (``runs.resume``) and forking (``runs.fork``) ended runs, audited."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from keepgoing._server.auth import ForksRuns, ReadsRuns, ResumesRuns
from keepgoing._server.context import context
from keepgoing._server.routes._common import PREFIX, STRICT, WorkflowIdPath, documented
from keepgoing._server.schemas import RunView
from keepgoing._store.records import TERMINAL
from keepgoing._views.recovery import Actor, fork, read_status, resume, wait_for_check
from keepgoing.errors import InvalidRequestError, RunNotFoundError

__all__ = ["CheckView", "ForkBody", "RecoveredRun", "ResumeBody", "StatusView", "router"]

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


class ResumeBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    revision: int | None = Field(None, ge=1, description="Pin the new run to this revision.")


class ForkBody(BaseModel):
    model_config = ConfigDict(extra="ignore")
    from_step: int = Field(ge=1, description="The step (its # in the timeline) to run again from.")
    input: Any = Field(None, description="The fork's input (default: the original's).")
    workflow_id: str | None = Field(None, description="The fork's id (default: <id>-fork-<hex>).")
    revision: int | None = Field(None, ge=1)
    wait_for_check: bool = Field(
        False, description="Answer once the fork has passed the check of its reused steps."
    )


class RecoveredRun(BaseModel):
    """The new run, and the run it reuses the history of."""

    model_config = ConfigDict(extra="forbid")
    run: RunView
    origin: RunView
    check: str | None = Field(
        None,
        description="Asked to wait for the check: `passed`, or `pending` when the server's "
        "longest wait passed first (ask `GET /runs/{id}/check` again).",
    )


class CheckView(BaseModel):
    """Whether a resumed or forked run has passed the check of the steps it reuses."""

    model_config = ConfigDict(extra="forbid")
    workflow_id: str
    run_id: str
    check: str


@router.post(
    "/runs/{workflow_id:kgid}/resume",
    status_code=201,
    response_model=RecoveredRun,
    responses=documented(404, 409, reads=False),
    summary="Resume a failed or cancelled run",
)
async def resume_run(
    workflow_id: WorkflowIdPath,
    request: Request,
    principal: ResumesRuns,
    body: ResumeBody | None = None,
) -> RecoveredRun:
    """Go on with the newest run of the id (permission `runs.resume`) as a new run that
    reuses every step finished before its failure; the failed step runs again. An
    open run is a 409 (`workflow_running`), a completed one a 400. Audited."""
    body = body or ResumeBody.model_validate({})
    actor = Actor(principal.kind, principal.id, "api")
    new, old = await resume(context(request).store, workflow_id, body.revision, actor)
    return RecoveredRun(run=RunView.of(new), origin=RunView.of(old), check=None)


@router.post(
    "/runs/{workflow_id:kgid}/fork",
    status_code=201,
    response_model=RecoveredRun,
    responses=documented(404, 409, reads=False),
    summary="Fork an ended run from a step",
)
async def fork_run(
    workflow_id: WorkflowIdPath,
    request: Request,
    principal: ForksRuns,
    body: ForkBody,
    wait_for_check_: Annotated[bool, Query(alias="wait_for_check")] = False,
) -> RecoveredRun:
    """A new run (permission `runs.fork`) that reuses the results of the steps before
    `from_step` and runs the rest, with `input` if given. Only an ended run forks (an
    open one is a 409). Audited. With `wait_for_check` (body field or query), answers
    once the fork's first activation has passed the check of its reused steps, or
    with a 400 `reuse_refused` naming the step and argument that differ."""
    actor = Actor(principal.kind, principal.id, "api")
    ctx = context(request)
    new, old = await fork(
        ctx.store, workflow_id, body.from_step, body.input, body.workflow_id, body.revision, actor
    )
    check = None
    if body.wait_for_check or wait_for_check_:
        passed = await wait_for_check(ctx.store, new, ctx.long_poll_max)
        check = "passed" if passed else "pending"
    return RecoveredRun(run=RunView.of(new), origin=RunView.of(old), check=check)


@router.get(
    "/runs/{workflow_id:kgid}/check",
    response_model=CheckView,
    responses=documented(404),
    summary="Whether a fork has passed the check of its reused steps",
)
async def check_run(
    workflow_id: WorkflowIdPath,
    request: Request,
    _: ReadsRuns,
    wait: Annotated[float | None, Query(ge=0, le=60, allow_inf_nan=False)] = None,
) -> CheckView:
    """`passed` once the newest run of the id has gone past the steps it reuses (or
    reuses none), else `pending`; a refused run is a 400 `reuse_refused`. With `wait`,
    a long poll (capped by the server)."""
    ctx = context(request)
    run = await ctx.store.find_run(workflow_id)
    if run is None:
        raise RunNotFoundError(f"no run has workflow id {workflow_id!r}")
    wait = min(wait or 0.0, ctx.long_poll_max)
    passed = await wait_for_check(ctx.store, run, wait)
    return CheckView(
        workflow_id=run.workflow_id, run_id=run.run_id, check="passed" if passed else "pending"
    )
