"""Shared bits of the routes: the documented error responses and run lookup."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path, Query

from keepgoing._server.schemas import ID_PATTERN, ErrorBody
from keepgoing._store.protocol import Store
from keepgoing._store.records import RunRecord
from keepgoing.errors import RunNotFoundError

__all__ = ["PREFIX", "RunIdQuery", "WorkflowIdPath", "documented", "find_run"]

PREFIX = "/api/v1"

_DESCRIPTIONS = {
    400: "Bad JSON, or a field outside the schema (`invalid_request`, `invalid_payload`).",
    401: "No token, or an unknown or revoked one (`unauthenticated`).",
    403: "The token lacks the permission this call needs (`permission_denied`).",
    404: "No such workflow, run or token.",
    409: "A conflict: the workflow id is running, or the run has ended.",
    413: "The body or payload is over its size limit (`payload_too_large`).",
    503: "The store is unavailable (`store_error`).",
}

WorkflowIdPath = Annotated[
    str, Path(pattern=ID_PATTERN, description="The workflow id of the run (its newest run).")
]
RunIdQuery = Annotated[
    str | None, Query(pattern=ID_PATTERN, description="A specific run of the workflow id.")
]


def documented(
    *statuses: int, reads: bool = True, ok: dict[str, Any] | None = None
) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a route: its error statuses (plus 400, 401, 403, 503, and
    413 for a route that takes a body), and ``ok`` as the 200 response if given."""
    every = {400, 401, 403, 503, *statuses}
    if not reads:
        every.add(413)
    found: dict[int | str, dict[str, Any]] = {200: ok} if ok is not None else {}
    for s in sorted(every):
        found[s] = {"model": ErrorBody, "description": _DESCRIPTIONS[s]}
    return found


async def find_run(store: Store, workflow_id: str, run_id: str | None) -> RunRecord:
    """The newest run of ``workflow_id``, or its run ``run_id``.

    Raises:
        RunNotFoundError: no such run.
    """
    if run_id is not None:
        run = await store.get_run(run_id)
        if run is not None and run.workflow_id == workflow_id:
            return run
        raise RunNotFoundError(f"no run {run_id!r} of workflow id {workflow_id!r}")
    found = await store.find_run(workflow_id)
    if found is None:
        raise RunNotFoundError(f"no run has workflow id {workflow_id!r}")
    return found
