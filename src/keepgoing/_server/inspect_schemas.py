"""Response bodies of the inspection routes: counts, steps, logs, kills, streams."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "AttemptLogList",
    "AttemptLogView",
    "KillResult",
    "RunCounts",
    "StepsView",
]


class _Response(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RunCounts(_Response):
    counts: dict[str, int] = Field(
        description="How many runs matching the filters are in each status (statuses with "
        "none are left out)."
    )
    total: int
    trouble: dict[str, int] = Field(
        default_factory=dict,
        description="How many runs matching the filters carry each trouble marker "
        "(worker_lost, retried, rate_limited, waiting_for_review, blocked).",
    )


class AttemptLogView(_Response):
    cmd: int
    attempt: int
    worker_id: str
    at: float = Field(description="When the attempt's outcome (and so its log) was stored.")
    text: str = Field(
        description="stdout, stderr and logging records, interleaved as written; secrets "
        "redacted; cut at the bound with a marker line."
    )
    size: int = Field(description="How many bytes the attempt wrote in all.")
    truncated: bool


class AttemptLogList(_Response):
    workflow_id: str
    run_id: str
    logs: list[AttemptLogView]


class StepsView(_Response):
    workflow_id: str
    run_id: str
    status: str
    total: int = Field(description="How many task steps the run has.")
    next_offset: int | None = Field(description="Pass as `offset` for the next page.")
    steps: list[dict[str, Any]] = Field(
        description="Each step: cmd, name, operation_id, status, inputs {args, kwargs}, "
        "output, error, attempts [{attempt, worker, started_at, ended_at, duration, "
        "outcome, error, cause, killed_by, via, cause_text, counted, retry_at}] (`cause`: "
        "why a lost or released attempt's worker stopped: killed_by_request, scaled_down, "
        "drain_timeout, replaced, hung_restart, shutdown, oom_killed, signalled_by_task, "
        "stopped_by_task, stopped_by_other_step or unexplained; `counted`: "
        "whether it counted against max_worker_losses), memory [{volume, version, ref, "
        "paths, attempt, seq}], completed_by, reused_output, reused_by, scheduled_at."
    )


class KillResult(_Response):
    worker_id: str
    host: str
    pid: int
    signal: str = "SIGKILL"
    run_id: str | None = None
    cmd: int | None = None
    detail: dict[str, Any] = Field(default_factory=dict)
