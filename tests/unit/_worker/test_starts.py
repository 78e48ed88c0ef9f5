"""Starting runs: by a name no worker has served, idempotent starts, blocked-run retries."""

from __future__ import annotations

import asyncio
import uuid
import warnings
from pathlib import Path

import pytest

import keepgoing
from keepgoing import (
    InvalidRequestError,
    RunNotFoundError,
    UnknownWorkflowWarning,
    WorkflowFailedError,
    WorkflowNotFoundError,
    WorkflowNotRunningError,
    task,
    workflow,
)
from keepgoing._clock import system_clock
from keepgoing._history import events as ev
from keepgoing._store._versions import RETRY_BLOCKED_FIRST
from keepgoing._store.records import ActivationCommit, StartRequest
from keepgoing._store.sqlite import SqliteStore
from keepgoing._worker.settings import WorkerSettings
from keepgoing._worker.worker import Worker
from keepgoing._workflow.registry import Registry
from keepgoing.testing import FakeClock

CALLS: list[str] = []


@task(name="starts.step")
def step(key: str) -> str:
    CALLS.append(key)
    return key.upper()


@workflow(name="starts.twice")
async def twice(key: str) -> list[str]:
    return [await step(key), await step(key + "!")]


@workflow(name="starts.boom")
async def boom(key: str) -> None:
    await step(key)
    raise ValueError(f"boom {key}")


@workflow(name="starts.seven")
async def seven() -> int:
    return 7


@pytest.fixture(params=["memory", "sqlite"])
def any_client(request: pytest.FixtureRequest, tmp_path: Path) -> keepgoing.Client:
    url = "memory://" if request.param == "memory" else "sqlite:///" + str(tmp_path / "kg.db")
    client = keepgoing.Client(store=url)
    request.addfinalizer(client.close)
    return client


def _served(client: keepgoing.Client, *names: str, queue: str = "default") -> None:
    asyncio.run(client.store.record_workflows(list(names), [queue], system_clock.now()))


# -- item: start-up order ----------------------------------------------------------------
def test_a_name_no_worker_has_served_is_queued_without_a_warning(
    any_client: keepgoing.Client,
) -> None:
    handle = any_client.trigger_workflow("report.nightly", {"day": 1})  # warnings are errors
    run = any_client.get_run(handle.workflow_id)
    assert (run.status, run.waiting_for) == (
        "running",
        "waiting for a worker that serves report.nightly",
    )
    assert [r.waiting_for for r in any_client.list_runs()] == [run.waiting_for]
    assert any_client.send_workflow_message(handle.workflow_id, "go", {"a": 1})


def test_a_name_close_to_a_served_one_warns_and_is_queued(any_client: keepgoing.Client) -> None:
    _served(any_client, "report.nightly", "report.weekly")
    with pytest.warns(UnknownWorkflowWarning, match=r"did you mean 'report\.nightly'"):
        handle = any_client.trigger_workflow("report.nightyl")
    assert any_client.get_run(handle.workflow_id).status == "running"
    with pytest.warns(UnknownWorkflowWarning, match=r"served on queue\(s\) default, not on 'gpu'"):
        any_client.trigger_workflow("report.nightly", task_queue="gpu")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        any_client.trigger_workflow("report.nightly")  # served: no warning
        any_client.trigger_workflow("something.else.entirely")  # not close to anything


def test_strict_refuses_a_name_no_worker_has_served(any_client: keepgoing.Client) -> None:
    with pytest.raises(WorkflowNotFoundError, match=r"'report\.nightly'.*strict=True"):
        any_client.trigger_workflow("report.nightly", strict=True)
    assert any_client.list_runs() == []
    _served(any_client, "report.nightly")
    assert any_client.trigger_workflow("report.nightly", strict=True).workflow_name


# -- item: idempotent starts ---------------------------------------------------------------
def test_a_store_mode_request_id_makes_a_start_idempotent(any_client: keepgoing.Client) -> None:
    request_id = uuid.uuid4().hex
    first = any_client.trigger_workflow("report.nightly", {"day": 1}, request_id=request_id)
    again = any_client.trigger_workflow("report.nightly", {"day": 1}, request_id=request_id)
    assert first == again and first.run_id == request_id
    assert len(any_client.list_runs()) == 1
    with pytest.raises(InvalidRequestError, match="already started run"):
        any_client.trigger_workflow("report.weekly", request_id=request_id)
    with pytest.raises(ValueError, match="32 lowercase hex digits"):
        any_client.trigger_workflow("report.nightly", request_id="not-hex")


