"""Bodies of the batch start route: many runs of one workflow in one commit."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from keepgoing._server.schemas import ID_PATTERN, StartResult
from keepgoing._views.batch import MAX_BATCH

__all__ = ["StartManyBody", "StartManyResult"]

_WorkflowId = Annotated[str, Field(pattern=ID_PATTERN)]
_RequestId = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]


class StartManyBody(BaseModel):
    model_config = ConfigDict(extra="ignore")  # as every request body

    workflow: str = Field(min_length=1, max_length=200, description="The workflow's name.")
    inputs: list[dict[str, Any] | list[Any] | None] = Field(
        max_length=MAX_BATCH,
        description=f"One input per run (at most {MAX_BATCH}), each as `input` of a single "
        "start: parameter names to JSON values, or a list of positional values.",
    )
    workflow_ids: list[_WorkflowId] | None = Field(
        None,
        max_length=MAX_BATCH,
        description="Your id for each run, one per input; the default is `<workflow>-<run id>`.",
    )
    request_ids: list[_RequestId] | None = Field(
        None,
        max_length=MAX_BATCH,
        description="An idempotency key (32 hex digits) per input: repeating the batch "
        "with the same keys returns the runs it started and starts nothing twice. Each "
        "becomes its run's id.",
    )
    task_queue: str | None = Field(None, pattern=ID_PATTERN)
    strict: bool = Field(
        False,
        strict=True,
        description="Refuse (404 `workflow_not_found`) a workflow name that no worker of "
        "this store has served.",
    )
    priority: int = Field(
        0,
        strict=True,
        ge=-1_000_000,
        le=1_000_000,
        description="Every run's priority (higher first; a point is worth a minute of waiting).",
    )


class StartManyResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    runs: list[StartResult] = Field(
        description="One per input, in order; `created` is false for a run an earlier "
        "request with the same `request_id` started."
    )
    warning: str | None = Field(
        default=None,
        description="Set when no worker has served the name but it is close to names "
        "that have been served (a likely typo), or when nothing has ever served the "
        "queue; the runs are queued all the same.",
    )
    warning_code: str | None = Field(
        default=None,
        description="What the warning is: `unknown_workflow` or `unknown_queue`.",
    )
