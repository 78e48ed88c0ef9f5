"""Bodies of the operation routes: an operation's status, the review queue, a review."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["OperationList", "OperationView", "ReviewBody"]


class OperationView(BaseModel):
    model_config = ConfigDict(extra="forbid")

    operation_id: str
    status: Literal["pending", "running", "uncertain", "completed", "failed", "cancelled"]
    workflow_id: str
    run_id: str
    run_status: str
    task: str = Field(description="The task's registered name.")
    cmd: int = Field(description="The step carrying the operation now (its newest round).")
    rounds: list[int] = Field(
        description="Every step that carried the operation: the first, then each one a "
        "reviewer sent back to run again."
    )
    attempts: int = Field(description="Attempts over every round.")
    result: Any = Field(None, description="What the step returned, or what a reviewer approved.")
    error: dict[str, Any] | None = Field(
        None, description="The last attempt's error {type, message, traceback}."
    )
    waiting_for_review: bool = Field(
        description="Uncertain, its run is open and the workflow still waits for a "
        "decision: a decision will resume it."
    )
    abandoned_at: float | None = Field(
        None,
        description="When the workflow stopped waiting for a review of the newest round "
        "(a timeout or a cancellation around its await); decisions are refused from then on.",
    )
    evidence: dict[str, Any] | None = Field(
        None,
        description="For an uncertain operation: error, inputs {args, kwargs}, attempts "
        "[{attempt, worker, started_at, ended_at, outcome, error}] and logs (what the "
        "attempt printed).",
    )
    reviews: list[dict[str, Any]] = Field(
        description="Decisions taken, oldest first: cmd, decision, reason, sender_kind, "
        "sender_id, at."
    )
    updated_at: float


class OperationList(BaseModel):
    model_config = ConfigDict(extra="forbid")

    operations: list[OperationView]


class ReviewBody(BaseModel):
    model_config = ConfigDict(extra="ignore")

    decision: Literal["approve", "retry", "fail"]
    result: Any = Field(
        None, description="With approve: what the step returns (any JSON, at most 256 KiB)."
    )
    reason: str | None = Field(None, max_length=2000, description="Why; shown in the audit log.")