def test_a_start_and_wait_that_times_out_leaves_the_run_started(
    any_client: keepgoing.Client,
) -> None:
    # No worker serves the queue: the start is durable, the wait ends at its timeout.
    with pytest.raises(TimeoutError, match="is still running"):
        any_client.trigger_workflow(seven, workflow_id="seven-1", wait=True, timeout=0)
    assert any_client.get_run("seven-1").status == "running"
    with pytest.raises(keepgoing.WorkflowAlreadyRunningError):  # the same id, not a new run
        any_client.trigger_workflow(seven, workflow_id="seven-1", wait=True, timeout=0)


def test_run_workflow_on_an_ended_id_returns_the_recorded_outcome(
    any_client: keepgoing.Client,
) -> None:
    CALLS.clear()
    assert any_client.run_workflow(twice, {"key": "a"}, workflow_id="twice-1") == ["A", "A!"]
    assert any_client.run_workflow(twice, {"key": "a"}, workflow_id="twice-1") == ["A", "A!"]
    assert CALLS == ["a", "a!"]  # the second call ran nothing
    assert len(any_client.list_runs()) == 1
    assert any_client.run_workflow(twice, {"key": "b"}, workflow_id="twice-1", restart=True) == [
        "B",
        "B!",
    ]
    assert CALLS == ["a", "a!", "b", "b!"]
    with pytest.raises(WorkflowFailedError, match="boom c"):
        any_client.run_workflow(boom, {"key": "c"}, workflow_id="boom-1")
    with pytest.raises(WorkflowFailedError, match="boom c"):
        any_client.run_workflow(boom, {"key": "c"}, workflow_id="boom-1")
    assert CALLS.count("c") == 1
    with pytest.raises(InvalidRequestError, match=r"belongs to a run of 'starts\.twice'"):
        any_client.run_workflow(boom, {"key": "d"}, workflow_id="twice-1")


# -- item: what a send to an unknown or ended id raises -------------------------------------
def test_a_send_to_an_unknown_id_is_run_not_found_and_to_an_ended_run_not_running(
    any_client: keepgoing.Client,
) -> None:
    with pytest.raises(RunNotFoundError, match="no-such-id"):
        any_client.send_workflow_message("no-such-id", "go")
    any_client.run_workflow(seven, workflow_id="seven-1")
    with pytest.raises(WorkflowNotRunningError, match="is not running"):
        any_client.send_workflow_message("seven-1", "go")


# -- item: blocked runs ----------------------------------------------------------------------
async def _blocked_run(store: SqliteStore, version: str, now: float) -> str:
    handle = await store.start_run(StartRequest("r1", "w1", "starts.seven", {}, "default", "", now))
    (claim,) = await store.claim_activations(
        worker_id="old",
        queues=["default"],
        workflow_names=["starts.seven"],
        limit=1,
        lease_ttl=15,
        now=now,
    )
    await store.commit_activation(
        ActivationCommit(
            run_id=handle.run_id,
            fence=claim.fence,
            worker_id="old",
            saw_upto=1,
            time=now,
            commands=[],
            now=now,
            blocked_reason="a diff",
            code_version=version,
        )
    )
    return handle.run_id


async def test_a_worker_retries_a_blocked_run_after_the_backoff_even_with_the_same_code() -> None:
    clock = FakeClock()
    store = SqliteStore(":memory:")
    await store.open()
    registry = Registry()
    registry.add_workflow(seven)  # type: ignore[arg-type]
    run_id = await _blocked_run(store, seven.code_version, clock.now())
    worker = Worker(
        store, settings=WorkerSettings(blocked_interval=60), registry=registry, clock=clock
    )
    await worker.tick()  # at start: the code that blocked it does not retry it yet
    run = await store.get_run(run_id)
    assert run is not None and run.status == "blocked"
    clock.advance(RETRY_BLOCKED_FIRST)
    await worker.tick()
    run = await store.get_run(run_id)
    assert run is not None and (run.status, run.result) == ("completed", 7)
    kinds = [type(e).__name__ for e in await store.read_history(run_id)]
    assert kinds[-3:] == ["WorkflowBlocked", "ActivationCompleted", "WorkflowCompleted"]
    assert isinstance((await store.read_history(run_id))[0], ev.WorkflowStarted)


async def test_a_worker_with_other_code_retries_a_blocked_run_as_it_starts() -> None:
    clock = FakeClock()
    store = SqliteStore(":memory:")
    await store.open()
    registry = Registry()
    registry.add_workflow(seven)  # type: ignore[arg-type]
    run_id = await _blocked_run(store, "an-old-version", clock.now())
    worker = Worker(store, registry=registry, clock=clock)
    await worker.tick()
    run = await store.get_run(run_id)
    assert run is not None and run.status == "completed"
    assert run.code_versions == ("an-old-version", seven.code_version)
