"""Every error keepgoing raises, rooted at one :class:`KeepgoingError`.

The tree::

    KeepgoingError                       code
    ├── ConfigurationError               configuration      (also ValueError)
    │   ├── InvalidDurationError         invalid_duration
    │   ├── InvalidStoreURLError         invalid_store_url
    │   ├── InvalidScheduleError         invalid_schedule
    │   └── InvalidLimitError            invalid_limit
    ├── DuplicateNameError               duplicate_name     (also ValueError)
    ├── PayloadError                     invalid_payload    (also TypeError)
    │   └── PayloadTooLargeError         payload_too_large
    ├── InvalidRequestError              invalid_request    (also ValueError)
    │   └── ReuseRefusedError            reuse_refused      (a fork's reused steps differ)
    ├── AuthenticationError              unauthenticated
    ├── PermissionDeniedError            permission_denied  (also PermissionError)
    ├── TokenNotFoundError               token_not_found    (also LookupError)
    ├── ServerError                      server_error
    ├── WorkflowNotFoundError            workflow_not_found (also LookupError)
    │   └── QueueNotFoundError           queue_not_found
    ├── RunNotFoundError                 run_not_found      (also LookupError)
    ├── WorkflowAlreadyRunningError      workflow_running
    ├── WorkflowNotRunningError          workflow_not_running
    ├── WorkflowFailedError              workflow_failed
    │   └── WorkflowCancelledError       workflow_cancelled
    ├── WorkflowBlockedError             workflow_blocked
    ├── TaskFailedError                  task_failed
    ├── UncertainOutcome                 uncertain_outcome  (raised by a task: review)
    ├── NonRetryableError                non_retryable      (raised by a task: no retry)
    ├── OperationNotFoundError           operation_not_found (also LookupError)
    ├── OperationNotUncertainError       operation_not_uncertain
    ├── WorkflowMessageTimeoutError      message_timeout    (also TimeoutError)
    ├── NondeterminismError              nondeterminism
    ├── WorkerImportError                worker_import
    ├── UnknownWorkflowWarning           unknown_workflow   (also UserWarning; a warning)
    │   └── UnknownQueueWarning          unknown_queue      (a warning)
    ├── GatewayError                     gateway_error
    │   ├── BudgetExceededError          budget_exceeded
    │   └── CassetteMissError            cassette_miss
    ├── GroupError                       group_error        (also ValueError)
    │   ├── GroupNotFoundError           group_not_found    (also LookupError)
    │   └── GroupConflictError           group_conflict
    │       └── DeployRefusedError       deploy_refused
    ├── ScheduleNotFoundError            schedule_not_found (also LookupError)
    ├── ScheduleExistsError              schedule_exists
    ├── VolumeError                      volume_error
    │   ├── VolumeNotFoundError          volume_not_found   (also LookupError)
    │   └── VolumeFileNotFoundError      volume_file_not_found (also LookupError)
    └── StoreError                       store_error
        └── SchemaVersionError           schema_version

:class:`UnknownWorkflowWarning` (also a ``UserWarning``) is issued with
``warnings.warn``, never raised, when a run is started by a name that no worker
has served but that is close to one that has: a likely typo. The run is
queued all the same. Its subclass :class:`UnknownQueueWarning` is issued for a
start on a queue that no group, worker or deploy of the store has ever served.

Each class has a stable ``code`` that the HTTP API returns. Control-flow
signals that must never be swallowed by ``except Exception`` in user code
(a lost lease, for one) derive from ``BaseException`` and live in private
modules.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AuthenticationError",
    "BudgetExceededError",
    "CassetteMissError",
    "ConfigurationError",
    "DeployRefusedError",
    "DuplicateNameError",
    "GatewayError",
    "GroupConflictError",
    "GroupError",
    "GroupNotFoundError",
    "InvalidDurationError",
    "InvalidLimitError",
    "InvalidRequestError",
    "InvalidScheduleError",
    "InvalidStoreURLError",
    "KeepgoingError",
    "NonRetryableError",
    "NondeterminismError",
    "OperationNotFoundError",
    "OperationNotUncertainError",
    "PayloadError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "QueueNotFoundError",
    "ReuseRefusedError",
    "RunNotFoundError",
    "ScheduleExistsError",
    "ScheduleNotFoundError",
    "SchemaVersionError",
    "ServerError",
    "StoreError",
    "TaskFailedError",
    "TokenNotFoundError",
    "UncertainOutcome",
    "UnknownQueueWarning",
    "UnknownWorkflowWarning",
    "VolumeError",
    "VolumeFileNotFoundError",
    "VolumeNotFoundError",
    "WorkerImportError",
    "WorkflowAlreadyRunningError",
    "WorkflowBlockedError",
    "WorkflowCancelledError",
    "WorkflowFailedError",
    "WorkflowMessageTimeoutError",
    "WorkflowNotFoundError",
    "WorkflowNotRunningError",
]


class KeepgoingError(Exception):
    """The root of every error keepgoing raises."""

    code = "keepgoing_error"


class ConfigurationError(KeepgoingError, ValueError):
    """A setting, option or argument has a value keepgoing cannot use."""

    code = "configuration"


class InvalidDurationError(ConfigurationError):
    """A duration is not ``"30s"``, ``"1h30m"``, a ``timedelta`` or int seconds."""

    code = "invalid_duration"


class InvalidStoreURLError(ConfigurationError):
    """A store URL is not one of the accepted forms."""

    code = "invalid_store_url"


class DuplicateNameError(KeepgoingError, ValueError):
    """Two tasks or workflows were registered under one name from different places."""

    code = "duplicate_name"


class PayloadError(KeepgoingError, TypeError):
    """An argument or result is not JSON; the message names it and its type."""

    code = "invalid_payload"


class PayloadTooLargeError(PayloadError):
    """A payload or request body is over its size limit (a message: 256 KiB)."""

    code = "payload_too_large"


class InvalidRequestError(KeepgoingError, ValueError):
    """The server refused a request as malformed: bad JSON, or a field out of its schema."""

    code = "invalid_request"


class ReuseRefusedError(InvalidRequestError):
    """A resumed or forked run was refused at its first activation: a step it reuses
    from its origin would be scheduled with another name or other arguments now.

    The run failed with this message (not retried) before any step past the
    reused ones ran; ``fork_workflow(..., wait_for_check=True)`` raises it.
    ``workflow_id`` and ``run_id`` name the refused run.
    """

    code = "reuse_refused"

    def __init__(self, message: str, workflow_id: str = "", run_id: str = "") -> None:
        super().__init__(message)
        self.workflow_id = workflow_id
        self.run_id = run_id


class AuthenticationError(KeepgoingError):
    """The server needs a valid token: none was sent, or it is unknown or revoked."""

    code = "unauthenticated"


class PermissionDeniedError(KeepgoingError, PermissionError):
    """The token is valid but lacks the permission the call needs (named in the message)."""

    code = "permission_denied"


class TokenNotFoundError(KeepgoingError, LookupError):
    """No API token has the given id."""

    code = "token_not_found"


class ServerError(KeepgoingError):
    """The server could not be reached, or failed (HTTP 5xx) after the client's retries.

    Attributes:
        status: the HTTP status, or None when no response arrived.
        error_code: the server's error code, when it sent one.
    """

    code = "server_error"

    def __init__(self, message: str, *, status: int | None = None, error_code: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code


class WorkflowNotFoundError(KeepgoingError, LookupError):
    """No workflow is registered under the given name, or no run has the given id."""

    code = "workflow_not_found"


class QueueNotFoundError(WorkflowNotFoundError):
    """With ``strict=True``: a start on a queue that no group, worker or deploy of the
    store has ever served (the message names the closest known queue)."""

    code = "queue_not_found"


class RunNotFoundError(KeepgoingError, LookupError):
    """No run has the given workflow id or run id."""

    code = "run_not_found"


class WorkflowAlreadyRunningError(KeepgoingError):
    """A run was started with the workflow id of a run that has not ended."""

    code = "workflow_running"

    def __init__(self, workflow_id: str, run_id: str) -> None:
        super().__init__(
            f"workflow id {workflow_id!r} is already running (run {run_id}); "
            "wait for it to end, cancel it, or choose another workflow_id"
        )
        self.workflow_id = workflow_id
        self.run_id = run_id


class WorkflowNotRunningError(KeepgoingError):
    """The workflow's run has ended: it takes no messages and cannot be cancelled."""

    code = "workflow_not_running"


