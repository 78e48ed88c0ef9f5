"""Request and response bodies of the HTTP API (they generate ``/openapi.json``).

Request models ignore fields they do not know, so a caller that adds, say,
``sender_kind`` to a message gets it ignored rather than obeyed: the sender
comes from the token alone.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from keepgoing._store.auth_protocol import PERMISSIONS, TokenRecord
from keepgoing._store.records import AuditEntry, RunRecord, WorkerRecord
from keepgoing._store.trouble import markers, run_state
from keepgoing._store.volume_records import FileInfo, VersionInfo
from keepgoing._views.waiting import Served, waiting_for
from keepgoing._volumes.paths import NAME_PATTERN

__all__ = [
    "ID_PATTERN",
    "MAX_VERSION",
    "AuditList",
    "AuditView",
    "CancelBody",
    "CancelResult",
    "ErrorBody",
    "ErrorView",
    "EventBody",
    "EventResult",
    "FileList",
    "FileView",
    "Health",
    "HistoryView",
    "LineageView",
    "MessageBody",
    "MessageResult",
    "QueueList",
    "QueueView",
    "RefView",
    "ResultView",
    "RollbackBody",
    "RunList",
    "RunView",
    "StartBody",
    "StartResult",
    "TokenBody",
    "TokenCreated",
    "TokenList",
    "TokenView",
    "VersionList",
    "VersionView",
    "VolumeDiffView",
    "VolumeList",
    "VolumeView",
    "WorkerList",
    "WorkerView",
]

#: Workflow ids, run ids, queue names and event ids: what ``Client`` accepts too.
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@/+=-]{0,199}$"
NAME = Field(min_length=1, max_length=200)
#: The largest version id a request may name (a 64-bit signed integer, as stored).
MAX_VERSION = 2**63 - 1


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _Response(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- errors ---------------------------------------------------------------------------------
class ErrorBody(_Response):
    """Every error: a stable ``code`` (see ``keepgoing.errors``) and a readable message."""

    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class ErrorView(_Response):
    type: str
    message: str
    traceback: str | None = None


class TroubleView(_Response):
    worker_losses: int = Field(default=0, description="Attempts lost with their worker.")
    retries: int = Field(
        default=0, description="Attempts that raised or timed out and were retried."
    )
    rate_limited: int = Field(
        default=0,
        description="Attempts refused for a rate limit (an HTTP 429, a RateLimit error).",
    )
    reviews_waiting: int = Field(default=0, description="Steps waiting for a review decision now.")


class MarkerView(_Response):
    kind: str = Field(
        description="worker_lost, retried, rate_limited, waiting_for_review or blocked."
    )
    count: int
    text: str = Field(description='The marker in words, such as "worker lost \u00d72".')


# -- runs -------------------------------------------------------------------------------------
class StartBody(_Request):
    workflow: str = Field(min_length=1, max_length=200, description="The workflow's name.")
    input: dict[str, Any] | list[Any] | None = Field(
        None, description="Parameter names to JSON values (or a list of positional values)."
    )
    workflow_id: str | None = Field(
        None,
        pattern=ID_PATTERN,
        description="Your id for the run; the default is `<workflow>-<run id>`.",
    )
    task_queue: str | None = Field(None, pattern=ID_PATTERN)
    request_id: str | None = Field(
        None,
        pattern=r"^[0-9a-f]{32}$",
        description="An idempotency key (32 hex digits): repeating a request with the same "
        "key returns the run it started. It becomes the run id.",
    )
    strict: bool = Field(
        False,
        strict=True,  # a JSON boolean only, as the spec says: not "true" or 1
        description="Refuse (404 `workflow_not_found`) a workflow name that no worker of "
        "this store has served, or (404 `queue_not_found`) a queue that no group, worker "
        "or deploy has served. By default such a run is queued and waits for a worker "
        "that serves its name.",
    )
    priority: int = Field(
        0,
        strict=True,
        ge=-1_000_000,
        le=1_000_000,
        description="Higher first. Claims order by the time a run became runnable less "
        "60 s per point, so a point is worth a minute of waiting and nothing starves.",
    )
    flow_key: str | None = Field(
        None,
        max_length=10_000,
        description="The concurrency or singleton key computed with the workflow's code, "
        "for a workflow whose key is a function of its arguments (canonical JSON).",
    )


class StartResult(_Response):
    workflow_name: str
    workflow_id: str
    run_id: str
    existing: bool = Field(
        default=False,
        description='True: a singleton with `on_conflict="skip"` found its key\'s run '
        "open, and this is that run; nothing was started.",
    )
    created: bool = Field(description="False when an identical start found its run already open.")
    warning: str | None = Field(
        default=None,
        description="Set when no worker has served the name but it is close to names "
        "that have been served (a likely typo), or when nothing has ever served the "
        "queue; the run is queued all the same.",
    )
    warning_code: str | None = Field(
        default=None,
        description="What the warning is: `unknown_workflow` or `unknown_queue`.",
    )


class RunView(_Response):
    workflow_name: str
    workflow_id: str
    run_id: str
    status: str
    input: dict[str, Any]
    result: Any = None
    error: ErrorView | None = None
    task_queue: str
    code_version: str
    created_at: float
    updated_at: float
    ended_at: float | None = None
    blocked_reason: str | None = None
    parent_workflow_id: str | None = None
    parent_run_id: str | None = None
    continued_from: str | None = None
    continued_to: str | None = None
    code_versions: list[str] = Field(
        default_factory=list,
        description="The code versions (hashes of the workflow's source file) that have "
        "run it, oldest first.",
    )
    waiting_for: str | None = Field(
        default=None,
        description='What a running run waits for that is not there, such as "waiting '
        'for a worker that serves NAME", "waiting on queue Q, which nothing serves", or '
        'for a queued run "queued: waiting for a concurrency slot of NAME (2/2 held)".',
    )
    group_revision: int | None = Field(
        default=None,
        description="The revision of the worker group serving its queue when it started.",
    )
    priority: int = Field(default=0, description="Its priority (higher first).")
    state: str = Field(
        default="",
        description="`waiting_for_review` for a running run that waits for a reviewer's "
        "decision, else its status.",
    )
    trouble: TroubleView = Field(
        default_factory=TroubleView,
        description="What went wrong so far, counted by the store as it was recorded.",
    )
    markers: list[MarkerView] = Field(
        default_factory=list,
        description="Its trouble in words, in the order the runs list shows it.",
    )
    schedule_id: str | None = Field(
        default=None, description="The schedule that started it (shown on a single run)."
    )
    schedule_slot: float | None = Field(
        default=None, description="The slot (UTC seconds) its schedule started it for."
    )

    @classmethod
    def of(cls, run: RunRecord, served: Served | None = None) -> RunView:
        """``served``: what live workers serve and the known queues, for ``waiting_for``."""
        error = run.error
        return cls(
            workflow_name=run.workflow_name,
            workflow_id=run.workflow_id,
            run_id=run.run_id,
            status=run.status,
            input=run.input,
            result=run.result,
            error=ErrorView(type=error.type, message=error.message, traceback=error.traceback)
            if error is not None
            else None,
            task_queue=run.task_queue,
            code_version=run.code_version,
            created_at=run.created_at,
            updated_at=run.updated_at,
            ended_at=run.ended_at,
            blocked_reason=run.blocked_reason,
            parent_workflow_id=run.parent_workflow_id,
            parent_run_id=run.parent_run_id,
            continued_from=run.continued_from,
            continued_to=run.continued_to,
            code_versions=list(run.code_versions),
            waiting_for=waiting_for(run, served),
            priority=run.priority,
            group_revision=run.group_revision,
            state=run_state(run.status, run.trouble),
            trouble=TroubleView(**run.trouble.as_dict()),
            markers=[
                MarkerView(kind=m.kind, count=m.count, text=m.text)
                for m in markers(run.status, run.trouble)
            ],
        )


class RunList(_Response):
    runs: list[RunView]
    next_cursor: str | None = Field(
        default=None, description="Pass as `cursor` for the next page; null at the end."
    )
    next_offset: int | None = Field(
        default=None,
        description="Pass as `offset` for the next page (only when paging by `offset`); "
        "null at the end.",
    )


class HistoryView(_Response):
    workflow_id: str
    run_id: str
    events: list[dict[str, Any]] = Field(
        description="Events in order, each with its `type`, `seq` and `at` (the export format)."
    )


class ResultView(_Response):
    done: bool = Field(description="True when the run has ended or is blocked.")
    run: RunView


class LineageView(_Response):
    run: RunView
    parent: RunView | None
    children: list[RunView]
    #: The run this one was resumed or forked from, and the runs made from it:
    #: ``{"workflow_id", "run_id", "kind": "resume" | "fork", "step"}`` each.
    origin: dict[str, Any] | None = None
    derived: list[dict[str, Any]] = []


# -- messages, events, cancellation ----------------------------------------------------------
class MessageBody(_Request):
    name: str = NAME
    payload: Any = Field(None, description="Any JSON value, at most 256 KiB encoded.")
    run_id: str | None = Field(None, pattern=ID_PATTERN)


class MessageResult(_Response):
    message_id: str
    workflow_id: str
    sender_kind: str
    sender_id: str


class EventBody(_Request):
    event_type: str = NAME
    correlation_id: str = NAME
    payload: Any = Field(None, description="Any JSON value, at most 256 KiB encoded.")
    event_id: str | None = Field(
        None, pattern=ID_PATTERN, description="De-duplicates repeated deliveries."
    )


class EventResult(_Response):
    event_id: str
    duplicate: bool
    matched_runs: list[str]


class CancelBody(_Request):
    reason: str | None = Field(None, max_length=2000)
    run_id: str | None = Field(None, pattern=ID_PATTERN)


class CancelResult(_Response):
    run: RunView


class UnblockBody(_Request):
    run_id: str | None = Field(None, pattern=ID_PATTERN)


class UnblockResult(_Response):
    run: RunView


# -- workers and queues ----------------------------------------------------------------------
class WorkerView(_Response):
    worker_id: str
    queues: list[str]
    host: str
    pid: int
    started_at: float
    heartbeat_at: float
    info: dict[str, Any]
    lost_at: float | None = Field(
        default=None, description="When the store marked it lost (None: it is live)."
    )
    lost_reason: str | None = Field(
        default=None,
        description='Why it is lost, such as "worker killed from the UI by alice: its '
        'process ended" or "no heartbeat for 12 s (its deadline is 10 s)".',
    )

    @classmethod
    def of(cls, w: WorkerRecord) -> WorkerView:
        return cls(
            worker_id=w.worker_id,
            queues=list(w.queues),
            host=w.host,
            pid=w.pid,
            started_at=w.started_at,
            heartbeat_at=w.heartbeat_at,
            info=dict(w.info),
            lost_at=w.lost_at,
            lost_reason=w.lost_reason,
        )


class WorkerList(_Response):
    workers: list[WorkerView] = Field(description="The live workers, oldest first.")
    lost: list[WorkerView] = Field(
        default_factory=list,
        description="Workers the store marked lost in the last day (their process ended, or "
        "their heartbeat stopped), most recently lost first.",
    )


class QueueView(_Response):
    queue: str
    depth: int = Field(description="Work a worker could pick up now: runnable runs + ready tasks.")
    runnable_runs: int
    ready_tasks: int
    delayed_tasks: int
    running_tasks: int
    workers: int = Field(description="Registered workers serving this queue.")


class QueueList(_Response):
    queues: list[QueueView]


# -- tokens and audit --------------------------------------------------------------------------
class TokenBody(_Request):
    name: str = Field(
        min_length=1,
        max_length=100,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._@+-]*$",
        description="A user token: the user's id. A service token: a label.",
    )
    kind: Literal["user", "service"]
    permissions: list[str] = Field(
        min_length=1,
        max_length=8,
        json_schema_extra={"items": {"type": "string", "enum": list(PERMISSIONS)}},
        description="`admin` implies every other permission; a repeat counts once.",
    )


class TokenView(_Response):
    token_id: str
    name: str
    kind: str
    permissions: list[str]
    created_at: float
    created_by: str
    revoked_at: float | None

    @classmethod
    def of(cls, t: TokenRecord) -> TokenView:
        return cls(
            token_id=t.token_id,
            name=t.name,
            kind=t.kind,
            permissions=list(t.permissions),
            created_at=t.created_at,
            created_by=t.created_by,
            revoked_at=t.revoked_at,
        )


class TokenCreated(_Response):
    token: str = Field(description="The secret token, shown only this once.")
    info: TokenView


class TokenList(_Response):
    tokens: list[TokenView]


class AuditView(_Response):
    id: int
    at: float
    actor_kind: str
    actor_id: str
    action: str
    workflow_id: str | None
    run_id: str | None
    detail: dict[str, Any]

    @classmethod
    def of(cls, entry: AuditEntry) -> AuditView:
        return cls(
            id=entry.id,
            at=entry.at,
            actor_kind=entry.actor_kind,
            actor_id=entry.actor_id,
            action=entry.action,
            workflow_id=entry.workflow_id,
            run_id=entry.run_id,
            detail=dict(entry.detail),
        )


class AuditList(_Response):
    entries: list[AuditView]
    next_offset: int | None


# -- volumes ---------------------------------------------------------------------------------
class RefView(_Response):
    name: str
    head: int | None = Field(description="The ref's newest version; null before its first.")
    forked_from: str | None = Field(description="The ref it was forked from; null for `main`.")


class VolumeView(_Response):
    name: str
    refs: list[RefView] = Field(description="`main` first, then the refs forked from it.")


class VolumeList(_Response):
    volumes: list[VolumeView]
    next_offset: int | None


class FileView(_Response):
    path: str = Field(description="Relative, `/`-separated; a folder ends with `/`.")
    size: int
    updated_at: float = Field(description="When the version that wrote this content was made.")
    hash: str = Field(description="SHA-256 of the content, hex (empty for a folder).")
    is_dir: bool = Field(description="A sub-folder of a non-recursive listing.")

    @classmethod
    def of(cls, f: FileInfo) -> FileView:
        return cls(path=f.path, size=f.size, updated_at=f.updated_at, hash=f.hash, is_dir=f.is_dir)


class FileList(_Response):
    volume: str
    ref: str
    version: int | None = Field(description="The version listed; null before the ref's first.")
    files: list[FileView]
    next_cursor: str | None = Field(
        None, description="Pass as `cursor` for the next page; null at the end."
    )


class VersionView(_Response):
    id: int
    parent_id: int | None
    created_at: float
    ref: str
    message: str
    volume: str
    paths: list[str] = Field(description="Paths added, changed or removed since `parent_id`.")
    run_id: str | None = Field(description="The run whose task made it; null outside a task.")
    step: int | None
    attempt: int | None

    @classmethod
    def of(cls, v: VersionInfo) -> VersionView:
        return cls(
            id=v.id,
            parent_id=v.parent_id,
            created_at=v.created_at,
            ref=v.ref,
            message=v.message,
            volume=v.volume,
            paths=list(v.paths),
            run_id=v.run_id,
            step=v.step,
            attempt=v.attempt,
        )


class VersionList(_Response):
    volume: str
    ref: str
    versions: list[VersionView] = Field(description="Oldest first.")


class VolumeDiffView(_Response):
    volume: str
    a: int | None = Field(description="The older version; null for the empty volume.")
    b: int | None = Field(description="The newer version; null for the empty volume.")
    added: list[str]
    removed: list[str]
    changed: list[str]
    unified: dict[str, str] = Field(
        description="Path -> unified diff, for text files (UTF-8, at most 1 MiB) only."
    )
    next_cursor: str | None = Field(
        None, description="Pass as `cursor` for the next page; null at the end."
    )


class RollbackBody(_Request):
    version: int = Field(
        ge=1, le=MAX_VERSION, strict=True, description="The version whose content to restore."
    )
    ref: str = Field(
        "main",
        min_length=1,
        max_length=128,
        json_schema_extra={"pattern": NAME_PATTERN},  # checked by the volume rules: volume_error
        description="The ref to move.",
    )

    @field_validator("version", mode="before")
    @classmethod
    def _whole(cls, value: Any) -> Any:
        # JSON Schema counts 3.0 as an integer, so the spec allows it: take it as 3.
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value


class Health(_Response):
    status: Literal["ok"]
    version: str
