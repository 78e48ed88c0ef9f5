"""Pinning, on both stores: a run is claimed only by workers of its revision, moves on
purpose, and a revision with no run left is retired."""

from __future__ import annotations

import json

import pytest

from keepgoing._history.events import (
    ChildStarted,
    PatchMarked,
    WorkflowCompleted,
    WorkflowContinuedAsNew,
)
from keepgoing._store.inspect_protocol import RunFilter
from keepgoing._store.protocol import Store
from keepgoing.errors import (
    GroupConflictError,
    GroupError,
    GroupNotFoundError,
    RunNotFoundError,
    WorkflowNotRunningError,
)

from ._builders import NOW, QUEUE, TASK, TTL, WF, claim_run, commit, schedule, start, task


async def deploy(store: Store, *, upgrade: str | None = None) -> int:
    spec: dict[str, object] = {"group": "g", "revision": 0}
    if upgrade:
        spec["upgrade"] = upgrade
    return await store.deploy_group(
        name="g", task_queue=QUEUE, backend="local", parent=None, spec=json.dumps(spec), now=NOW
    )


async def claim_as(store: Store, revision: int | None, worker: str = "w") -> list[str]:
    claims = await store.claim_activations(
        worker_id=worker,
        queues=[QUEUE],
        workflow_names=[WF],
        limit=10,
        lease_ttl=TTL,
        now=NOW,
        revision=revision,
    )
    for c in claims:
        await store.release_activation(c.run.run_id, c.fence)
    return sorted(c.run.workflow_id for c in claims)


async def tasks_as(store: Store, revision: int | None, queue: str = QUEUE) -> list[str]:
    claims = await store.claim_tasks(
        worker_id="w",
        queues=[queue],
        task_names=[TASK],
        limit=10,
        lease_ttl=TTL,
        now=NOW,
        revision=revision,
    )
    return sorted(c.workflow_id for c in claims)


async def test_workers_claim_only_the_runs_of_their_revision(store: Store) -> None:
    before = await start(store, "before")  # no group yet: any revision serves it
    await deploy(store)
    await start(store, "one")
    await deploy(store)
    await start(store, "two")
    assert before.group_revision is None

    assert await claim_as(store, 1) == ["before", "one"]
    assert await claim_as(store, 2) == ["before", "two"]
    assert await claim_as(store, 3) == ["before"]
    assert await claim_as(store, None) == ["before", "one", "two"]  # a worker started by hand


async def test_tasks_follow_their_runs_revision_on_its_own_queue(store: Store) -> None:
    await deploy(store)
    run = await start(store, "one")
    claim = await claim_run(store, run.run_id)
    other_queue = "workflows.g-abc12345"
    await schedule(store, claim, [task(1), task(2, task_queue=other_queue)])

    assert await tasks_as(store, 2) == []
    assert await tasks_as(store, 2, other_queue) == ["one"]  # a per-task group's queue
    assert await tasks_as(store, 1) == ["one"]


async def test_blocked_runs_are_retried_by_their_revision_only(store: Store) -> None:
    await deploy(store)
    run = await start(store, "one")
    claim = await claim_run(store, run.run_id)
    await schedule(store, claim, [], blocked_reason="changed", code_version="v1")
    await deploy(store)

    async def retry(revision: int) -> list[str]:
        claims = await store.claim_blocked(
            worker_id="w",
            queues=[QUEUE],
            versions={WF: "v2"},
            limit=10,
            lease_ttl=TTL,
            now=NOW,
            revision=revision,
        )
        return [c.run.workflow_id for c in claims]

    assert await retry(2) == []
    assert await retry(1) == ["one"]


async def test_migrate_moves_a_run_and_its_tasks(store: Store) -> None:
    await deploy(store)
    run = await start(store, "one")
    claim = await claim_run(store, run.run_id)
    await schedule(store, claim, [task(1)])
    await deploy(store)

    moved = await store.migrate_run("one", None, to_revision=2, now=NOW)
    assert moved.group_revision == 2
    assert await tasks_as(store, 1) == []
    assert await tasks_as(store, 2) == ["one"]
    statuses = {r.revision: r for r in await store.list_revisions("g")}
    assert (statuses[1].open_runs, statuses[2].open_runs) == (0, 1)
    assert statuses[2].current and not statuses[1].current


