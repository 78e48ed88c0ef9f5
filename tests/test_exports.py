"""The public names of ``keepgoing`` are frozen here: changing them is a decision."""

from __future__ import annotations

import importlib
import inspect

import keepgoing
import keepgoing.errors

EXPECTED_ALL = [
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


def test_all_is_frozen() -> None:
    assert keepgoing.__all__ == EXPECTED_ALL


def test_all_is_sorted_and_unique() -> None:
    assert keepgoing.__all__ == sorted(keepgoing.__all__)
    assert len(set(keepgoing.__all__)) == len(keepgoing.__all__)


def test_every_public_name_is_importable() -> None:
    for name in keepgoing.__all__:
        assert not name.startswith("_")
        assert getattr(keepgoing, name) is not None
        namespace: dict[str, object] = {}
        exec(f"from keepgoing import {name}", namespace)
        assert namespace[name] is getattr(keepgoing, name)


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from keepgoing import *", namespace)
    assert sorted(k for k in namespace if k != "__builtins__") == sorted(EXPECTED_ALL)


def test_public_errors_are_the_errors_module_classes() -> None:
    module = importlib.import_module("keepgoing.errors")
    for name in keepgoing.__all__:
        value = getattr(keepgoing, name)
        if inspect.isclass(value) and issubclass(value, BaseException):
            assert getattr(module, name) is value
            assert issubclass(value, keepgoing.KeepgoingError)
            assert isinstance(value.code, str) and value.code


def test_error_codes_are_unique() -> None:
    classes = [getattr(keepgoing.errors, name) for name in keepgoing.errors.__all__]
    codes = [cls.code for cls in classes]
    assert len(set(codes)) == len(codes)


def test_version_is_a_string() -> None:
    assert isinstance(keepgoing.__version__, str)
    assert keepgoing.__version__.count(".") == 2


def test_testing_module_exports() -> None:
    testing = importlib.import_module("keepgoing.testing")
    assert testing.__all__ == ["FakeClock", "fake_clock", "replay"]
    for name in testing.__all__:
        assert callable(getattr(testing, name))


def test_gateway_module_exports() -> None:
    gateway = importlib.import_module("keepgoing.gateway")
    assert gateway.__all__ == [
        "BudgetExceededError",
        "CassetteMissError",
        "ChatResponse",
        "EmbedResponse",
        "GatewayError",
        "achat",
        "aembed",
        "chat",
        "embed",
    ]
    assert gateway.BudgetExceededError is keepgoing.BudgetExceededError
    assert issubclass(gateway.BudgetExceededError, keepgoing.KeepgoingError)


def test_limits_module_exports() -> None:
    limits = importlib.import_module("keepgoing.limits")
    assert limits.__all__ == ["Concurrency", "InvalidLimitError", "RateLimit", "define"]
    assert limits.Concurrency is keepgoing.Concurrency
    assert limits.RateLimit is keepgoing.RateLimit
    assert limits.InvalidLimitError is keepgoing.InvalidLimitError
    assert issubclass(limits.InvalidLimitError, ValueError)
