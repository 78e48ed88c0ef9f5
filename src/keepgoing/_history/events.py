"""History events: the append-only record of a run.

Events fall into four roles (``ROLE`` on each class):

* ``input``   — facts from the world that the workflow reacts to
  (``WorkflowStarted``, ``TaskCompleted``, ``TaskFailed``, ``TimerFired``).
  Appending one makes the run runnable.
* ``command`` — what the workflow decided (``TaskScheduled``, ``TimerStarted``,
  ``TimerCancelled``, ``WorkflowCompleted``, ``WorkflowFailed``). The runtime
  produces them; replay matches them by :meth:`Event.key`.
* ``marker``  — ``ActivationCompleted(saw_upto)``: the boundary of one
  activation. The commands that follow it were produced after delivering
  every input with ``seq <= saw_upto``.
* ``info``    — facts shown to people but never delivered to the workflow
  (``TaskAttemptFailed``, ``WorkflowBlocked``, ``MemoryCommitted``).

``seq`` is the event's position in the run's history (from 1), given by the
store when the event is appended; ``at`` is its commit time in UNIX seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

__all__ = [
    "ActivationCompleted",
    "CancelRequested",
    "ChildEnded",
    "ChildRunStarted",
    "ChildStarted",
    "EventReceived",
    "EventWaitCancelled",
    "EventWaitStarted",
    "MemoryCommitted",
    "MessageDelivered",
    "MessageReceived",
    "MessageSent",
    "MessageWaitStarted",
    "PatchMarked",
    "REVIEW_PREFIX",
    "ReviewAbandoned",
    "StatusSet",
    "TaskCancelRequested",
    "UNMATCHED",
    "WorkflowCancelled",
    "WorkflowContinuedAsNew",
    "ErrorInfo",
    "Event",
    "TaskAttemptFailed",
    "TaskCompleted",
    "TaskFailed",
    "TaskScheduled",
    "TimerCancelled",
    "TimerFired",
    "TimerStarted",
    "WorkflowBlocked",
    "WorkflowCompleted",
    "WorkflowFailed",
    "WorkflowStarted",
]


@dataclass(frozen=True, kw_only=True)
class ErrorInfo:
    """An exception as data: its qualified type name, message and formatted traceback."""

    type: str
    message: str
    traceback: str | None = None


@dataclass(frozen=True, kw_only=True)
class Event:
    ROLE: ClassVar[str] = "info"
    seq: int = 0
    at: float = 0.0

    def key(self) -> tuple[str, int, str]:
        """The (kind, sequence, name) by which replay matches commands to history."""
        return (type(self).__name__, 0, "")


@dataclass(frozen=True, kw_only=True)
class WorkflowStarted(Event):
    ROLE: ClassVar[str] = "input"
    workflow_name: str
    workflow_id: str
    run_id: str
    input: dict[str, Any]
    code_version: str
    task_queue: str = "default"
    parent_workflow_id: str | None = None
    parent_run_id: str | None = None
    continued_from: str | None = None
    #: The run id that seeds ``keepgoing.random()`` and ``uuid4()`` when it is not
    #: this run's own: a resumed or forked run keeps its origin's, so the reused
    #: prefix replays with the values it recorded. None (left out): ``run_id``.
    seed: str | None = None
    #: A resumed or forked run: the last seq of the history prefix the store copied
    #: from its origin (``_store/sql/prefix.py``). While the run replays that prefix
    #: at its first activation, every reused step must be scheduled again with the
    #: name and arguments it recorded (``_runtime/prefix.py``), or the run fails.
    #: None (left out): nothing was reused.
    reused_upto: int | None = None
    #: Why the prefix was reused: ``"resume"``, ``"fork"``, or ``"fork_input"`` (a
    #: fork given a new input). None (left out) with ``reused_upto``.
    reused_by: str | None = None


@dataclass(frozen=True, kw_only=True)
class ActivationCompleted(Event):
    """``code_version`` is the hash of the workflow's source file on the worker that
    ran the activation ('' in histories recorded before versions were kept)."""

    ROLE: ClassVar[str] = "marker"
    saw_upto: int
    time: float
    worker: str = ""
    code_version: str = ""


@dataclass(frozen=True, kw_only=True)
class TaskScheduled(Event):
    ROLE: ClassVar[str] = "command"
    cmd: int
    name: str
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    retries: int = 0
    retry_delay: float | None = None
    timeout: float = 600.0
    max_worker_losses: int = 3
    image: str | None = None
    #: The queue the task runs on when it is not its run's (a per-task worker group's).
    task_queue: str | None = None
    #: The operation this step carries on when it is not its own (``op-<run>-<cmd>``):
    #: a step a reviewer sent back to run again keeps the first step's operation id.
    operation_id: str | None = None
    #: The task's concurrency and rate limits for this call, resolved when it was
    #: scheduled: the task row's limit columns (``_store/sql/limits.py``), or None.
    limits: dict[str, Any] | None = None

    def key(self) -> tuple[str, int, str]:
        return ("TaskScheduled", self.cmd, self.name)


@dataclass(frozen=True, kw_only=True)
class TaskAttemptFailed(Event):
    cmd: int
    name: str
    attempt: int
    error: ErrorInfo
    reason: str  # "error" | "timeout" | "worker_lost" | "released"
    worker: str = ""
    started_at: float | None = None
    retry_at: float | None = None
    #: Why the worker stopped, for an attempt lost or released with it (see
    #: ``_store/transitions.py``: ``CAUSES``); None for an error or a timeout,
    #: and in histories recorded before causes were kept.
    cause: str | None = None
    #: Who stopped it (``"user alice"``) and from where (``"ui"``, ``"cli"``, ...).
    actor: str | None = None
    via: str | None = None


@dataclass(frozen=True, kw_only=True)
class TaskCompleted(Event):
    ROLE: ClassVar[str] = "input"
    cmd: int
    result: Any
    attempt: int
    worker: str = ""
    started_at: float | None = None


@dataclass(frozen=True, kw_only=True)
class TaskFailed(Event):
    ROLE: ClassVar[str] = "input"
    cmd: int
    name: str
    error: ErrorInfo
    attempts: int
    reason: str = "error"


@dataclass(frozen=True, kw_only=True)
class TimerStarted(Event):
    ROLE: ClassVar[str] = "command"
    cmd: int
    fire_at: float

    def key(self) -> tuple[str, int, str]:
        return ("TimerStarted", self.cmd, "")


@dataclass(frozen=True, kw_only=True)
class TimerCancelled(Event):
    ROLE: ClassVar[str] = "command"
    cmd: int

    def key(self) -> tuple[str, int, str]:
        return ("TimerCancelled", self.cmd, "")


@dataclass(frozen=True, kw_only=True)
class TimerFired(Event):
    ROLE: ClassVar[str] = "input"
    cmd: int


@dataclass(frozen=True, kw_only=True)
class WorkflowCompleted(Event):
    ROLE: ClassVar[str] = "command"
    result: Any


@dataclass(frozen=True, kw_only=True)
class WorkflowFailed(Event):
    ROLE: ClassVar[str] = "command"
    error: ErrorInfo


@dataclass(frozen=True, kw_only=True)
class WorkflowBlocked(Event):
    """The code at ``code_version`` could not replay the history: ``reason`` is the diff."""

    reason: str
    code_version: str = ""


# -- messages, events, children, cancellation (inputs unless marked) ----------------
#: Messages named ``review:<operation id>`` carry review decisions; only the review
#: path writes them (the store refuses them from any other sender).
REVIEW_PREFIX = "review:"


@dataclass(frozen=True, kw_only=True)
class MessageReceived(Event):
    """A message for this run, in send order. ``sender_kind`` and ``sender_id``
    are stamped by the orchestrator: user, service_token, workflow or local."""

    ROLE: ClassVar[str] = "input"
    message_id: str
    name: str
    payload: Any
    sender_kind: str
    sender_id: str
    sent_at: float


@dataclass(frozen=True, kw_only=True)
class MessageWaitStarted(Event):
    """Command: the workflow waits for a message named ``name``."""

    ROLE: ClassVar[str] = "command"
    cmd: int
    name: str
    timeout: float | None = None

    def key(self) -> tuple[str, int, str]:
        return ("MessageWaitStarted", self.cmd, self.name)


@dataclass(frozen=True, kw_only=True)
class MessageSent(Event):
    """Command: send ``name`` to the running workflow ``workflow_id``."""

    ROLE: ClassVar[str] = "command"
    cmd: int
    workflow_id: str
    name: str
    payload: Any = None

    def key(self) -> tuple[str, int, str]:
        return ("MessageSent", self.cmd, self.name)


@dataclass(frozen=True, kw_only=True)
class MessageDelivered(Event):
    """Whether a ``MessageSent`` reached its target (``error`` says why not)."""

    ROLE: ClassVar[str] = "input"
    cmd: int
    message_id: str | None = None
    error: ErrorInfo | None = None


@dataclass(frozen=True, kw_only=True)
class ChildStarted(Event):
    """Command: start a child workflow run."""

    ROLE: ClassVar[str] = "command"
    cmd: int
    workflow_name: str
    workflow_id: str
    input: dict[str, Any]
    task_queue: str | None = None

    def key(self) -> tuple[str, int, str]:
        return ("ChildStarted", self.cmd, self.workflow_name)


@dataclass(frozen=True, kw_only=True)
class ChildRunStarted(Event):
    """The child run exists (``run_id``), or could not start (``error``)."""

    ROLE: ClassVar[str] = "input"
    cmd: int
    workflow_id: str
    run_id: str | None = None
    error: ErrorInfo | None = None


@dataclass(frozen=True, kw_only=True)
class ChildEnded(Event):
    """The child run ended: completed (``result``), failed or cancelled (``error``)."""

    ROLE: ClassVar[str] = "input"
    cmd: int
    workflow_id: str
    run_id: str
    status: str
    result: Any = None
    error: ErrorInfo | None = None


@dataclass(frozen=True, kw_only=True)
class EventWaitStarted(Event):
    """Command: wait for an external event by type and correlation id."""

    ROLE: ClassVar[str] = "command"
    cmd: int
    event_type: str
    correlation_id: str
    deadline: float | None = None

    def key(self) -> tuple[str, int, str]:
        return ("EventWaitStarted", self.cmd, self.event_type)


@dataclass(frozen=True, kw_only=True)
class EventReceived(Event):
    """The external event that matched the wait ``cmd``."""

    ROLE: ClassVar[str] = "input"
    cmd: int
    event_id: str
    event_type: str
    correlation_id: str
    payload: Any = None
    published_at: float = 0.0


@dataclass(frozen=True, kw_only=True)
class EventWaitCancelled(Event):
    """Command: the workflow stopped waiting (timeout or cancel); free the event."""

    ROLE: ClassVar[str] = "command"
    cmd: int

    def key(self) -> tuple[str, int, str]:
        return ("EventWaitCancelled", self.cmd, "")


@dataclass(frozen=True, kw_only=True)
class TaskCancelRequested(Event):
    """Command: the workflow stopped waiting for a running task; stop its attempt."""

    ROLE: ClassVar[str] = "command"
    cmd: int

    def key(self) -> tuple[str, int, str]:
        return ("TaskCancelRequested", self.cmd, "")


@dataclass(frozen=True, kw_only=True)
class CancelRequested(Event):
    """Someone asked the run to stop; the workflow sees ``asyncio.CancelledError``."""

    ROLE: ClassVar[str] = "input"
    reason: str = ""
    actor_kind: str = ""
    actor_id: str = ""


@dataclass(frozen=True, kw_only=True)
class WorkflowCancelled(Event):
    """Command: the run ended cancelled."""

    ROLE: ClassVar[str] = "command"
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class WorkflowContinuedAsNew(Event):
    """Command: end this run and start a new one with the same workflow id and ``input``."""

    ROLE: ClassVar[str] = "command"
    input: dict[str, Any]
    new_run_id: str = ""


@dataclass(frozen=True, kw_only=True)
class MemoryCommitted(Event):
    """Info: step ``cmd``'s attempt ``attempt`` committed version ``version`` of a
    volume, with its completion, changing ``paths``."""

    volume: str
    version: int
    paths: list[str] = field(default_factory=list)
    cmd: int = 0
    attempt: int = 0
    ref: str = "main"


@dataclass(frozen=True, kw_only=True)
class PatchMarked(Event):
    """The run passed ``keepgoing.patched(change_id)`` on code that has the change, and
    took the new branch (``deprecated``: written by ``deprecate_patch``).

    Recorded with the activation's commands but never matched by replay: a history
    with or without it replays the same commands, and ``patched()`` reads it to
    decide which branch a replay takes.
    """

    ROLE: ClassVar[str] = "command"
    change_id: str
    deprecated: bool = False

    def key(self) -> tuple[str, int, str]:
        return ("PatchMarked", 0, self.change_id)


@dataclass(frozen=True, kw_only=True)
class ReviewAbandoned(Event):
    """The workflow stopped waiting for a review of uncertain step ``cmd`` (operation
    ``operation_id``) without taking a decision: a timeout around the await, a
    cancelled branch or run. The store then refuses decisions on that round.

    Recorded with the activation's commands but never matched by replay (as
    ``PatchMarked``), so histories written before it existed replay alike.
    """

    ROLE: ClassVar[str] = "command"
    cmd: int
    operation_id: str

    def key(self) -> tuple[str, int, str]:
        return ("ReviewAbandoned", self.cmd, self.operation_id)


@dataclass(frozen=True, kw_only=True)
class StatusSet(Event):
    """The workflow published ``value`` under ``name`` (``keepgoing.set_status``): the
    progress a UI or another service reads without reading the history.

    Recorded with the activation's commands but never matched by replay (as
    ``PatchMarked``): a replay produces it again and it is dropped, so a value
    is written once, by the activation that first reached it. The store keeps
    the newest value per name in ``run_status``, written in the same commit.
    """

    ROLE: ClassVar[str] = "command"
    name: str
    value: Any = None

    def key(self) -> tuple[str, int, str]:
        return ("StatusSet", 0, self.name)


#: Command-role events that replay never matches: markers, not decisions.
UNMATCHED: tuple[type[Event], ...] = (PatchMarked, ReviewAbandoned, StatusSet)