async def test_migrate_refuses_what_it_cannot_do(store: Store) -> None:
    await start(store, "nogroup")
    with pytest.raises(GroupNotFoundError, match="no worker group serves"):
        await store.migrate_run("nogroup", None, to_revision=1, now=NOW)
    await deploy(store)
    run = await start(store, "one")
    with pytest.raises(GroupNotFoundError, match="no revision 7"):
        await store.migrate_run("one", None, to_revision=7, now=NOW)
    with pytest.raises(RunNotFoundError):
        await store.migrate_run("missing", None, to_revision=1, now=NOW)
    (checked,) = [r for r in await store.open_runs_on(QUEUE) if r.workflow_id == "one"]
    with pytest.raises(GroupConflictError, match="moved on since it was checked"):
        await store.migrate_run(
            "one", None, to_revision=1, now=NOW, expect_seq=checked.next_seq + 1
        )
    moved = await store.migrate_run(
        "one", None, to_revision=1, now=NOW, expect_seq=checked.next_seq
    )
    assert moved.group_revision == 1
    claim = await claim_run(store, run.run_id)
    await schedule(store, claim, [WorkflowCompleted(result=1)])
    with pytest.raises(WorkflowNotRunningError):
        await store.migrate_run("one", None, to_revision=1, now=NOW)


async def test_a_blocked_run_that_moves_becomes_runnable(store: Store) -> None:
    await deploy(store)
    run = await start(store, "one")
    claim = await claim_run(store, run.run_id)
    await schedule(store, claim, [], blocked_reason="changed", code_version="v1")
    await deploy(store)
    moved = await store.migrate_run("one", run.run_id, to_revision=2, now=NOW + 1)
    assert (moved.status, moved.runnable, moved.group_revision) == ("running", True, 2)
    assert await claim_as(store, 2) == ["one"]


async def test_a_revision_is_retired_after_its_last_run(store: Store) -> None:
    await deploy(store)
    run = await start(store, "one")
    await deploy(store)
    await deploy(store)
    # Revision 2 never had a run; 1 has one; 3 is current.
    assert await store.retire_revisions("g", NOW) == [2]
    assert await store.retire_revisions("g", NOW) == []
    with pytest.raises(GroupError, match="retired"):
        await store.migrate_run("one", None, to_revision=2, now=NOW)

    claim = await claim_run(store, run.run_id)
    await schedule(store, claim, [WorkflowCompleted(result=1)])
    assert await store.retire_revisions("g", NOW + 5) == [1]
    statuses = {r.revision: r for r in await store.list_revisions("g")}
    assert statuses[1].retired_at == NOW + 5 and statuses[3].retired_at is None
    decisions = await store.list_decisions("g")
    assert [d.reason for d in decisions[:2]] == [
        "revision 1 retired: no run is left on it",
        "revision 2 retired: no run is left on it",
    ]
    assert await store.retire_revisions("nope", NOW) == []


async def test_revision_loads_split_the_queue_by_revision(store: Store) -> None:
    await deploy(store)
    one = await start(store, "one")
    claim = await claim_run(store, one.run_id)
    await schedule(store, claim, [task(1)])  # waits on its task
    await deploy(store, upgrade="auto")
    await start(store, "two", now=NOW + 1)  # runnable

    loads = {x.revision: x for x in await store.revision_loads(QUEUE, NOW)}
    assert set(loads) == {1, 2}
    assert (loads[1].queued, loads[1].running, loads[1].open_runs) == (1, 0, 1)
    assert (loads[2].queued, loads[2].running, loads[2].open_runs) == (1, 0, 1)
    upgrade = {r.revision: r.upgrade for r in await store.list_revisions("g")}
    assert upgrade == {1: "pinned", 2: "auto"}
    opened = await store.open_runs_on(QUEUE)
    assert [(r.workflow_id, r.group_revision) for r in opened] == [("two", 2), ("one", 1)]


