"""Bad input fails where it is written, with a message that names it."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import keepgoing
from keepgoing import (
    Client,
    DuplicateNameError,
    InvalidDurationError,
    KeepgoingError,
    PayloadError,
    WorkflowNotFoundError,
    task,
    workflow,
)
from keepgoing._history import events as ev
from keepgoing._workflow.registry import registry

from .._sim import Sim

MakeSim = Callable[..., Sim]


@task(name="api.fetch")
def fetch(rows: list[int], label: str = "x") -> int:
    return len(rows)


@workflow(name="api.known")
async def known(n: int) -> int:
    return n


class Opaque:
    pass


# -- @workflow and @task definitions ----------------------------------------


def test_workflow_on_a_plain_function_is_a_type_error() -> None:
    def not_async() -> int:
        return 1

    with pytest.raises(TypeError, match=r"async def.*not_async"):
        workflow(not_async)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="async def"):
        workflow(name="api.lambda")(lambda: None)  # type: ignore[arg-type,return-value]


def test_task_needs_a_callable() -> None:
    with pytest.raises(TypeError, match="@task needs a function, not int"):
        task(42)  # type: ignore[call-overload]


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"timeout": "10x"}, "timeout of task 'api.bad'"),
        ({"timeout": -1}, "timeout of task 'api.bad'"),
        ({"timeout": None}, "timeout of task 'api.bad'"),
        ({"retry_delay": "soon"}, "retry_delay of task 'api.bad'"),
        ({"retry_delay": True}, "retry_delay of task 'api.bad'"),
        ({"retry_delay": []}, "retry_delay of task 'api.bad'"),
    ],
)
def test_malformed_durations_on_task_are_refused(options: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidDurationError) as caught:
        task(name="api.bad", **options)(_noop)
    assert str(caught.value).startswith(field)
    assert "api.bad" not in registry.tasks


def test_a_zero_timeout_is_refused() -> None:
    with pytest.raises(ValueError, match=r"timeout of task 'api\.bad' must be longer than zero"):
        task(name="api.bad", timeout=0)(_noop)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"retries": -1}, "retries of task 'api.bad' must be a non-negative int, not -1"),
        ({"retries": True}, "retries of task 'api.bad' must be a non-negative int, not True"),
        ({"retries": 1.5}, "retries of task 'api.bad' must be a non-negative int, not 1.5"),
        ({"retries": "2"}, "retries of task 'api.bad' must be a non-negative int"),
        ({"max_worker_losses": -3}, "max_worker_losses of task 'api.bad' must be"),
    ],
)
def test_bad_counts_are_value_errors(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        task(name="api.bad", **options)(_noop)
    assert message in str(caught.value)


def test_reconcile_must_be_callable() -> None:
    with pytest.raises(TypeError, match=r"reconcile of task 'api\.bad' must be callable"):
        task(name="api.bad", reconcile="lookup")(_noop)  # type: ignore[call-overload]


def test_task_options_are_kept() -> None:
    @task(name="api.options", retries=2, retry_delay="30s", timeout="5m", max_worker_losses=1)
    def options() -> None:
        """Docstring becomes the description."""

    assert options.name == "api.options"
    assert (options.retries, options.retry_delay, options.timeout) == (2, 30.0, 300.0)
    assert options.max_worker_losses == 1
    assert options.description == "Docstring becomes the description."
    assert registry.tasks["api.options"] is options


def _noop() -> None:
    return None


# -- duplicate names --------------------------------------------------------


def _write_module(directory: Path, filename: str, name: str) -> Path:
    path = directory / filename
    path.write_text(
        "import keepgoing\n"
        "\n"
        f"@keepgoing.task(name={name!r})\n"
        "def step() -> int:\n"
        "    return 1\n"
        "\n"
        f"@keepgoing.workflow(name={name + '.wf'!r})\n"
        "async def flow() -> int:\n"
        "    return 1\n"
    )
    return path


def _import(path: Path, module_name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


def test_the_same_name_from_two_files_is_a_duplicate(tmp_path: Path) -> None:
    name = f"dup.{uuid.uuid4().hex[:8]}"
    first = _write_module(tmp_path, "first_tasks.py", name)
    second = _write_module(tmp_path, "second_tasks.py", name)
    try:
        _import(first, "kg_dup_first")
        with pytest.raises(DuplicateNameError) as caught:
            _import(second, "kg_dup_second")
        message = str(caught.value)
        assert f"task name {name!r} is defined twice" in message
        assert "first_tasks.py" in message
        assert "second_tasks.py" in message
        assert "name=..." in message
        assert isinstance(caught.value, ValueError)
        assert isinstance(caught.value, KeepgoingError)
    finally:
        sys.modules.pop("kg_dup_first", None)


def test_a_duplicate_workflow_name_is_refused(tmp_path: Path) -> None:
    name = f"dupwf.{uuid.uuid4().hex[:8]}"
    path = _write_module(tmp_path, "flows.py", name)
    try:
        module = _import(path, "kg_dupwf")
        assert registry.workflow(name + ".wf") is module.flow

        async def flow() -> int:
            return 2

        with pytest.raises(DuplicateNameError, match=r"workflow name .* is defined twice"):
            workflow(name=name + ".wf")(flow)
    finally:
        sys.modules.pop("kg_dupwf", None)


def test_importing_the_same_file_again_is_fine(tmp_path: Path) -> None:
    name = f"reimport.{uuid.uuid4().hex[:8]}"
    path = _write_module(tmp_path, "tasks.py", name)
    try:
        old = _import(path, "kg_reimport")
        new = _import(path, "kg_reimport_again")
        assert registry.tasks[name] is new.step
        assert registry.tasks[name] is not old.step
        assert registry.workflow(name + ".wf") is new.flow
    finally:
        sys.modules.pop("kg_reimport", None)
        sys.modules.pop("kg_reimport_again", None)


def test_an_unknown_workflow_name_lists_the_known_ones() -> None:
    with pytest.raises(WorkflowNotFoundError) as caught:
        registry.workflow("nope")
    message = str(caught.value)
    assert "no workflow named 'nope'" in message
    assert "api.known" in message
    assert isinstance(caught.value, LookupError)


def test_a_client_checks_input_against_a_workflow_it_knows_by_name() -> None:
    with Client(store="memory://") as client:
        handle = client.trigger_workflow("api.known", {"n": 1})
        run = client.get_run(handle.workflow_id)
        assert (run.workflow_name, run.status) == ("api.known", "running")
        assert run.input == {"args": [], "kwargs": {"n": 1}}
        with pytest.raises(PayloadError, match=r"argument 'n' of workflow 'api\.known'"):
            client.trigger_workflow("api.known", {"n": {1}})
        with pytest.raises(TypeError, match=r"workflow 'api\.known': missing a required argument"):
            client.trigger_workflow(known, {"m": 1})
        with pytest.raises(WorkflowNotFoundError, match=r"api\.nowhere"):
            client.trigger_workflow("api.nowhere", {"n": 1}, strict=True)


# -- calls ------------------------------------------------------------------


def test_submit_outside_a_workflow_is_a_runtime_error() -> None:
    with pytest.raises(RuntimeError, match=r"api\.fetch\.submit\(\) works only inside a workflow"):
        fetch.submit([1])


async def test_calling_a_task_outside_a_workflow_calls_the_function() -> None:
    assert await fetch([1, 2, 3]) == 3
    assert fetch.fn([1]) == 1


def _run_one_activation(make_sim: MakeSim, fn: Callable[..., Any]) -> list[ev.Event]:
    return make_sim(fn).activate().commands


def test_a_non_json_task_argument_fails_at_the_call_site(make_sim: MakeSim) -> None:
    async def wf() -> list[str]:
        messages = []
        for bad in ({1, 2}, Opaque(), [1, {"k": b"raw"}]):
            try:
                fetch.submit(bad)  # type: ignore[arg-type]
            except PayloadError as exc:
                messages.append(str(exc))
        try:
            await fetch([1], label={"x": float("nan")})  # type: ignore[arg-type]
        except PayloadError as exc:
            messages.append(str(exc))
        return messages

    commands = _run_one_activation(make_sim, wf)
    assert len(commands) == 1  # nothing was scheduled
    (completed,) = commands
    assert isinstance(completed, ev.WorkflowCompleted)
    sets, objects, nested, floats = completed.result
    assert sets.startswith("argument 'rows' of task 'api.fetch' has type builtins.set")
    assert "not JSON" in sets
    assert f"has type {Opaque.__module__}.Opaque" in objects
    assert nested.startswith("argument 'rows' of task 'api.fetch'[1]['k'] has type builtins.bytes")
    assert floats.startswith("argument 'label' of task 'api.fetch'['x'] is the float nan")


def test_non_str_keys_are_named(make_sim: MakeSim) -> None:
    async def wf() -> str:
        try:
            fetch.submit([1], label={1: "one"})  # type: ignore[arg-type]
        except PayloadError as exc:
            return str(exc)
        return ""

    (completed,) = _run_one_activation(make_sim, wf)
    assert isinstance(completed, ev.WorkflowCompleted)
    assert "argument 'label' of task 'api.fetch' has the key 1 of type int" in completed.result


def test_wrong_arguments_to_a_task_name_the_task(make_sim: MakeSim) -> None:
    async def wf() -> list[str]:
        messages = []
        calls: list[Callable[[], object]] = [
            fetch.submit,  # type: ignore[list-item]
            lambda: fetch.submit([1], "a", "b"),  # type: ignore[call-arg]
            lambda: fetch.submit([1], colour="red"),  # type: ignore[call-arg]
        ]
        for call in calls:
            try:
                call()
            except TypeError as exc:
                messages.append(str(exc))
        return messages

    (completed,) = _run_one_activation(make_sim, wf)
    assert isinstance(completed, ev.WorkflowCompleted)
    missing, extra, unknown = completed.result
    assert missing == "task 'api.fetch': missing a required argument: 'rows'"
    assert extra == "task 'api.fetch': too many positional arguments"
    assert unknown == "task 'api.fetch': got an unexpected keyword argument 'colour'"


def test_bad_workflow_input_fails_before_anything_runs() -> None:
    with pytest.raises(PayloadError, match=r"argument 'n' of workflow 'api.known' has type"):
        known({1})  # type: ignore[arg-type,unused-coroutine]
    with pytest.raises(TypeError, match=r"workflow 'api.known': missing a required argument"):
        known()  # type: ignore[call-arg,unused-coroutine]


def test_bind_input_shapes() -> None:
    assert known.bind_input({"n": 1}) == {"args": [], "kwargs": {"n": 1}}
    assert known.bind_input([1]) == {"args": [1], "kwargs": {}}
    with pytest.raises(PayloadError, match=r"input keys of workflow 'api\.known' must be str"):
        known.bind_input({1: 1})
    with pytest.raises(PayloadError, match="must be a mapping of parameter names"):
        known.bind_input("n=1")


# -- context functions ------------------------------------------------------


def test_operation_id_outside_a_task_is_a_runtime_error() -> None:
    with pytest.raises(RuntimeError, match=r"operation_id\(\) is only available inside a task"):
        keepgoing.operation_id()


def test_current_workflow_id_outside_is_a_runtime_error() -> None:
    with pytest.raises(RuntimeError, match=r"current_workflow_id\(\) is only available"):
        keepgoing.current_workflow_id()


def test_current_workflow_id_inside_a_workflow(make_sim: MakeSim) -> None:
    async def wf() -> str:
        return keepgoing.current_workflow_id()

    sim = make_sim(wf, workflow_id="orders-42")
    assert sim.activate().commands == [ev.WorkflowCompleted(result="orders-42")]


def test_operation_id_inside_a_workflow_is_a_runtime_error(make_sim: MakeSim) -> None:
    async def wf() -> str:
        try:
            keepgoing.operation_id()
        except RuntimeError:
            return "refused"
        return "allowed"

    assert make_sim(wf).activate().commands == [ev.WorkflowCompleted(result="refused")]


def test_now_random_uuid4_outside_a_workflow_are_not_deterministic() -> None:
    assert keepgoing.random() != keepgoing.random()
    assert 0.0 <= keepgoing.random() < 1.0
    first, second = keepgoing.uuid4(), keepgoing.uuid4()
    assert first != second
    assert isinstance(first, uuid.UUID)
    assert first.version == 4
    moment = keepgoing.now()
    assert moment.tzinfo is not None
    assert abs(moment.timestamp() - time.time()) < 60


async def test_now_random_uuid4_work_on_an_ordinary_event_loop() -> None:
    await asyncio.sleep(0)
    assert keepgoing.uuid4() != keepgoing.uuid4()
    assert abs(keepgoing.now().timestamp() - time.time()) < 60
