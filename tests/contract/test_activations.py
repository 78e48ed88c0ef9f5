"""Activations: claims, fencing, commits, the runnable flag, eager claims and ending a run."""

from __future__ import annotations

from keepgoing._history.events import (
    ActivationCompleted,
    ErrorInfo,
    TaskCompleted,
    TimerCancelled,
    TimerFired,
    TimerStarted,
    WorkflowBlocked,
    WorkflowCompleted,
    WorkflowFailed,
)
from keepgoing._store.protocol import Store

from ._builders import (
    NOW,
    TTL,
    claim_one,
    claim_run,
    claim_runs,
    claim_tasks,
    commit,
    kinds,
    schedule,
    start,
    start_with,
    success,
    task,
)

# -- claims -------------------------------------------------------------------------


async def test_claim_leases_the_run_and_increments_its_fence(store: Store) -> None:
    run = await start(store)

    claims = await claim_runs(store, worker="w1", ttl=TTL)

    assert len(claims) == 1
    claim = claims[0]
    assert claim.run.run_id == run.run_id
    assert claim.fence == run.fence + 1
    assert claim.run.fence == claim.fence
    assert claim.lease_expires_at == NOW + TTL
    assert claim.run.runnable is True
    stored = await store.get_run(run.run_id)
    assert stored is not None and stored.fence == claim.fence


async def test_claim_filters_by_queue_and_workflow_name(store: Store) -> None:
    await start(store, "a", queue="other")
    await start(store, "b", name="other-wf")
    await start(store, "c")

    wrong_queue = await claim_runs(store, queues=("nowhere",))
    wrong_name = await claim_runs(store, names=("nothing",))
    claims = await claim_runs(store)

    assert wrong_queue == [] and wrong_name == []
    assert [c.run.workflow_id for c in claims] == ["c"]


async def test_claim_matches_any_of_several_queues_and_names(store: Store) -> None:
    await start(store, "a", queue="q1", name="n1")
    await start(store, "b", queue="q2", name="n2")

    claims = await claim_runs(store, queues=("q1", "q2"), names=("n1", "n2"))

    assert sorted(c.run.workflow_id for c in claims) == ["a", "b"]


async def test_claim_is_oldest_runnable_first_and_limited(store: Store) -> None:
    for wf in ("a", "b", "c"):
        await start(store, wf)

    first = await claim_runs(store, limit=2)
    second = await claim_runs(store, limit=2)

    assert [c.run.workflow_id for c in first] == ["a", "b"]
    assert [c.run.workflow_id for c in second] == ["c"]


async def test_a_leased_run_is_not_claimable_until_its_lease_expires(store: Store) -> None:
    run = await start(store)
    first = await claim_run(store, run.run_id, worker="w1", ttl=TTL)

    during = await claim_runs(store, worker="w2", now=NOW + TTL - 1)
    after = await claim_runs(store, worker="w2", now=NOW + TTL + 1)

    assert during == []
    assert len(after) == 1
    assert after[0].fence == first.fence + 1
    assert after[0].lease_expires_at == NOW + TTL + 1 + TTL


async def test_runs_that_are_not_runnable_or_not_running_are_not_claimed(store: Store) -> None:
    idle, _ = await start_with(store, [task(1)], "idle")
    done, _ = await start_with(store, [WorkflowCompleted(result=None)], "done")

    claims = await claim_runs(store, now=NOW + 100)

    assert claims == []
    for run_id in (idle.run_id, done.run_id):
        record = await store.get_run(run_id)
        assert record is not None and record.runnable is False


async def test_release_activation_makes_the_run_claimable_at_once(store: Store) -> None:
    run = await start(store)
    claim = await claim_run(store, run.run_id, worker="w1")

    await store.release_activation(run.run_id, claim.fence)
    again = await claim_runs(store, worker="w2")

    assert [c.run.run_id for c in again] == [run.run_id]
    assert again[0].fence == claim.fence + 1


async def test_release_activation_with_a_stale_fence_does_nothing(store: Store) -> None:
    run = await start(store)
    old = await claim_run(store, run.run_id, worker="w1")
    new = await claim_run(store, run.run_id, worker="w2", now=NOW + TTL + 1)

    await store.release_activation(run.run_id, old.fence)

    assert await claim_runs(store, worker="w3", now=NOW + TTL + 2) == []
    assert (await commit(store, new, [], worker="w2", now=NOW + TTL + 2)).ok


