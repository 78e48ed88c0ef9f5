"""Plain values that cross the store boundary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from keepgoing._history.events import ErrorInfo, Event
from keepgoing._store.trouble import Trouble
from keepgoing._store.volume_records import StagedCommit
from keepgoing._store.worker_stops import CAUSES

__all__ = [
    "OPEN",
    "TERMINAL",
    "AuditEntry",
    "CancelRequest",
    "EventPublished",
    "EventRequest",
    "Lineage",
    "MessageRequest",
    "ReviewRequest",
    "ActivationClaim",
    "AttemptLog",
    "ActivationCommit",
    "CommitResult",
    "FastActivation",
    "RunRecord",
    "RunStatus",
    "StartRequest",
    "TaskClaim",
    "TaskOutcome",
    "TaskOutcomeResult",
    "WorkerRecord",
    "WorkerStop",
]

RunStatus = Literal["running", "blocked", "completed", "failed", "cancelled", "continued"]
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled", "continued"})
OPEN: frozenset[str] = frozenset({"running", "blocked"})


@dataclass(frozen=True)
class RunRecord:
    """One run of a workflow. ``workflow_id`` is the user's id; ``run_id`` is unique per run."""

    run_id: str
    workflow_id: str
    workflow_name: str
    status: RunStatus
    input: dict[str, Any]
    task_queue: str
    code_version: str
    created_at: float
    updated_at: float
    result: Any = None
    error: ErrorInfo | None = None
    blocked_reason: str | None = None
    fence: int = 0
    last_input_seq: int = 0
    runnable: bool = False
    ended_at: float | None = None
    parent_workflow_id: str | None = None
    parent_run_id: str | None = None
    continued_from: str | None = None
    continued_to: str | None = None
    code_versions: tuple[str, ...] = ()
    blocked_versions: tuple[str, ...] = ()
    retry_blocked_at: float | None = None
    #: The revision of the worker group serving its queue when it started (None: no group).
    group_revision: int | None = None
    #: Its trouble counters (worker losses, retries, ...), kept by the commits that record them.
    trouble: Trouble = field(default_factory=Trouble)


@dataclass(frozen=True)
class StartRequest:
    run_id: str
    workflow_id: str
    workflow_name: str
    input: dict[str, Any]
    task_queue: str
    code_version: str
    now: float
    parent_workflow_id: str | None = None
    parent_run_id: str | None = None
    parent_cmd: int | None = None
    continued_from: str | None = None
    #: The run whose group revision this one keeps, as that run's row says now (a
    #: child on its parent's queue, a ``continue_as_new`` successor); None: the
    #: revision of the group serving ``task_queue``.
    revision_of: str | None = None


@dataclass(frozen=True)
class ReviewRequest:
    """A reviewer's decision on uncertain round ``cmd`` of operation ``operation_id``:
    ``payload`` is the decision message the workflow reads (``_workflow/review.py``)."""

    operation_id: str
    workflow_id: str
    run_id: str
    cmd: int
    decision: str
    payload: dict[str, Any]
    reason: str
    actor_kind: str
    actor_id: str
    now: float


@dataclass(frozen=True)
class MessageRequest:
    """A message for the open run of ``workflow_id`` (or exactly ``run_id``)."""

    workflow_id: str
    name: str
    payload: Any
    sender_kind: str
    sender_id: str
    now: float
    run_id: str | None = None


@dataclass(frozen=True)
class EventRequest:
    """An external event; ``event_id`` de-duplicates repeated deliveries."""

    event_type: str
    correlation_id: str
    payload: Any
    event_id: str
    actor_kind: str
    actor_id: str
    now: float


@dataclass(frozen=True)
class EventPublished:
    event_id: str
    duplicate: bool
    matched_runs: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class CancelRequest:
    workflow_id: str
    reason: str
    actor_kind: str
    actor_id: str
    now: float
    run_id: str | None = None


@dataclass(frozen=True)
class AuditEntry:
    """Who did what, when, to which workflow. ``id`` is given by the store."""

    at: float
    actor_kind: str
    actor_id: str
    action: str
    workflow_id: str | None = None
    run_id: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    id: int = 0


@dataclass(frozen=True)
class Lineage:
    """A run with its parent run (if a child) and its child runs, oldest first."""

    run: RunRecord
    parent: RunRecord | None
    children: list[RunRecord]


@dataclass(frozen=True)
class ActivationClaim:
    """A leased right to activate one run. ``fence`` must accompany the commit."""

    run: RunRecord
    fence: int
    lease_expires_at: float


@dataclass(frozen=True)
class ActivationCommit:
    """The result of an activation: a marker and the commands that follow it.

    The store appends ``ActivationCompleted(saw_upto, time, worker)`` and then
    ``commands`` in order, each with ``at=now``. For each ``TaskScheduled`` it
    creates a pending task; for each ``TimerStarted`` a pending timer; for each
    ``TimerCancelled`` it cancels that timer. ``WorkflowCompleted`` or
    ``WorkflowFailed`` ends the run (status, result or error, ``ended_at``)
    and cancels its pending timers and tasks. ``blocked_reason`` set (with no
    commands) appends ``WorkflowBlocked(reason, code_version)`` and marks the run
    blocked, to be retried when other code serves it or at ``retry_blocked_at``.

    ``code_version`` is the hash of the source the worker ran: it goes on the
    marker, joins the run's ``code_versions``, and fills the run's (and its
    ``WorkflowStarted``'s) version when the start did not know it.

    With ``eager_claim`` the tasks it schedules are claimed by ``worker_id`` in
    the same transaction (lease ``lease_ttl``), at most ``eager_limit`` of them.
    """

    run_id: str
    fence: int
    worker_id: str
    saw_upto: int
    time: float
    commands: list[Event]
    now: float
    eager_claim: bool = False
    eager_limit: int = 0
    lease_ttl: float = 15.0
    blocked_reason: str | None = None
    code_version: str = ""
    #: The first activation of a resumed or forked run that passed the check of its
    #: reused steps: the steps still open in that prefix, held until now
    #: (``sql/prefix.py``), become claimable in the same commit.
    release_held: bool = False


