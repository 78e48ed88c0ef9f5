"""Volume writes staged by a task attempt commit with its completion, and only then."""

from __future__ import annotations

import dataclasses

from keepgoing._history.events import (
    ActivationCompleted,
    MemoryCommitted,
    TaskCompleted,
    WorkflowCompleted,
)
from keepgoing._store.protocol import Store
from keepgoing._store.records import FastActivation, TaskClaim, TaskOutcome
from keepgoing._store.volume_records import StagedCommit

from ._builders import (
    NOW,
    TTL,
    claim_one,
    failure,
    kinds,
    of_type,
    start_with,
    success,
    task,
)

NOTES = StagedCommit(
    "mem", puts=(("notes.md", b"notes"), ("scratchpad.md", b"scratch")), message="step notes"
)


def with_writes(outcome: TaskOutcome, *commits: StagedCommit) -> TaskOutcome:
    return dataclasses.replace(outcome, volume_commits=commits)


async def running_task(store: Store, *, retries: int = 0) -> TaskClaim:
    await store.volume_open("mem", create=True, now=NOW)
    await start_with(store, [task(1, retries=retries)])
    return await claim_one(store, now=NOW)


async def test_a_successful_attempt_commits_its_writes_before_task_completed(
    store: Store,
) -> None:
    claim = await running_task(store)

    result = await store.complete_task(with_writes(success(claim, now=NOW + 1), NOTES))

    assert result.accepted and result.final
    history = await store.read_history(claim.run_id)
    assert kinds(history)[-2:] == ["MemoryCommitted", "TaskCompleted"]
    memory = history[-2]
    assert memory == MemoryCommitted(
        seq=history[-1].seq - 1,
        at=NOW + 1,
        volume="mem",
        version=1,
        paths=["notes.md", "scratchpad.md"],
        cmd=1,
        attempt=1,
        ref="main",
    )
    version = await store.volume_version("mem", "main")
    assert version is not None
    assert (version.id, version.message, version.created_at) == (1, "step notes", NOW + 1)
    assert (version.run_id, version.step, version.attempt) == (claim.run_id, 1, 1)
    assert await store.volume_read("mem", "main", None, "scratchpad.md") == b"scratch"


async def test_a_failed_attempt_leaves_no_version(store: Store) -> None:
    claim = await running_task(store, retries=1)

    result = await store.complete_task(with_writes(failure(claim, now=NOW + 1), NOTES))

    assert result.accepted and not result.final
    assert await store.volume_versions("mem", "main", 10) == []
    assert of_type(await store.read_history(claim.run_id), MemoryCommitted) == []


async def test_a_stale_completion_leaves_no_version(store: Store) -> None:
    claim = await running_task(store)
    await store.reap_expired_leases(now=NOW + TTL + 1, limit=10)  # the attempt is lost
    retry = await claim_one(store, now=NOW + TTL + 2)

    stale = await store.complete_task(with_writes(success(claim, now=NOW + TTL + 3), NOTES))

    assert not stale.accepted
    assert await store.volume_versions("mem", "main", 10) == []
    assert retry.attempt == 2


async def test_the_retried_attempt_makes_the_one_version_of_its_step(store: Store) -> None:
    claim = await running_task(store, retries=1)
    await store.complete_task(with_writes(failure(claim, now=NOW + 1), NOTES))
    retry = await claim_one(store, now=NOW + 100)
    second = StagedCommit("mem", puts=(("notes.md", b"attempt 2"),))

    await store.complete_task(with_writes(success(retry, now=NOW + 101), second))

    versions = await store.volume_versions("mem", "main", 10)
    assert [(v.step, v.attempt, v.paths) for v in versions] == [(1, 2, ("notes.md",))]
    assert await store.volume_read("mem", "main", None, "notes.md") == b"attempt 2"
    (memory,) = of_type(await store.read_history(claim.run_id), MemoryCommitted)
    assert (memory.version, memory.attempt) == (1, 2)


async def test_several_volumes_and_refs_commit_with_one_completion(store: Store) -> None:
    claim = await running_task(store)
    await store.volume_open("other", create=True, now=NOW)
    commits = (
        NOTES,
        StagedCommit("other", puts=(("a", b"1"),)),
        StagedCommit("mem", "exp", puts=(("b", b"2"),), fork_from=("main", None)),
        StagedCommit("mem", "empty-fork", fork_from=("main", None)),  # a ref, no version
    )

    await store.complete_task(with_writes(success(claim, now=NOW + 1), *commits))

    memory = of_type(await store.read_history(claim.run_id), MemoryCommitted)
    assert [(m.volume, m.ref, m.version) for m in memory] == [
        ("mem", "main", 1),
        ("other", "main", 1),
        ("mem", "exp", 2),
    ]
    assert await store.volume_forks("mem", "main") == ["empty-fork", "exp"]
    assert await store.volume_version("mem", "empty-fork") is None


async def test_writes_commit_on_the_fast_path_too(store: Store) -> None:
    await store.volume_open("mem", create=True, now=NOW)
    run, result = await start_with(store, [task(1)], eager_claim=True, eager_limit=1)
    claim = result.eager[0]
    fast = FastActivation(
        run_fence=result.fence,
        last_input_seq=result.saw_upto,
        commands=[WorkflowCompleted(result="done")],
        time=NOW + 1,
    )

    done = await store.complete_task(with_writes(success(claim, now=NOW + 2), NOTES), fast)

    assert done.activation is not None and done.activation.ok
    history = await store.read_history(run.run_id)
    assert kinds(history)[-4:] == [
        "MemoryCommitted",
        "TaskCompleted",
        "ActivationCompleted",
        "WorkflowCompleted",
    ]
    (completed,) = of_type(history, TaskCompleted)
    (marker,) = of_type(history, ActivationCompleted)[-1:]
    assert marker.saw_upto == completed.seq == done.activation.saw_upto
    assert done.activation.last_seq == history[-1].seq
    record = await store.get_run(run.run_id)
    assert record is not None and record.status == "completed"
    assert [v.id for v in await store.volume_versions("mem", "main", 10)] == [1]


async def test_task_writes_rebase_on_writes_made_meanwhile(store: Store) -> None:
    claim = await running_task(store)
    outside = StagedCommit("mem", puts=(("outside.md", b"o"), ("notes.md", b"outside")))
    await store.volume_commit(outside, now=NOW + 1)  # while the task runs

    await store.complete_task(with_writes(success(claim, now=NOW + 2), NOTES))

    files = {f.path for f in await store.volume_files("mem", "main")}
    assert files == {"outside.md", "notes.md", "scratchpad.md"}
    assert await store.volume_read("mem", "main", None, "notes.md") == b"notes"
    head = await store.volume_version("mem", "main")
    assert head is not None and head.parent_id == 1