# -- commits --------------------------------------------------------------------------


async def test_commit_appends_the_marker_then_the_commands(store: Store) -> None:
    run = await start(store)
    claim = await claim_run(store, run.run_id)
    commands = [task(1), TimerStarted(cmd=2, fire_at=NOW + 50)]

    result = await commit(store, claim, commands, worker="w1", now=NOW + 3)

    assert result.ok
    assert result.last_seq == 4
    assert result.fence == claim.fence
    assert result.saw_upto == 1
    assert result.eager == []
    history = await store.read_history(run.run_id)
    assert history[1:] == [
        ActivationCompleted(seq=2, at=NOW + 3, saw_upto=1, time=NOW + 2, worker="w1"),
        task(1, seq=3, at=NOW + 3),
        TimerStarted(seq=4, at=NOW + 3, cmd=2, fire_at=NOW + 50),
    ]


async def test_commit_releases_the_lease_and_clears_runnable(store: Store) -> None:
    run = await start(store)
    claim = await claim_run(store, run.run_id)

    await schedule(store, claim, [task(1)])

    record = await store.get_run(run.run_id)
    assert record is not None
    assert record.runnable is False
    assert record.status == "running"
    assert record.fence == claim.fence
    assert record.last_input_seq == 1


async def test_commit_with_no_commands_appends_only_the_marker(store: Store) -> None:
    run = await start(store)
    claim = await claim_run(store, run.run_id)

    result = await schedule(store, claim, [])

    assert result.last_seq == 2
    assert kinds(await store.read_history(run.run_id)) == [
        "WorkflowStarted",
        "ActivationCompleted",
    ]


async def test_commit_creates_claimable_tasks(store: Store) -> None:
    await start_with(store, [task(1, retries=2, timeout=30.0, image="img:1")])

    claim = await claim_one(store)

    assert claim.cmd == 1
    assert claim.args == [1] and claim.kwargs == {"k": "v"}
    assert claim.retries == 2 and claim.timeout == 30.0 and claim.image == "img:1"


async def test_a_stale_fence_commits_nothing(store: Store) -> None:
    run = await start(store)
    old = await claim_run(store, run.run_id, worker="w1")
    new = await claim_run(store, run.run_id, worker="w2", now=NOW + TTL + 1)
    before = await store.read_history(run.run_id)

    stale = await commit(store, old, [task(1)], worker="w1", now=NOW + TTL + 2)

    assert stale.ok is False
    assert await store.read_history(run.run_id) == before
    assert await claim_tasks(store, now=NOW + 100) == []
    record = await store.get_run(run.run_id)
    assert record is not None and record.runnable is True and record.fence == new.fence
    assert (await commit(store, new, [task(1)], worker="w2", now=NOW + TTL + 2)).ok


async def test_commit_after_the_run_ended_is_refused(store: Store) -> None:
    run = await start(store)
    claim = await claim_run(store, run.run_id)
    await schedule(store, claim, [task(1)])
    # Completing the task makes the run runnable; the next activation ends it.
    await store.complete_task(success(await claim_one(store)))
    ending = await claim_run(store, run.run_id, now=NOW + 2)
    await schedule(store, ending, [WorkflowCompleted(result=1)], now=NOW + 2)
    before = await store.read_history(run.run_id)

    late = await commit(store, ending, [task(2)], now=NOW + 3)

    assert late.ok is False
    assert await store.read_history(run.run_id) == before


async def test_an_expired_but_unclaimed_lease_can_still_commit(store: Store) -> None:
    run = await start(store)
    claim = await claim_run(store, run.run_id, ttl=TTL)

    result = await commit(store, claim, [task(1)], now=NOW + TTL + 5)

    assert result.ok