async def test_runs_that_need_a_patch_are_the_open_ones_without_its_marker(store: Store) -> None:
    await deploy(store)
    passed = await start(store, "passed")
    claim = await claim_run(store, passed.run_id)
    await schedule(store, claim, [PatchMarked(change_id="swap"), task(1)])
    old = await start(store, "old", now=NOW + 1)
    claim = await claim_run(store, old.run_id)
    await schedule(store, claim, [PatchMarked(change_id="other"), task(1)])
    ended = await start(store, "ended", now=NOW + 2)
    claim = await claim_run(store, ended.run_id)
    await schedule(store, claim, [WorkflowCompleted(result=1)])
    await deploy(store)
    await start(store, "new", now=NOW + 3)

    async def ids(f: RunFilter) -> list[str]:
        return [r.workflow_id for r in (await store.page_runs(f, limit=50)).runs]

    assert await ids(RunFilter(needs_patch="swap")) == ["new", "old"]
    assert await ids(RunFilter(needs_patch="other")) == ["new", "passed"]
    assert await ids(RunFilter(needs_patch="swap", revision=1)) == ["old"]
    assert await ids(RunFilter(revision=2)) == ["new"]
    counts = await store.count_runs_by_status(RunFilter(needs_patch="swap"))
    assert counts.get("running") == 2
    # A marker written twice (a replayed activation re-committing) is kept once.
    claim = await claim_run(store, (await store.get_run("run-new")).run_id)  # type: ignore[union-attr]
    await schedule(store, claim, [PatchMarked(change_id="swap"), PatchMarked(change_id="swap")])
    assert await ids(RunFilter(needs_patch="swap")) == ["old"]


async def test_an_old_revisions_activation_in_flight_cannot_commit_after_a_move(
    store: Store,
) -> None:
    await deploy(store)
    run = await start(store, "one")
    claim = await claim_run(store, run.run_id)  # an old worker holds the activation
    await deploy(store)
    await store.migrate_run("one", None, to_revision=2, now=NOW)
    result = await commit(store, claim, [task(1)])
    assert not result.ok
    assert await claim_as(store, 1) == []
    assert await claim_as(store, 2) == ["one"]  # at once: the old lease went with the move


async def _run_of(store: Store, workflow_id: str) -> int | None:
    run = await store.find_run(workflow_id)
    assert run is not None, workflow_id
    return run.group_revision


async def test_children_and_successors_keep_their_parents_revision(store: Store) -> None:
    await deploy(store)
    parent = await start(store, "parent")
    await deploy(store)  # revision 2 is current now; the parent stays on 1
    claim = await claim_run(store, parent.run_id)
    child = ChildStarted(cmd=1, workflow_name=WF, workflow_id="child", input={})
    await schedule(store, claim, [child])
    assert await _run_of(store, "child") == 1
    assert await claim_as(store, 2) == []  # revision 2's workers never see the child
    assert "child" in await claim_as(store, 1)

    again = await claim_run(store, parent.run_id)
    await schedule(store, again, [WorkflowContinuedAsNew(input={"args": [], "kwargs": {}})])
    successor = await store.find_run("parent")
    assert successor is not None and successor.run_id != parent.run_id
    assert (successor.continued_from, successor.group_revision) == (parent.run_id, 1)
    # A started-fresh run takes the current revision, as before.
    assert (await start(store, "fresh")).group_revision == 2


async def test_a_moved_parent_takes_the_children_it_starts_along(store: Store) -> None:
    await deploy(store)
    parent = await start(store, "parent")
    claim = await claim_run(store, parent.run_id)
    first = ChildStarted(cmd=1, workflow_name=WF, workflow_id="first", input={})
    await schedule(store, claim, [first])
    await deploy(store)
    await deploy(store)
    await store.migrate_run("parent", None, to_revision=2, now=NOW)  # 3 is current
    claim = await claim_run(store, parent.run_id)
    second = ChildStarted(cmd=2, workflow_name=WF, workflow_id="second", input={})
    await schedule(store, claim, [second])
    assert await _run_of(store, "second") == 2  # where the parent is now, not where it began
    assert await _run_of(store, "first") == 1  # started before the move: pinned as it was


async def test_a_child_on_another_groups_queue_takes_that_groups_revision(store: Store) -> None:
    await deploy(store)
    await deploy(store)
    other = "workflows.other"
    for _ in range(3):
        await store.deploy_group(
            name="o", task_queue=other, backend="local", parent=None, spec="{}", now=NOW
        )
    parent = await start(store, "parent")
    claim = await claim_run(store, parent.run_id)
    child = ChildStarted(cmd=1, workflow_name=WF, workflow_id="away", input={}, task_queue=other)
    nogroup = ChildStarted(
        cmd=2, workflow_name=WF, workflow_id="loose", input={}, task_queue="nowhere"
    )
    await schedule(store, claim, [child, nogroup])
    assert (parent.group_revision, await _run_of(store, "away")) == (2, 3)
    assert await _run_of(store, "loose") is None