@dataclass(frozen=True)
class TaskClaim:
    """A leased attempt of one task. ``(run_id, cmd)`` identifies the task."""

    run_id: str
    workflow_id: str
    cmd: int
    name: str
    args: list[Any]
    kwargs: dict[str, Any]
    attempt: int
    fence: int
    started_at: float
    deadline: float
    lease_expires_at: float
    timeout: float
    retries: int
    retry_delay: float | None
    max_worker_losses: int
    image: str | None = None
    #: The operation id when the step carries on an earlier step's (else ``op-<run>-<cmd>``).
    operation_id: str | None = None


@dataclass(frozen=True)
class CommitResult:
    """What an activation commit did.

    ``ok`` is False when the fence was stale (nothing was written).
    ``last_seq`` is the seq of the last event appended; ``fence`` is the run's
    fence after the commit; ``eager`` are the tasks claimed for the committer.
    """

    ok: bool
    last_seq: int = 0
    fence: int = 0
    eager: list[TaskClaim] = field(default_factory=list)
    saw_upto: int = 0


@dataclass(frozen=True)
class AttemptLog:
    """What one attempt printed. ``text`` holds at most the worker's bound (64 KiB of
    UTF-8 by default) with a marker where the rest was cut; ``size`` is how many bytes
    the attempt wrote in all."""

    run_id: str
    cmd: int
    attempt: int
    worker_id: str
    at: float
    text: str
    size: int
    truncated: bool = False


@dataclass(frozen=True)
class TaskOutcome:
    """How one attempt ended. Exactly one of ``result``/``error`` is meaningful.

    ``ok`` True means it returned ``result``. Otherwise ``error`` describes the
    failure and ``reason`` is ``"error"`` (the task raised), ``"timeout"``,
    ``"uncertain"`` or ``"non_retryable"`` (then ``cause`` says which rule).
    ``volume_commits`` are the attempt's staged volume writes: a successful
    outcome commits them with the completion; a failed one ignores them.
    """

    run_id: str
    cmd: int
    fence: int
    worker_id: str
    attempt: int
    started_at: float
    now: float
    ok: bool
    result: Any = None
    error: ErrorInfo | None = None
    reason: str = "error"
    volume_commits: tuple[StagedCommit, ...] = ()
    #: Why an attempt with reason ``"non_retryable"`` is not retried (``retry_policy``).
    cause: str | None = None
    #: What the attempt printed, stored with the outcome (None: nothing captured).
    logs: AttemptLog | None = None


@dataclass(frozen=True)
class FastActivation:
    """The next activation, computed in memory from a cached instance.

    Applied only if the run's fence still equals ``run_fence`` and its
    ``last_input_seq`` still equals ``last_input_seq`` (nothing else happened
    to the run since the instance last committed). The store then appends
    the ``TaskCompleted``, a marker whose ``saw_upto`` is that event's seq,
    and ``commands``, exactly as :class:`ActivationCommit` does.
    """

    run_fence: int
    last_input_seq: int
    commands: list[Event]
    time: float
    eager_claim: bool = True
    eager_limit: int = 1
    lease_ttl: float = 15.0
    code_version: str = ""


@dataclass(frozen=True)
class TaskOutcomeResult:
    """``accepted`` False: the attempt's fence was stale and nothing was written.

    ``final`` is True when the task ended (completed, or failed for good).
    ``activation`` is the commit result of a :class:`FastActivation`, or None
    when it was not applied (the run then stays runnable).
    """

    accepted: bool
    final: bool = False
    retry_at: float | None = None
    activation: CommitResult | None = None
    #: The attempt held a concurrency slot, which its end gave back (wake the claims).
    freed_slot: bool = False


@dataclass(frozen=True)
class WorkerRecord:
    worker_id: str
    queues: list[str]
    host: str
    pid: int
    started_at: float
    heartbeat_at: float
    info: dict[str, Any] = field(default_factory=dict)
    liveness: str | None = None  # the worker's liveness token, checked by the lease reaper
    #: Set once the store marked it lost (``_store/lost_workers.py``): when, and why in words.
    lost_at: float | None = None
    lost_reason: str | None = None


@dataclass(frozen=True)
class WorkerStop:
    """A stop of worker ``worker_id`` that its stopper records before the signal
    (``cause``: one of ``_store/worker_stops.py``'s ``CAUSES``). ``actor_kind`` and
    ``actor_id`` say who asked (``"user"``, ``"alice"``); ``via`` where from
    (``"ui"``, ``"cli"``, ``"api"``, ``"autoscaler"``, ``"worker"``)."""

    worker_id: str
    cause: str
    actor_kind: str = ""
    actor_id: str = ""
    via: str = ""
    detail: str = ""
    #: The attempt a stop the task caused is traced to (``worker_stops.traced``).
    blame_run_id: str | None = None
    blame_cmd: int | None = None
    #: The local process that asked for the stop, when it is not the recorder's own
    #: (the server names the process behind a kill request); never stored.
    origin_pid: int | None = None

    def __post_init__(self) -> None:
        if self.cause not in CAUSES:
            raise ValueError(
                f"unknown worker stop cause {self.cause!r}; one of {', '.join(CAUSES)}"
            )