async def test_input_after_saw_upto_keeps_the_run_runnable(store: Store) -> None:
    """Trap 1: a task completes while an activation that has not seen it runs."""
    run, _ = await start_with(store, [task(1), task(2)])
    t1 = await claim_one(store, now=NOW + 1)
    t2 = await claim_one(store, now=NOW + 1)
    await store.complete_task(success(t1, now=NOW + 2))
    claim = await claim_run(store, run.run_id, now=NOW + 3)
    seen = claim.run.last_input_seq
    await store.complete_task(success(t2, now=NOW + 4))  # input seen + 1

    result = await commit(store, claim, [TimerStarted(cmd=3, fire_at=NOW + 99)], now=NOW + 5)

    assert result.ok and result.saw_upto == seen
    history = await store.read_history(run.run_id)
    late = [e for e in history if isinstance(e, TaskCompleted) and e.cmd == 2]
    assert late[0].seq == seen + 1
    marker = [e for e in history if isinstance(e, ActivationCompleted)][-1]
    assert marker.seq == seen + 2 and marker.saw_upto == seen
    record = await store.get_run(run.run_id)
    assert record is not None and record.runnable is True
    assert record.last_input_seq == seen + 1
    again = await claim_run(store, run.run_id, now=NOW + 6)
    assert again.run.last_input_seq == seen + 1


async def test_commit_that_saw_every_input_clears_runnable(store: Store) -> None:
    run, _ = await start_with(store, [task(1)])
    await store.complete_task(success(await claim_one(store), now=NOW + 2))
    claim = await claim_run(store, run.run_id, now=NOW + 3)

    await schedule(store, claim, [task(2)], now=NOW + 4)

    record = await store.get_run(run.run_id)
    assert record is not None and record.runnable is False


# -- eager claims ---------------------------------------------------------------------


async def test_eager_claim_takes_the_scheduled_tasks_for_the_committer(store: Store) -> None:
    run = await start(store)
    claim = await claim_run(store, run.run_id)

    result = await commit(
        store,
        claim,
        [task(1, timeout=30.0), task(2)],
        worker="w1",
        now=NOW + 1,
        eager_claim=True,
        eager_limit=1,
        lease_ttl=10.0,
    )

    assert result.ok
    assert len(result.eager) == 1
    eager = result.eager[0]
    assert (eager.run_id, eager.cmd, eager.workflow_id) == (run.run_id, 1, run.workflow_id)
    assert eager.attempt == 1
    assert eager.fence == 1
    assert eager.started_at == NOW + 1
    assert eager.deadline == NOW + 1 + 30.0
    assert eager.lease_expires_at == NOW + 1 + 10.0
    assert eager.args == [1]
    others = await claim_tasks(store, worker="w2", now=NOW + 2)
    assert [c.cmd for c in others] == [2]
    # The eagerly claimed attempt completes like any other.
    assert (await store.complete_task(success(eager, now=NOW + 3))).accepted


async def test_an_eager_claims_lease_is_the_one_stored(store: Store) -> None:
    # The claim reports its lease without reading it back: the row must hold the same
    # figure, so the reaper takes the attempt exactly when its holder thinks it expires.
    _, result = await start_with(
        store, [task(1)], now=NOW + 0.1, eager_claim=True, eager_limit=1, lease_ttl=0.2
    )
    (eager,) = result.eager
    assert eager.lease_expires_at == NOW + 0.1 + 0.2

    assert await store.reap_expired_leases(now=eager.lease_expires_at, limit=10) == 0
    after = eager.lease_expires_at + 1e-6
    assert await store.reap_expired_leases(now=after, limit=10) == 1


async def test_eager_claim_honours_the_limit_of_several(store: Store) -> None:
    _, result = await start_with(
        store, [task(1), task(2), task(3)], eager_claim=True, eager_limit=2
    )

    assert sorted(c.cmd for c in result.eager) == [1, 2]
    assert [c.cmd for c in await claim_tasks(store)] == [3]


async def test_without_eager_claim_nothing_is_claimed(store: Store) -> None:
    _, result = await start_with(store, [task(1)], eager_claim=False, eager_limit=5)

    assert result.eager == []
    assert [c.cmd for c in await claim_tasks(store)] == [1]


# -- timers in commits -----------------------------------------------------------------


