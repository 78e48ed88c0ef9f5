"""keepgoing: durable execution for Python.

Workflows and AI agents whose every model call and tool call is a
checkpointed step, whose waits are durable timers held by the orchestrator,
and which carry on from the last finished step when their worker is killed.
"""

from keepgoing._api.children import (
    ChildHandle,
    ExternalEvent,
    continue_as_new,
    parent_workflow_id,
    start_child,
    wait_for_event,
)
from keepgoing._api.client import Client
from keepgoing._api.context import current_workflow_id, now, operation_id, random, uuid4
from keepgoing._api.durations import Duration, parse_duration
from keepgoing._api.messages import (
    WorkflowMessage,
    local_messages,
    send_message,
    wait_for_message,
)
from keepgoing._api.runs import WorkflowRun, WorkflowRunHandle
from keepgoing._api.task import TaskDefinition, TaskHandle, task
from keepgoing._api.workflow import WorkflowDefinition, workflow
from keepgoing._volumes.types import FileInfo, VersionInfo, VolumeDiff
from keepgoing._volumes.volume import Volume
from keepgoing._worker.settings import WorkerSettings
from keepgoing._worker.worker import Worker
from keepgoing.errors import (
    AuthenticationError,
    ConfigurationError,
    DuplicateNameError,
    InvalidDurationError,
    InvalidRequestError,
    InvalidStoreURLError,
    KeepgoingError,
    NondeterminismError,
    PayloadError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RunNotFoundError,
    SchemaVersionError,
    ServerError,
    StoreError,
    TaskFailedError,
    TokenNotFoundError,
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

__version__ = "0.1.0"

__all__ = [
    "AuthenticationError",
    "ChildHandle",
    "Client",
    "ConfigurationError",
    "DuplicateNameError",
    "Duration",
    "ExternalEvent",
    "FileInfo",
    "InvalidDurationError",
    "InvalidRequestError",
    "InvalidStoreURLError",
    "KeepgoingError",
    "NondeterminismError",
    "PayloadError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RunNotFoundError",
    "SchemaVersionError",
    "ServerError",
    "StoreError",
    "TaskDefinition",
    "TaskFailedError",
    "TaskHandle",
    "TokenNotFoundError",
    "VersionInfo",
    "Volume",
    "VolumeDiff",
    "VolumeError",
    "VolumeFileNotFoundError",
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
    "continue_as_new",
    "current_workflow_id",
    "local_messages",
    "now",
    "operation_id",
    "parent_workflow_id",
    "parse_duration",
    "random",
    "send_message",
    "start_child",
    "task",
    "uuid4",
    "wait_for_event",
    "wait_for_message",
    "workflow",
]
