"""Volume writes inside tasks: staged, visible to the task, committed with its completion.

The workflows run with ``Client(store=...).run_workflow``: tasks in this
process, every step recorded in the store the test then inspects.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import keepgoing
from keepgoing import Client, Volume, VolumeError, task, workflow
from keepgoing._history import events as ev
from keepgoing._store.protocol import Store
from keepgoing._store.sqlite import SqliteStore
from keepgoing._volumes import access

LATE_WRITE = threading.Event()
LATE_ERRORS: list[BaseException] = []


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    path = ":memory:" if request.param == "memory" else str(tmp_path / "kg.db")
    backend: Store = SqliteStore(path)
    yield backend
    access.call(backend, backend.close())


@pytest.fixture
def client(store: Store) -> Iterator[Client]:
    # Not closed: closing the client would close the store the test still reads.
    yield Client(store=store)


def history_of(client: Client, workflow_id: str) -> list[ev.Event]:
    return client.history(workflow_id)


# -- the tasks ----------------------------------------------------------------------------------


@task(name="vol.write_notes")
def write_notes(tag: str) -> dict[str, object]:
    memory = Volume("agent")
    memory.put_file("notes.md", f"notes {tag}\n")
    memory.put_file("scratchpad.md", f"scratch {tag}\n")
    return {
        "read_back": memory.read_text("notes.md"),
        "listed": [f.path for f in memory.listdir()],
        "versions_so_far": len(memory.versions()),
    }


@task(name="vol.flaky_writer", retries=1)
def flaky_writer() -> str:
    attempt = keepgoing._runtime.context.current_task_context().attempt  # type: ignore[union-attr]
    memory = Volume("agent")
    memory.put_file("notes.md", f"attempt {attempt}\n")
    memory.put_file(f"only-attempt-{attempt}.md", "x")
    if attempt == 1:
        raise RuntimeError("the first attempt dies after writing")
    return memory.read_text("notes.md")


@task(name="vol.always_fails")
def always_fails() -> None:
    Volume("agent").put_file("never.md", "never")
    raise RuntimeError("no luck")


@task(name="vol.async_step")
async def async_step() -> list[str]:
    memory = Volume("agent")  # sync calls on the worker's own event loop
    with memory.batch_upload(message="async batch"):
        memory.put_file("a.md", "a")
        memory.put_file("b.md", "b")
    memory.remove_file("a.md")
    await asyncio.sleep(0)
    return [f.path for f in memory.listdir()]


@task(name="vol.read_lessons")
def read_lessons() -> str:
    return Volume("agent").read_text("notes.md")


@task(name="vol.fork_and_rollback")
def fork_and_rollback() -> dict[str, str]:
    memory = Volume("agent")
    memory.put_file("plan.md", "staged, then rolled back")
    memory.rollback(1)
    branch = memory.fork("experiment")
    branch.put_file("plan.md", "on the branch")
    return {"main": memory.read_text("notes.md"), "branch": branch.read_text("plan.md")}


@task(name="vol.too_slow", timeout="1s")
def too_slow() -> None:
    time.sleep(1.5)
    try:
        Volume("agent").put_file("late.md", "late")
    except BaseException as exc:
        LATE_ERRORS.append(exc)
    finally:
        LATE_WRITE.set()


OUTER: list[Volume] = []  # a handle made outside any task (think: at module level)


@task(name="vol.use_outer_handle")
def use_outer_handle() -> dict[str, object]:
    outer = OUTER[0]
    outer.put_file("from-outer.md", "staged in the run's store")
    old = outer.at_version(1)
    branch = old.fork("from-v1")
    return {"old": old.read_text("notes.md"), "branch": branch.read_text("notes.md")}


@workflow(name="vol.outer_flow")
async def outer_flow() -> object:
    await write_notes("first")
    return await use_outer_handle()


@workflow(name="vol.notes_flow")
async def notes_flow(tag: str) -> object:
    return await write_notes(tag)


@workflow(name="vol.flaky_flow")
async def flaky_flow() -> str:
    return await flaky_writer()


@workflow(name="vol.failing_flow")
async def failing_flow() -> None:
    await always_fails()


@workflow(name="vol.two_steps")
async def two_steps() -> list[object]:
    return [await write_notes("step one"), await read_lessons(), await async_step()]


@workflow(name="vol.fork_flow")
async def fork_flow() -> dict[str, str]:
    await write_notes("base")
    return await fork_and_rollback()


@workflow(name="vol.slow_flow")
async def slow_flow() -> None:
    await too_slow()


# -- the tests ----------------------------------------------------------------------------------


def test_a_task_sees_its_writes_and_they_commit_as_one_version(
    client: Client, store: Store
) -> None:
    result = client.run_workflow(notes_flow, {"tag": "t1"}, workflow_id="notes-1")

    assert result == {
        "read_back": "notes t1\n",
        "listed": ["notes.md", "scratchpad.md"],
        "versions_so_far": 0,  # staged writes are not a version until the task completes
    }
    memory = Volume("agent", store=store)
    (version,) = memory.versions()
    assert version.paths == ("notes.md", "scratchpad.md")
    assert (version.step, version.attempt, version.message) == (
        1,
        1,
        "task vol.write_notes (step 1, attempt 1)",
    )
    history = history_of(client, "notes-1")
    (memory_event,) = [e for e in history if isinstance(e, ev.MemoryCommitted)]
    completed = next(e for e in history if isinstance(e, ev.TaskCompleted))
    assert memory_event.seq == completed.seq - 1
    assert (memory_event.volume, memory_event.version, memory_event.paths) == (
        "agent",
        1,
        ["notes.md", "scratchpad.md"],
    )
    assert version.run_id == client.get_run("notes-1").run_id


def test_a_failed_attempt_leaves_nothing_and_the_retry_makes_one_version(
    client: Client, store: Store
) -> None:
    assert client.run_workflow(flaky_flow, workflow_id="flaky-1") == "attempt 2\n"

    memory = Volume("agent", store=store)
    (version,) = memory.versions()
    assert (version.step, version.attempt) == (1, 2)
    assert [f.path for f in memory.listdir()] == ["notes.md", "only-attempt-2.md"]
    history = history_of(client, "flaky-1")
    assert [type(e).__name__ for e in history if e.ROLE == "info"] == [
        "TaskAttemptFailed",
        "MemoryCommitted",
    ]


def test_a_task_that_fails_for_good_writes_nothing(client: Client, store: Store) -> None:
    with pytest.raises(keepgoing.WorkflowFailedError):
        client.run_workflow(failing_flow, workflow_id="failing-1")
    assert Volume("agent", store=store).versions() == []


def test_the_next_step_reads_what_the_last_one_committed(client: Client, store: Store) -> None:
    result = client.run_workflow(two_steps, workflow_id="two-1")

    assert result[1] == "notes step one\n"
    assert result[2] == ["b.md", "notes.md", "scratchpad.md"]
    versions = Volume("agent", store=store).versions()
    assert [(v.step, v.message) for v in versions] == [
        (1, "task vol.write_notes (step 1, attempt 1)"),
        (3, "async batch"),
    ]
    assert versions[1].paths == ("b.md",)  # a.md came and went inside the task


def test_rollback_and_fork_inside_a_task_commit_with_it(client: Client, store: Store) -> None:
    result = client.run_workflow(fork_flow, workflow_id="fork-1")

    assert result == {"main": "notes base\n", "branch": "on the branch"}
    memory = Volume("agent", store=store)
    latest = memory.versions()[-1]
    assert (latest.id, latest.step, latest.paths) == (2, 2, ())  # equal to version 1
    assert not memory.exists("plan.md")
    assert memory.forks() == ["experiment"]
    branch = Volume("agent", store=store, ref="experiment")
    assert branch.read_text("plan.md") == "on the branch"
    assert branch.read_text("notes.md") == "notes base\n"
    events = [e for e in history_of(client, "fork-1") if isinstance(e, ev.MemoryCommitted)]
    assert [(e.ref, e.cmd) for e in events] == [("main", 1), ("main", 2), ("experiment", 2)]


def test_a_timed_out_task_cannot_write_late(client: Client, store: Store) -> None:
    LATE_WRITE.clear()
    LATE_ERRORS.clear()
    with pytest.raises(keepgoing.WorkflowFailedError, match="timeout"):
        client.run_workflow(slow_flow, workflow_id="slow-1")
    assert LATE_WRITE.wait(10)

    assert len(LATE_ERRORS) == 1 and isinstance(LATE_ERRORS[0], VolumeError)
    assert "has ended" in str(LATE_ERRORS[0])
    assert Volume("agent", store=store).versions() == []


def test_in_process_runs_keep_volumes_in_their_own_memory_store() -> None:
    result = asyncio.run(notes_flow("in-process"))
    assert result == {
        "read_back": "notes in-process\n",
        "listed": ["notes.md", "scratchpad.md"],
        "versions_so_far": 0,
    }


def test_a_handle_made_outside_tasks_writes_to_the_store_of_the_task_using_it(
    client: Client, store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEEPGOING_STORE", f"sqlite:///{tmp_path / 'default.db'}")
    OUTER[:] = [Volume("agent")]  # bound to KEEPGOING_STORE: not the store the tasks run on

    result = client.run_workflow(outer_flow, workflow_id="outer-1")

    assert result == {"old": "notes first\n", "branch": "notes first\n"}
    memory = Volume("agent", store=store)
    assert [(v.id, v.step, v.paths) for v in memory.versions()] == [
        (1, 1, ("notes.md", "scratchpad.md")),
        (2, 2, ("from-outer.md",)),
    ]
    assert memory.forks() == ["from-v1"]
    assert OUTER[0].versions() == []  # nothing went to the default store
    default = access.shared_store(None)
    access.call(default, default.close())