async def test_timer_cancelled_cancels_a_pending_timer(store: Store) -> None:
    run, _ = await start_with(
        store,
        [TimerStarted(cmd=1, fire_at=NOW + 5), TimerStarted(cmd=2, fire_at=NOW + 5), task(3)],
    )
    await store.complete_task(success(await claim_one(store), now=NOW + 1))
    claim = await claim_run(store, run.run_id, now=NOW + 2)
    await schedule(store, claim, [TimerCancelled(cmd=1)], now=NOW + 2)

    fired = await store.fire_due_timers(now=NOW + 10, limit=10)

    history = await store.read_history(run.run_id)
    assert fired == 1
    assert [e.cmd for e in history if isinstance(e, TimerFired)] == [2]
    assert history[-2] == TimerCancelled(seq=history[-2].seq, at=NOW + 2, cmd=1)


# -- ending and blocking --------------------------------------------------------------------


async def test_workflow_completed_ends_the_run_and_cancels_open_work(store: Store) -> None:
    run, _ = await start_with(store, [task(1), task(2), TimerStarted(cmd=3, fire_at=NOW + 5)])
    running = await claim_one(store, now=NOW + 1)  # task 1 runs, task 2 stays pending
    await store.fire_due_timers(now=NOW + 5, limit=10)
    claim = await claim_run(store, run.run_id, now=NOW + 6)
    await schedule(store, claim, [TimerStarted(cmd=4, fire_at=NOW + 50)], now=NOW + 6)
    await store.complete_task(success(running, now=NOW + 7))
    ending = await claim_run(store, run.run_id, now=NOW + 8)

    result = await schedule(store, ending, [WorkflowCompleted(result={"n": 1})], now=NOW + 8)

    record = await store.get_run(run.run_id)
    assert record is not None
    assert record.status == "completed"
    assert record.result == {"n": 1}
    assert record.ended_at == NOW + 8
    history = await store.read_history(run.run_id)
    assert history[-1] == WorkflowCompleted(seq=result.last_seq, at=NOW + 8, result={"n": 1})
    assert await claim_tasks(store, now=NOW + 100) == []
    assert await store.fire_due_timers(now=NOW + 100, limit=10) == 0
    assert await claim_runs(store, now=NOW + 100) == []


async def test_a_running_task_of_an_ended_run_cannot_complete(store: Store) -> None:
    run, _ = await start_with(store, [task(1), task(2)])
    t1 = await claim_one(store, now=NOW + 1)
    t2 = await claim_one(store, now=NOW + 1)
    await store.complete_task(success(t1, now=NOW + 2))
    ending = await claim_run(store, run.run_id, now=NOW + 3)
    await schedule(store, ending, [WorkflowCompleted(result=None)], now=NOW + 3)
    before = await store.read_history(run.run_id)

    late = await store.complete_task(success(t2, now=NOW + 4))

    assert late.accepted is False
    assert await store.read_history(run.run_id) == before
    assert await store.heartbeat("w1", lease_ttl=TTL, now=NOW + 5) == set()


async def test_workflow_failed_ends_the_run_with_its_error(store: Store) -> None:
    error = ErrorInfo(type="RuntimeError", message="gave up", traceback="tb")
    run, result = await start_with(
        store, [TimerStarted(cmd=1, fire_at=NOW + 5), WorkflowFailed(error=error)]
    )

    record = await store.get_run(run.run_id)
    assert record is not None
    assert record.status == "failed"
    assert record.error == error
    assert record.ended_at == NOW
    assert result.last_seq == 4
    assert await store.fire_due_timers(now=NOW + 10, limit=10) == 0


async def test_blocking_marks_the_run_blocked(store: Store) -> None:
    run = await start(store)
    claim = await claim_run(store, run.run_id)

    result = await commit(store, claim, [], now=NOW + 2, blocked_reason="diff: a != b")

    assert result.ok
    history = await store.read_history(run.run_id)
    assert history[1:] == [WorkflowBlocked(seq=2, at=NOW + 2, reason="diff: a != b")]
    assert result.last_seq == 2
    record = await store.get_run(run.run_id)
    assert record is not None
    assert record.status == "blocked"
    assert record.blocked_reason == "diff: a != b"
    assert record.ended_at is None
    assert await claim_runs(store, now=NOW + 100) == []
    assert [r.run_id for r in await store.list_runs(status="blocked")] == [run.run_id]
