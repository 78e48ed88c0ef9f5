"""Cancellation with ``Client.cancel_workflow``, durably on a SQLite store.

The workflow sees ``asyncio.CancelledError`` at its current await, its
``finally`` blocks run (tasks in them too), a running task attempt is told to
stop, and the run ends cancelled. Parent-to-child cascades need a worker that
outlives the parent, so they are in ``tests/integration/test_messages_cancel.py``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import keepgoing
from keepgoing import (
    RunNotFoundError,
    WorkflowCancelledError,
    WorkflowFailedError,
    WorkflowNotRunningError,
    task,
    wait_for_message,
    workflow,
)
from keepgoing._history import events as ev

from .._messaging_support import Runs, of_type, wait_until

pytestmark = pytest.mark.timeout(30)

CLEANUPS: list[str] = []


@task(name="tcancel.cleanup")
def cleanup(who: str) -> None:
    CLEANUPS.append(who)


@task(name="tcancel.slow", timeout="2m")
async def slow(folder: str) -> str:
    (Path(folder) / "slow-started").touch()
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        (Path(folder) / "slow-cancelled").touch()
        raise
    return "finished"


@task(name="tcancel.cleanup_after_stop")
def cleanup_after_stop(folder: str) -> None:
    """Cleanup that first waits (up to 1 s, within one lease) to see the slow attempt stop.

    The run is still going while this runs, so what it sees is the effect of the
    cancellation itself, not of the in-process worker shutting down afterwards.
    """
    marker = Path(folder) / "slow-cancelled"
    deadline = time.monotonic() + 1
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    CLEANUPS.append(f"runs_slow_task saw the attempt stop: {marker.exists()}")


@workflow(name="tcancel.waiter")
async def waiter() -> str:
    try:
        await wait_for_message("never")
    finally:
        await cleanup("waiter")
    return "unreachable"


@workflow(name="tcancel.runs_slow_task")
async def runs_slow_task(folder: str) -> str:
    try:
        return await slow(folder)
    finally:
        await cleanup_after_stop(folder)


@workflow(name="tcancel.sleeper")
async def sleeper() -> str:
    await asyncio.sleep(3600)
    return "woke"


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    CLEANUPS.clear()
    yield
    CLEANUPS.clear()


def has(client: keepgoing.Client, workflow_id: str, kind: type[ev.Event], **fields: object) -> bool:
    return bool(of_type(client.history(workflow_id), kind, **fields))


def test_cancelling_a_waiting_workflow_runs_its_finally_and_ends_it_cancelled(
    runs: Runs, client: keepgoing.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEEPGOING_USER", "operator-1")
    run = runs.start(waiter).drive()
    wait_until(lambda: has(client, run.workflow_id, ev.MessageWaitStarted), what="the wait")
    client.cancel_workflow(run.workflow_id, "no longer needed")

    with pytest.raises(WorkflowCancelledError, match="no longer needed"):
        run.join()
    with pytest.raises(WorkflowCancelledError) as caught:
        client.result(run.workflow_id, timeout=5)
    assert isinstance(caught.value, WorkflowFailedError)
    assert client.get_run(run.workflow_id).status == "cancelled"
    assert CLEANUPS == ["waiter"]

    history = client.history(run.workflow_id)
    (requested,) = of_type(history, ev.CancelRequested)
    assert (requested.reason, requested.actor_kind, requested.actor_id) == (
        "no longer needed",
        "user",
        "operator-1",
    )
    (ended,) = of_type(history, ev.WorkflowCancelled)
    assert ended.reason == "no longer needed"
    (cleaned,) = of_type(history, ev.TaskScheduled, name="tcancel.cleanup")
    assert of_type(history, ev.TaskCompleted, cmd=cleaned.cmd)
    assert isinstance(history[-1], ev.WorkflowCancelled)

    (entry,) = client.list_audit(action="run.cancel")
    assert (entry.actor_kind, entry.actor_id, entry.workflow_id, entry.run_id) == (
        "user",
        "operator-1",
        run.workflow_id,
        run.handle.run_id,
    )
    assert entry.detail == {"reason": "no longer needed"}

    # Cancelling again is refused and changes nothing.
    audit_before = client.list_audit()
    with pytest.raises(WorkflowNotRunningError):
        client.cancel_workflow(run.workflow_id, "again")
    assert client.history(run.workflow_id) == history
    assert client.list_audit() == audit_before


def test_cancelling_stops_a_running_async_task_attempt_and_finally_still_runs(
    runs: Runs, client: keepgoing.Client, tmp_path: Path
) -> None:
    run = runs.start(runs_slow_task, {"folder": str(tmp_path)}).drive()
    wait_until((tmp_path / "slow-started").exists, what="the slow task to start")
    client.cancel_workflow(run.workflow_id)

    with pytest.raises(WorkflowCancelledError):
        run.join()
    assert CLEANUPS == ["runs_slow_task saw the attempt stop: True"]
    history = client.history(run.workflow_id)
    (scheduled,) = of_type(history, ev.TaskScheduled, name="tcancel.slow")
    assert of_type(history, ev.TaskCancelRequested, cmd=scheduled.cmd)
    assert of_type(history, ev.TaskCompleted, cmd=scheduled.cmd) == []


@task(name="tcancel.outlives_a_lease", max_worker_losses=0)  # one attempt: nothing left over
async def outlives_a_lease(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "done"


@workflow(name="tcancel.long_step")
async def long_step(seconds: float) -> str:
    return await outlives_a_lease(seconds)


def test_run_workflow_runs_a_task_longer_than_the_lease_ttl(
    client: keepgoing.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEEPGOING_LEASE_TTL", "300ms")
    monkeypatch.setenv("KEEPGOING_HEARTBEAT", "50ms")
    assert client.run_workflow(long_step, {"seconds": 0.8}, workflow_id="long-step") == "done"
    history = client.history("long-step")
    assert of_type(history, ev.TaskAttemptFailed) == []


def test_cancelling_a_sleeping_workflow_cancels_its_timer(
    runs: Runs, client: keepgoing.Client
) -> None:
    run = runs.start(sleeper).drive()
    wait_until(lambda: has(client, run.workflow_id, ev.TimerStarted), what="the timer")
    client.cancel_workflow(run.workflow_id)
    with pytest.raises(WorkflowCancelledError):
        run.join()
    history = client.history(run.workflow_id)
    (timer,) = of_type(history, ev.TimerStarted)
    assert of_type(history, ev.TimerCancelled, cmd=timer.cmd)
    assert of_type(history, ev.TimerFired) == []


def test_a_run_cancelled_before_its_first_step_still_runs_its_finally(
    runs: Runs, client: keepgoing.Client
) -> None:
    run = runs.start(waiter)  # created, never activated yet
    client.cancel_workflow(run.workflow_id, "changed my mind")
    with pytest.raises(WorkflowCancelledError, match="changed my mind"):
        run.drive().join()
    assert CLEANUPS == ["waiter"]


def test_cancelling_an_unknown_or_ended_workflow_is_refused(
    runs: Runs, client: keepgoing.Client
) -> None:
    with pytest.raises(RunNotFoundError):
        client.cancel_workflow("no-such-workflow")
    run = runs.start(waiter)
    client.send_workflow_message(run.workflow_id, "never")
    assert run.drive().join() == "unreachable"
    with pytest.raises(WorkflowNotRunningError, match="completed"):
        client.cancel_workflow(run.workflow_id)
    assert client.list_audit(action="run.cancel") == []
