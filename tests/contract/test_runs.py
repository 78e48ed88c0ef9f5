"""Runs: start, look-up, listing and history."""

from __future__ import annotations

import pytest

from keepgoing._history.events import (
    ActivationCompleted,
    ErrorInfo,
    TimerStarted,
    WorkflowCompleted,
    WorkflowFailed,
    WorkflowStarted,
)
from keepgoing._store.protocol import Store
from keepgoing.errors import WorkflowAlreadyRunningError

from ._builders import NOW, WF, claim_run, kinds, schedule, start, start_with, task


async def _end(store: Store, run_id: str, *, now: float = NOW) -> None:
    claim = await claim_run(store, run_id, now=now)
    await schedule(store, claim, [WorkflowCompleted(result="done")], now=now)


async def test_open_is_idempotent(store: Store) -> None:
    await store.open()
    run = await start(store)
    assert await store.get_run(run.run_id) == run


async def test_start_run_creates_a_running_runnable_run(store: Store) -> None:
    run = await start(store, "order-7", run_id="r-1", input={"order": 7})

    assert run.run_id == "r-1"
    assert run.workflow_id == "order-7"
    assert run.workflow_name == WF
    assert run.status == "running"
    assert run.runnable is True
    assert run.input == {"order": 7}
    assert run.task_queue == "default"
    assert run.code_version == "v1"
    assert run.created_at == NOW
    assert run.last_input_seq == 1
    assert run.ended_at is None
    assert run.result is None and run.error is None
    assert await store.get_run("r-1") == run


async def test_start_run_appends_workflow_started_at_seq_one(store: Store) -> None:
    run = await start(store, "order-7", run_id="r-1", input={"order": 7})

    history = await store.read_history(run.run_id)

    assert history == [
        WorkflowStarted(
            seq=1,
            at=NOW,
            workflow_name=WF,
            workflow_id="order-7",
            run_id="r-1",
            input={"order": 7},
            code_version="v1",
            task_queue="default",
        )
    ]


async def test_unknown_ids_give_none_and_empty_history(store: Store) -> None:
    assert await store.get_run("nope") is None
    assert await store.find_run("nope") is None
    assert await store.read_history("nope") == []


async def test_a_running_workflow_id_cannot_start_again(store: Store) -> None:
    first = await start(store, "wf-1", run_id="r-1")

    with pytest.raises(WorkflowAlreadyRunningError) as caught:
        await start(store, "wf-1", run_id="r-2")

    assert caught.value.workflow_id == "wf-1"
    assert caught.value.run_id == first.run_id
    assert await store.get_run("r-2") is None
    assert await store.find_run("wf-1") == first


async def test_a_blocked_workflow_id_cannot_start_again(store: Store) -> None:
    run = await start(store, "wf-1", run_id="r-1")
    claim = await claim_run(store, run.run_id)
    await schedule(store, claim, [], blocked_reason="code changed")

    with pytest.raises(WorkflowAlreadyRunningError):
        await start(store, "wf-1", run_id="r-2")


@pytest.mark.parametrize("ending", ["completed", "failed"])
async def test_an_ended_workflow_id_starts_again(store: Store, ending: str) -> None:
    run = await start(store, "wf-1", run_id="r-1")
    claim = await claim_run(store, run.run_id)
    end = (
        WorkflowCompleted(result=1)
        if ending == "completed"
        else WorkflowFailed(error=ErrorInfo(type="ValueError", message="x"))
    )
    await schedule(store, claim, [end])

    again = await start(store, "wf-1", run_id="r-2", now=NOW + 10)

    assert again.status == "running"
    assert await store.find_run("wf-1") == again
    old = await store.get_run("r-1")
    assert old is not None and old.status == ending


async def test_find_run_breaks_created_at_ties_by_insertion(store: Store) -> None:
    await start(store, "wf-1", run_id="r-1")
    await _end(store, "r-1")
    second = await start(store, "wf-1", run_id="r-2")  # same created_at

    assert await store.find_run("wf-1") == second


async def test_list_runs_newest_first(store: Store) -> None:
    await start(store, "a", run_id="r-a", now=NOW)
    await start(store, "b", run_id="r-b", now=NOW + 2)
    await start(store, "c", run_id="r-c", now=NOW + 1)
    await start(store, "d", run_id="r-d", now=NOW + 1)  # ties with c: inserted later

    runs = await store.list_runs()

    assert [r.run_id for r in runs] == ["r-b", "r-d", "r-c", "r-a"]


async def test_list_runs_filters_and_pages(store: Store) -> None:
    await start(store, "a", run_id="r-a", now=NOW, name="alpha")
    await start(store, "b", run_id="r-b", now=NOW + 1, name="beta")
    await start(store, "c", run_id="r-c", now=NOW + 2, name="alpha")
    await start(store, "d", run_id="r-d", now=NOW + 3, name="alpha")

    alphas = await store.list_runs(workflow_name="alpha")
    page = await store.list_runs(workflow_name="alpha", limit=1, offset=1)
    running = await store.list_runs(status="running", limit=2)
    none = await store.list_runs(status="completed")

    assert [r.run_id for r in alphas] == ["r-d", "r-c", "r-a"]
    assert [r.run_id for r in page] == ["r-c"]
    assert [r.run_id for r in running] == ["r-d", "r-c"]
    assert none == []


async def test_list_runs_filters_by_status(store: Store) -> None:
    await start(store, "a", run_id="r-a")
    await start(store, "b", run_id="r-b")
    await _end(store, "r-a")

    completed = await store.list_runs(status="completed")
    running = await store.list_runs(status="running")

    assert [r.run_id for r in completed] == ["r-a"]
    assert completed[0].result == "done"
    assert [r.run_id for r in running] == ["r-b"]


async def test_history_seqs_are_contiguous_and_after_seq_filters(store: Store) -> None:
    run, _ = await start_with(store, [task(1), TimerStarted(cmd=2, fire_at=NOW + 5)])

    history = await store.read_history(run.run_id)
    tail = await store.read_history(run.run_id, after_seq=2)

    assert [e.seq for e in history] == [1, 2, 3, 4]
    assert kinds(history) == [
        "WorkflowStarted",
        "ActivationCompleted",
        "TaskScheduled",
        "TimerStarted",
    ]
    assert tail == history[2:]
    assert await store.read_history(run.run_id, after_seq=4) == []


async def test_seqs_are_allocated_per_run(store: Store) -> None:
    a, _ = await start_with(store, [task(1)], "wf-a")
    b = await start(store, "wf-b")

    assert [e.seq for e in await store.read_history(a.run_id)] == [1, 2, 3]
    assert [e.seq for e in await store.read_history(b.run_id)] == [1]


async def test_returned_values_do_not_alias_the_store(store: Store) -> None:
    run = await start(store, input={"items": [1, 2]})
    run.input["items"].append(3)
    history = await store.read_history(run.run_id)
    history.clear()
    claim = await claim_run(store, run.run_id)
    claim.run.input["items"].append(4)

    again = await store.get_run(run.run_id)
    started = (await store.read_history(run.run_id))[0]

    assert again is not None and again.input == {"items": [1, 2]}
    assert isinstance(started, WorkflowStarted) and started.input == {"items": [1, 2]}


async def test_committed_command_events_are_copied(store: Store) -> None:
    scheduled = task(1)
    run, _ = await start_with(store, [scheduled])
    scheduled.args.append("mutated")

    history = await store.read_history(run.run_id)

    assert isinstance(history[1], ActivationCompleted)
    assert history[2] == task(1, seq=3, at=NOW)
