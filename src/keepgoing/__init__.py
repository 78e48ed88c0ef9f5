"""keepgoing: durable execution for Python.

Workflows and AI agents whose every model call and tool call is a
checkpointed step, whose waits are durable timers held by the orchestrator,
and which carry on from the last finished step when their worker is killed.
"""

from keepgoing._api.client import Client
from keepgoing._api.context import current_workflow_id, now, operation_id, random, uuid4
from keepgoing._api.durations import Duration, parse_duration
from keepgoing._api.runs import WorkflowRun, WorkflowRunHandle
from keepgoing._api.task import TaskDefinition, TaskHandle, task
from keepgoing._api.workflow import WorkflowDefinition, workflow
from keepgoing._worker.settings import WorkerSettings
from keepgoing._worker.worker import Worker
from keepgoing.errors import (
    ConfigurationError,
    DuplicateNameError,
    InvalidDurationError,
    InvalidStoreURLError,
    KeepgoingError,
    NondeterminismError,
    PayloadError,
    RunNotFoundError,
    StoreError,
    TaskFailedError,
    WorkerImportError,
    WorkflowAlreadyRunningError,
    WorkflowBlockedError,
    WorkflowFailedError,
    WorkflowNotFoundError,
)

__version__ = "0.1.0"

__all__ = [
    "Client",
    "ConfigurationError",
    "DuplicateNameError",
    "Duration",
    "InvalidDurationError",
    "InvalidStoreURLError",
    "KeepgoingError",
    "NondeterminismError",
    "PayloadError",
    "RunNotFoundError",
    "StoreError",
    "TaskDefinition",
    "TaskFailedError",
    "TaskHandle",
    "Worker",
    "WorkerImportError",
    "WorkerSettings",
    "WorkflowAlreadyRunningError",
    "WorkflowBlockedError",
    "WorkflowDefinition",
    "WorkflowFailedError",
    "WorkflowNotFoundError",
    "WorkflowRun",
    "WorkflowRunHandle",
    "current_workflow_id",
    "now",
    "operation_id",
    "parse_duration",
    "random",
    "task",
    "uuid4",
    "workflow",
]
