"""keepgoing: durable execution for Python.

Workflows and AI agents whose every model call and tool call is a
checkpointed step, whose waits are durable timers held by the orchestrator,
and which carry on from the last finished step when their worker is killed.
"""

from keepgoing._client.client import Client
from keepgoing._client.deploy import WorkflowWorker, deploy_workflow_worker
from keepgoing._client.runs import WorkflowRun, WorkflowRunHandle
from keepgoing._durations import Duration, parse_duration
from keepgoing._groups.image import Image
from keepgoing._groups.secrets import Secret
from keepgoing._limits import Concurrency, RateLimit
from keepgoing._schedules.commands import ScheduleInfo
from keepgoing._store.volume_records import FileInfo, VersionInfo, VolumeDiff, VolumeGc
from keepgoing._version import __version__ as __version__
from keepgoing._views.operations import Operation
from keepgoing._volumes.volume import Volume
from keepgoing._worker.inprocess import run_in_process as _run_in_process
from keepgoing._worker.logs import register_secret
from keepgoing._worker.settings import WorkerSettings
from keepgoing._worker.worker import Worker
from keepgoing._workflow.children import (
    ChildHandle,
    ExternalEvent,
    continue_as_new,
    parent_workflow_id,
    start_child,
    wait_for_event,
)
from keepgoing._workflow.context import (
    current_workflow_id,
    deprecate_patch,
    now,
    operation_id,
    patched,
    random,
    uuid4,
)
from keepgoing._workflow.messages import (
    WorkflowMessage,
    local_messages,
    send_message,
    wait_for_message,
)
from keepgoing._workflow.runner import install_direct_runner as _install_direct_runner
from keepgoing._workflow.schedule import Schedule
from keepgoing._workflow.status import set_status
from keepgoing._workflow.task import TaskDefinition, TaskHandle, task
from keepgoing._workflow.workflow import WorkflowDefinition, workflow
from keepgoing.errors import (
    AuthenticationError,
    BudgetExceededError,
    ConfigurationError,
    DeployRefusedError,
    DuplicateNameError,
    GatewayError,
    GroupConflictError,
    GroupError,
    GroupNotFoundError,
    InvalidDurationError,
    InvalidLimitError,
    InvalidRequestError,
    InvalidScheduleError,
    InvalidStoreURLError,
    KeepgoingError,
    NondeterminismError,
    NonRetryableError,
    OperationNotFoundError,
    OperationNotUncertainError,
    PayloadError,
    PayloadTooLargeError,
    PermissionDeniedError,
    QueueNotFoundError,
    ReuseRefusedError,
    RunNotFoundError,
    ScheduleExistsError,
    ScheduleNotFoundError,
    SchemaVersionError,
    ServerError,
    StoreError,
    TaskFailedError,
    TokenNotFoundError,
    UncertainOutcome,
    UnknownQueueWarning,
    UnknownWorkflowWarning,
    VolumeError,
    VolumeFileNotFoundError,
    VolumeNotFoundError,
    WorkerImportError,
    WorkflowAlreadyRunningError,
    WorkflowBlockedError,
    WorkflowCancelledError,
    WorkflowFailedError,
    WorkflowMessageTimeoutError,
    WorkflowNotFoundError,
    WorkflowNotRunningError,
)

# Direct calls (``await my_workflow(...)``) run on the worker's in-process engine;
# the definitions never import the worker, so the package wires the two here.
_install_direct_runner(_run_in_process)


__all__ = [
    "AuthenticationError",
    "BudgetExceededError",
    "ChildHandle",
    "Client",
    "Concurrency",
    "ConfigurationError",
    "DeployRefusedError",
    "DuplicateNameError",
    "Duration",
    "ExternalEvent",
    "FileInfo",
    "GatewayError",
    "GroupConflictError",
    "GroupError",
    "GroupNotFoundError",
    "Image",
    "InvalidDurationError",
    "InvalidLimitError",
    "InvalidRequestError",
    "InvalidScheduleError",
    "InvalidStoreURLError",
    "KeepgoingError",
    "NonRetryableError",
    "NondeterminismError",
    "Operation",
    "OperationNotFoundError",
    "OperationNotUncertainError",
    "PayloadError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "QueueNotFoundError",
    "RateLimit",
    "ReuseRefusedError",
    "RunNotFoundError",
    "Schedule",
    "ScheduleExistsError",
    "ScheduleInfo",
    "ScheduleNotFoundError",
    "SchemaVersionError",
    "Secret",
    "ServerError",
    "StoreError",
    "TaskDefinition",
    "TaskFailedError",
    "TaskHandle",
    "TokenNotFoundError",
    "UncertainOutcome",
    "UnknownQueueWarning",
    "UnknownWorkflowWarning",
    "VersionInfo",
    "Volume",
    "VolumeDiff",
    "VolumeError",
    "VolumeFileNotFoundError",
    "VolumeGc",
    "VolumeNotFoundError",
    "Worker",
    "WorkerImportError",
    "WorkerSettings",
    "WorkflowAlreadyRunningError",
    "WorkflowBlockedError",
    "WorkflowCancelledError",
    "WorkflowDefinition",
    "WorkflowFailedError",
    "WorkflowMessage",
    "WorkflowMessageTimeoutError",
    "WorkflowNotFoundError",
    "WorkflowNotRunningError",
    "WorkflowRun",
    "WorkflowRunHandle",
    "WorkflowWorker",
    "continue_as_new",
    "current_workflow_id",
    "deploy_workflow_worker",
    "deprecate_patch",
    "local_messages",
    "now",
    "operation_id",
    "parent_workflow_id",
    "parse_duration",
    "patched",
    "random",
    "register_secret",
    "send_message",
    "set_status",
    "start_child",
    "task",
    "uuid4",
    "wait_for_event",
    "wait_for_message",
    "workflow",
]
