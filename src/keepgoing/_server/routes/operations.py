"""Operation status for callers, and the review queue of uncertain outcomes.

The rules are ``keepgoing._views.operations`` (shared with the client's store
backend and the CLI). Reading needs ``runs.read``; a review is a message to
the run, so it needs ``messages.send``, carries the token's identity as its
sender and is audited (``message.send`` and ``operation.review``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request

from keepgoing._server.auth import ReadsRuns, SendsMessages
from keepgoing._server.context import context
from keepgoing._server.operation_schemas import OperationList, OperationView, ReviewBody
from keepgoing._server.routes._common import PREFIX, STRICT, check_depth, documented
from keepgoing._views import operations

__all__ = ["router"]

router = APIRouter(prefix=PREFIX, tags=["operations"], dependencies=STRICT)


# Documented, and checked by the operation rules (a 400 naming the problem), not by
# FastAPI (whose answer would be a generic 400).
OperationIdPath = Annotated[
    str,
    Path(
        description="An id `operation_id()` returned inside a task: `op-<run_id>-<step>`.",
        json_schema_extra={"pattern": operations.ID_PATTERN, "maxLength": 220},
    ),
]


def _view(found: operations.Operation) -> OperationView:
    return OperationView(**found.as_dict())


@router.get(
    "/operations/{operation_id}",
    response_model=OperationView,
    responses=documented(404),
    summary="An operation's status",
)
async def get_operation(
    operation_id: OperationIdPath, request: Request, _: ReadsRuns
) -> OperationView:
    """The status of the step whose task got this id from `operation_id()`: `pending`,
    `running`, `uncertain` (its attempt raised `UncertainOutcome`; `waiting_for_review`
    while the run is open, with the `evidence`), `completed` (with `result`), `failed`
    or `cancelled`. A caller that lost its answer reconciles with it. An id that is not
    `op-<run_id>-<step>` (or is over 220 characters) is a 400; an unknown one a 404."""
    found = await operations.read_operation(context(request).store, operation_id)
    return _view(found)


@router.post(
    "/operations/{operation_id}/review",
    response_model=OperationView,
    status_code=202,
    responses=documented(404, 409, reads=False),
    summary="Decide an uncertain operation",
)
async def review(
    operation_id: OperationIdPath, body: ReviewBody, request: Request, principal: SendsMessages
) -> OperationView:
    """Send a reviewer's decision to the run waiting at the step: `approve` (the step
    returns `result`), `retry` (it runs again under the same operation id) or `fail`.
    The reviewer is the token's identity. An operation not waiting for review is a 409.
    Answers the operation as it stood before the decision."""
    ctx = context(request)
    check_depth(body.result, f"the result approved for operation {operation_id[:60]!r}")
    found = await operations.review_operation(
        ctx.store,
        operation_id,
        body.decision,
        result=body.result,
        reason=body.reason,
        sender_kind=principal.kind,
        sender_id=principal.id,
        now=ctx.clock.now(),
    )
    return _view(found)


@router.get(
    "/reviews",
    response_model=OperationList,
    responses=documented(),
    summary="Operations waiting for review",
)
async def reviews(
    request: Request,
    _: ReadsRuns,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> OperationList:
    """Uncertain operations of open runs, oldest run first, each with its evidence."""
    found = await operations.read_reviews(context(request).store, limit=limit)
    return OperationList(operations=[_view(o) for o in found])