class WorkflowMessageTimeoutError(KeepgoingError, TimeoutError):
    """``wait_for_message`` or ``wait_for_event`` timed out."""

    code = "message_timeout"


class WorkflowFailedError(KeepgoingError):
    """The run ended in failure; ``error_type`` and ``message`` describe why."""

    code = "workflow_failed"

    def __init__(self, run_id: str, error_type: str, message: str) -> None:
        super().__init__(f"run {run_id} failed: {error_type}: {message}")
        self.run_id = run_id
        self.error_type = error_type
        self.message = message


class WorkflowCancelledError(WorkflowFailedError):
    """The run was cancelled; ``message`` holds the reason."""

    code = "workflow_cancelled"


class WorkflowBlockedError(KeepgoingError):
    """The run is blocked (its code no longer replays its history) and waits for a fix."""

    code = "workflow_blocked"


class TaskFailedError(KeepgoingError):
    """A task used up its attempts; raised into the workflow at the task's await.

    Attributes:
        task_name: the task's registered name.
        error_type: the qualified name of the exception the last attempt raised,
            or ``"TimeoutError"`` / ``"WorkerLost"``.
        message: that exception's message.
        attempts: how many attempts ran.
        reason: how the last attempt ended: ``"error"``, ``"timeout"``,
            ``"worker_lost"``, or ``"reviewed"`` for a step a reviewer failed
            after its outcome was uncertain.
    """

    code = "task_failed"

    def __init__(
        self, task_name: str, error_type: str, message: str, attempts: int, reason: str = "error"
    ) -> None:
        super().__init__(
            f"task {task_name!r} failed after {attempts} attempt(s): {error_type}: {message}"
        )
        self.task_name = task_name
        self.error_type = error_type
        self.message = message
        self.attempts = attempts
        self.reason = reason

    def __reduce__(self) -> tuple[object, ...]:
        return (
            type(self),
            (self.task_name, self.error_type, self.message, self.attempts, self.reason),
        )


class UncertainOutcome(KeepgoingError):
    """Raised by a task when its external effect may or may not have happened.

    A task raises it when it sent a write and lost the answer, and the other
    side offers neither a lookup by operation id nor idempotency: running the
    step again could apply the write twice, and failing it could hide a write
    that took place. The attempt is not retried. The step's operation becomes
    *uncertain* (``Client.get_operation``) and the workflow waits at the
    task's ``await`` for a reviewer's decision (``Client.review_operation``):
    approve (with the result the step returns), retry (the step runs again
    under the same operation id) or fail (``TaskFailedError`` at the await).

    Args:
        message: what is known, shown to the reviewer as the evidence.
    """

    code = "uncertain_outcome"


class NonRetryableError(KeepgoingError):
    """Raised by a task (or subclassed) when retrying cannot help: the step fails at once.

    However many ``retries`` the task has, an attempt that raises it is the
    last; the step fails with ``TaskFailedError(reason="non_retryable")`` at
    the workflow's ``await``, and the timeline says it was not retried because
    the task raised ``NonRetryableError``. A run failed so can be resumed once
    the cause is fixed (``Client.resume_workflow``).

    Args:
        message: why retrying cannot help (a rejected request, a bad value).
    """

    code = "non_retryable"


class OperationNotFoundError(KeepgoingError, LookupError):
    """No step of any run has this operation id."""

    code = "operation_not_found"


class OperationNotUncertainError(KeepgoingError):
    """A review was sent for an operation that is not waiting for review."""

    code = "operation_not_uncertain"


class NondeterminismError(KeepgoingError):
    """Workflow code no longer matches the history it is replaying.

    The run is marked *blocked* with the diff in ``str(error)``; nothing is
    re-executed. Deploy code that replays the history to unblock it.
    """

    code = "nondeterminism"


class WorkerImportError(KeepgoingError):
    """The file a worker was pointed at could not be imported."""

    code = "worker_import"


class GatewayError(KeepgoingError):
    """A model call through the gateway failed: every provider tried refused or failed,
    the model is unknown or not allowed for the key, or the request was malformed.

    Attributes:
        status: the HTTP status the gateway answered (or would have answered).
        error_code: the gateway's error code (``model_not_found``, ``provider_error``, ...).
    """

    code = "gateway_error"

    def __init__(
        self, message: str, *, status: int = 502, error_code: str = "", param: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code or self.code
        self.param = param

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_gateway_error, (type(self), str(self), self.__dict__))


class BudgetExceededError(GatewayError):
    """A gateway key is over one of its limits: ``limit`` names it
    (``requests_per_minute``, ``tokens_per_minute``, ``daily_budget``, ``total_budget``)
    and ``resets_at`` is when it frees up (a Unix time; None for a total budget)."""

    code = "budget_exceeded"

    def __init__(
        self, message: str, *, limit: str = "", resets_at: float | None = None, status: int = 429
    ) -> None:
        super().__init__(message, status=status, error_code=self.code)
        self.limit = limit
        self.resets_at = resets_at


class CassetteMissError(GatewayError):
    """A replayed cassette has no recording of this call (model, messages and params)."""

    code = "cassette_miss"

    def __init__(self, message: str) -> None:
        super().__init__(message, status=500, error_code=self.code)


def _rebuild_gateway_error(
    cls: type[GatewayError], message: str, state: dict[str, object]
) -> GatewayError:
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error.__dict__.update(state)
    return error


class VolumeError(KeepgoingError):
    """A volume operation was refused: a bad path or name, a file over the size
    limit, a write through a read-only handle, or a ref that already exists."""

    code = "volume_error"


class VolumeNotFoundError(VolumeError, LookupError):
    """No volume, ref or version has the given name or id."""

    code = "volume_not_found"


class VolumeFileNotFoundError(VolumeError, LookupError):
    """The file does not exist in the volume at that version."""

    code = "volume_file_not_found"


class GroupError(KeepgoingError, ValueError):
    """A worker group operation was refused: a bad name, size or setting, an image step
    the backend cannot build, or a secret that is not kept."""

    code = "group_error"


class GroupNotFoundError(GroupError, LookupError):
    """No worker group, revision or instance has the given name or id."""

    code = "group_not_found"


class GroupConflictError(GroupError):
    """A worker group operation conflicts with the groups as they are: a queue another
    group serves, more replicas than the group's ``max_replicas``."""

    code = "group_conflict"


class DeployRefusedError(GroupConflictError):
    """A deploy's replay check found runs that would block on the new code; nothing
    was deployed. ``report`` (a ``ReplayReport``) names each run, its diff, and the
    check's bound. Deploy with ``force=True`` to keep those runs on their revisions."""

    code = "deploy_refused"

    def __init__(self, message: str, report: Any = None) -> None:
        super().__init__(message)
        self.report = report


class StoreError(KeepgoingError):
    """The store failed or holds data this version cannot use."""

    code = "store_error"


class SchemaVersionError(StoreError):
    """The store's schema is newer than this version of keepgoing understands."""

    code = "schema_version"


class UnknownWorkflowWarning(KeepgoingError, UserWarning):
    """A warning, never raised by keepgoing: a run was started by a name no worker
    has served, close to names that have been served. The run is queued and waits
    for a worker that serves its name; pass ``strict=True`` to ``trigger_workflow``
    to refuse such a start instead."""

    code = "unknown_workflow"


class UnknownQueueWarning(UnknownWorkflowWarning):
    """A warning, never raised by keepgoing: a run was started on a queue that no
    group, worker or deploy of the store has ever served (a typo, or another
    system's queue name); the message names the closest known queue. The run is
    queued and waits; ``strict=True`` refuses such a start with
    :class:`QueueNotFoundError` instead."""

    code = "unknown_queue"


class InvalidLimitError(ConfigurationError):
    """A concurrency or rate limit is refused: a cap below one, a rate such as
    ``"ten per second"``, a key naming no argument, or an unknown named limit."""

    code = "invalid_limit"


class InvalidScheduleError(ConfigurationError):
    """A schedule's spec is refused: an invalid cron expression, an unknown time
    zone, an ``every`` of zero, an unknown overlap policy, or a workflow nothing serves."""

    code = "invalid_schedule"


class ScheduleNotFoundError(KeepgoingError, LookupError):
    """No schedule has the given id."""

    code = "schedule_not_found"


class ScheduleExistsError(KeepgoingError):
    """A schedule with the given id already exists (update it instead)."""

    code = "schedule_exists"
