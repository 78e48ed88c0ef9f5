"""Tasks: claims, completions, retries, worker losses, fast activations and release."""

from __future__ import annotations

from keepgoing._history.events import (
    ActivationCompleted,
    Event,
    TaskAttemptFailed,
    TaskCompleted,
    TaskFailed,
    TimerStarted,
    WorkflowCompleted,
)
from keepgoing._store.protocol import Store
from keepgoing._store.records import FastActivation, TaskClaim

from ._builders import (
    BOOM,
    NOW,
    TTL,
    claim_one,
    claim_run,
    claim_runs,
    claim_tasks,
    commit,
    failure,
    kinds,
    of_type,
    schedule,
    start,
    start_with,
    success,
    task,
)

# -- claims -------------------------------------------------------------------------


async def test_claim_sets_attempt_fence_deadline_and_lease(store: Store) -> None:
    run, _ = await start_with(
        store, [task(1, retries=3, retry_delay=2.0, timeout=60.0, max_worker_losses=5)]
    )

    claim = await claim_one(store, worker="w1", now=NOW + 1, ttl=TTL)

    assert claim == TaskClaim(
        run_id=run.run_id,
        workflow_id=run.workflow_id,
        cmd=1,
        name="t",
        args=[1],
        kwargs={"k": "v"},
        attempt=1,
        fence=1,
        started_at=NOW + 1,
        deadline=NOW + 61,
        lease_expires_at=NOW + 1 + TTL,
        timeout=60.0,
        retries=3,
        retry_delay=2.0,
        max_worker_losses=5,
        image=None,
    )


async def test_claim_filters_by_task_name_and_run_queue(store: Store) -> None:
    await start_with(store, [task(1, name="a"), task(2, name="b")])

    none = await claim_tasks(store, names=("c",))
    wrong_queue = await claim_tasks(store, names=("a", "b"), queues=("elsewhere",))
    only_b = await claim_tasks(store, names=("b",))

    assert none == [] and wrong_queue == []
    assert [c.cmd for c in only_b] == [2]


async def test_claim_respects_the_limit_and_never_claims_twice(store: Store) -> None:
    await start_with(store, [task(1), task(2), task(3)])

    first = await claim_tasks(store, worker="w1", limit=2)
    second = await claim_tasks(store, worker="w2", limit=2)
    third = await claim_tasks(store, worker="w3", limit=2)

    assert len(first) == 2 and len(second) == 1 and third == []
    assert sorted(c.cmd for c in first + second) == [1, 2, 3]


async def test_claim_takes_the_earliest_available_first(store: Store) -> None:
    await start_with(store, [task(1, retries=1, retry_delay=100.0)], "wf-a")
    first = await claim_one(store)
    retry = await store.complete_task(failure(first, now=NOW))
    assert retry.retry_at is not None and retry.retry_at > NOW + 50
    # Scheduled after wf-a's task, but available before its retry.
    await start_with(store, [task(1)], "wf-b")

    later = await claim_tasks(store, now=retry.retry_at, limit=1)
    rest = await claim_tasks(store, now=retry.retry_at)

    assert [c.workflow_id for c in later] == ["wf-b"]
    assert [(c.workflow_id, c.attempt) for c in rest] == [("wf-a", 2)]


async def test_tasks_of_several_runs_are_claimed_in_schedule_order(store: Store) -> None:
    await start_with(store, [task(1)], "wf-a")
    await start_with(store, [task(1)], "wf-b")

    claims = await claim_tasks(store, limit=1)

    assert [c.workflow_id for c in claims] == ["wf-a"]


# -- success ---------------------------------------------------------------------------


async def test_success_appends_task_completed_and_makes_the_run_runnable(store: Store) -> None:
    run, _ = await start_with(store, [task(1)])
    claim = await claim_one(store, worker="w1", now=NOW + 1)

    result = await store.complete_task(success(claim, {"answer": 42}, now=NOW + 2, worker="w1"))

    assert result.accepted and result.final
    assert result.retry_at is None and result.activation is None
    history = await store.read_history(run.run_id)
    assert history[-1] == TaskCompleted(
        seq=4,
        at=NOW + 2,
        cmd=1,
        result={"answer": 42},
        attempt=1,
        worker="w1",
        started_at=NOW + 1,
    )
    record = await store.get_run(run.run_id)
    assert record is not None and record.runnable is True and record.last_input_seq == 4
    assert await claim_tasks(store, now=NOW + 100) == []


async def test_a_second_completion_is_not_accepted(store: Store) -> None:
    run, _ = await start_with(store, [task(1)])
    claim = await claim_one(store)
    await store.complete_task(success(claim))
    before = await store.read_history(run.run_id)

    again = await store.complete_task(success(claim, "other"))
    failed = await store.complete_task(failure(claim))

    assert again.accepted is False and failed.accepted is False
    assert await store.read_history(run.run_id) == before


async def test_a_stale_fence_is_rejected_after_the_task_was_reclaimed(store: Store) -> None:
    run, _ = await start_with(store, [task(1)])
    old = await claim_one(store, worker="w1", now=NOW, ttl=TTL)
    assert await store.reap_expired_leases(now=NOW + TTL + 1, limit=10) == 1
    new = await claim_one(store, worker="w2", now=NOW + TTL + 2)
    before = await store.read_history(run.run_id)

    stale = await store.complete_task(success(old, now=NOW + TTL + 3))

    assert stale.accepted is False
    assert await store.read_history(run.run_id) == before
    assert (new.attempt, new.fence) == (2, 2)
    assert (await store.complete_task(success(new, now=NOW + TTL + 3, worker="w2"))).accepted


async def test_completion_of_an_unknown_task_is_not_accepted(store: Store) -> None:
    run, _ = await start_with(store, [task(1)])
    claim = await claim_one(store)
    ghost = TaskClaim(**{**claim.__dict__, "cmd": 99})

    assert (await store.complete_task(success(ghost))).accepted is False
    assert kinds(await store.read_history(run.run_id))[-1] == "TaskScheduled"


# -- failures and retries ------------------------------------------------------------------


async def test_a_failure_with_retries_left_schedules_a_retry(store: Store) -> None:
    run, _ = await start_with(store, [task(1, retries=2, retry_delay=10.0)])
    claim = await claim_one(store, worker="w1", now=NOW + 1)

    result = await store.complete_task(failure(claim, now=NOW + 2, worker="w1"))

    assert result.accepted and not result.final
    assert result.retry_at is not None and NOW + 2 + 8 <= result.retry_at <= NOW + 2 + 12
    history = await store.read_history(run.run_id)
    assert history[-1] == TaskAttemptFailed(
        seq=4,
        at=NOW + 2,
        cmd=1,
        name="t",
        attempt=1,
        error=BOOM,
        reason="error",
        worker="w1",
        started_at=NOW + 1,
        retry_at=result.retry_at,
    )
    record = await store.get_run(run.run_id)
    assert record is not None and record.runnable is False and record.last_input_seq == 1
    assert await claim_tasks(store, now=result.retry_at - 0.5) == []
    retry = await claim_one(store, worker="w2", now=result.retry_at)
    assert (retry.attempt, retry.fence, retry.started_at) == (2, 2, result.retry_at)


async def test_without_retry_delay_the_retry_is_due_at_once(store: Store) -> None:
    await start_with(store, [task(1, retries=1)])
    claim = await claim_one(store, now=NOW + 1)

    result = await store.complete_task(failure(claim, now=NOW + 2))

    assert result.retry_at == NOW + 2
    assert (await claim_one(store, now=NOW + 2)).attempt == 2


async def test_backoff_grows_with_each_failure(store: Store) -> None:
    await start_with(store, [task(1, retries=3, retry_delay=10.0)])
    now = NOW
    delays = []
    for _ in range(3):
        claim = await claim_one(store, now=now)
        result = await store.complete_task(failure(claim, now=now))
        assert result.retry_at is not None
        delays.append(result.retry_at - now)
        now = result.retry_at

    assert 8 <= delays[0] <= 12 and 16 <= delays[1] <= 24 and 32 <= delays[2] <= 48


async def test_exhausted_retries_fail_the_task_for_good(store: Store) -> None:
    run, _ = await start_with(store, [task(1, retries=1)])
    first = await claim_one(store, now=NOW + 1)
    await store.complete_task(failure(first, now=NOW + 2))
    second = await claim_one(store, now=NOW + 3)

    result = await store.complete_task(failure(second, now=NOW + 4, reason="timeout"))

    assert result.accepted and result.final and result.retry_at is None
    history = await store.read_history(run.run_id)
    assert kinds(history)[-3:] == ["TaskAttemptFailed", "TaskAttemptFailed", "TaskFailed"]
    attempt_failed = of_type(history, TaskAttemptFailed)[-1]
    assert (attempt_failed.attempt, attempt_failed.reason) == (2, "timeout")
    assert attempt_failed.retry_at is None
    assert history[-1] == TaskFailed(
        seq=history[-1].seq, at=NOW + 4, cmd=1, name="t", error=BOOM, attempts=2, reason="timeout"
    )
    record = await store.get_run(run.run_id)
    assert record is not None and record.runnable is True
    assert record.last_input_seq == history[-1].seq
    assert await claim_tasks(store, now=NOW + 1000) == []


async def test_no_retries_fails_on_the_first_error(store: Store) -> None:
    run, _ = await start_with(store, [task(1, retries=0, retry_delay=5.0)])
    claim = await claim_one(store)

    result = await store.complete_task(failure(claim))

    assert result.final
    assert of_type(await store.read_history(run.run_id), TaskFailed)[0].attempts == 1


async def test_lost_workers_do_not_use_up_retries(store: Store) -> None:
    run, _ = await start_with(store, [task(1, retries=1, max_worker_losses=3)])
    now = NOW
    for _ in range(2):  # two attempts lost with their worker
        await claim_one(store, now=now, ttl=TTL)
        now += TTL + 1
        assert await store.reap_expired_leases(now=now, limit=10) == 1
    third = await claim_one(store, now=now)

    # Retries are still whole: one error is retried, the next one is final.
    first_error = await store.complete_task(failure(third, now=now))
    fourth = await claim_one(store, now=now)
    second_error = await store.complete_task(failure(fourth, now=now))

    assert third.attempt == 3
    assert first_error.final is False and second_error.final is True
    history = await store.read_history(run.run_id)
    reasons = [e.reason for e in of_type(history, TaskAttemptFailed)]
    assert reasons == ["worker_lost", "worker_lost", "error", "error"]
    assert of_type(history, TaskFailed)[0].attempts == 4


async def test_too_many_worker_losses_fail_the_task_with_a_message(store: Store) -> None:
    run, _ = await start_with(store, [task(1, retries=5, max_worker_losses=1)])
    now = NOW
    for _ in range(2):
        await claim_one(store, now=now, ttl=TTL)
        now += TTL + 1
        assert await store.reap_expired_leases(now=now, limit=10) == 1

    history = await store.read_history(run.run_id)
    failed = of_type(history, TaskFailed)
    assert len(failed) == 1
    assert failed[0].reason == "worker_lost"
    assert failed[0].attempts == 2
    assert failed[0].error.type == "keepgoing.WorkerLost"
    assert "max_worker_losses=1" in failed[0].error.message
    assert kinds(history)[-1] == "TaskFailed"
    record = await store.get_run(run.run_id)
    assert record is not None and record.runnable is True
    assert await claim_tasks(store, now=now + 1000) == []


# -- fast activations -----------------------------------------------------------------------


async def _eager_task(
    store: Store, more: list[Event] | None = None
) -> tuple[str, TaskClaim, int, int]:
    """A run whose first activation scheduled task 1 (and ``more``) and claimed it eagerly.

    Returns the run id, the task's claim, and the fence and ``saw_upto`` of that commit.
    """
    run, result = await start_with(
        store, [task(1), *(more or [])], eager_claim=True, eager_limit=1, worker="w1"
    )
    return run.run_id, result.eager[0], result.fence, result.saw_upto


async def test_fast_activation_commits_with_the_completion(store: Store) -> None:
    run_id, claim, fence, last_input = await _eager_task(store)
    fast = FastActivation(
        run_fence=fence,
        last_input_seq=last_input,
        commands=[task(2, timeout=20.0)],
        time=NOW + 2,
        eager_claim=True,
        eager_limit=1,
        lease_ttl=7.0,
    )

    result = await store.complete_task(success(claim, "r1", now=NOW + 3), fast)

    assert result.accepted and result.final
    activation = result.activation
    assert activation is not None and activation.ok
    history = await store.read_history(run_id)
    assert history[3:] == [
        TaskCompleted(
            seq=4, at=NOW + 3, cmd=1, result="r1", attempt=1, worker="w1", started_at=NOW
        ),
        ActivationCompleted(seq=5, at=NOW + 3, saw_upto=4, time=NOW + 2, worker="w1"),
        task(2, timeout=20.0, seq=6, at=NOW + 3),
    ]
    assert activation.saw_upto == 4
    assert activation.last_seq == 6
    assert activation.fence == fence + 1
    assert [(c.cmd, c.attempt, c.lease_expires_at) for c in activation.eager] == [
        (2, 1, NOW + 3 + 7.0)
    ]
    record = await store.get_run(run_id)
    assert record is not None
    assert record.runnable is False
    assert record.fence == fence + 1
    assert record.last_input_seq == 4
    assert await claim_runs(store, now=NOW + 4) == []


async def test_fast_activations_chain_on_the_returned_fence(store: Store) -> None:
    run_id, claim, fence, last_input = await _eager_task(store)
    first = await store.complete_task(
        success(claim, now=NOW + 1),
        FastActivation(run_fence=fence, last_input_seq=last_input, commands=[task(2)], time=NOW),
    )
    assert first.activation is not None
    nxt = first.activation.eager[0]

    second = await store.complete_task(
        success(nxt, now=NOW + 2),
        FastActivation(
            run_fence=first.activation.fence,
            last_input_seq=first.activation.saw_upto,
            commands=[WorkflowCompleted(result="end")],
            time=NOW + 1,
        ),
    )

    assert second.activation is not None and second.activation.ok
    record = await store.get_run(run_id)
    assert record is not None and record.status == "completed" and record.result == "end"


async def test_fast_activation_is_skipped_when_an_input_arrived(store: Store) -> None:
    timer = TimerStarted(cmd=2, fire_at=NOW + 1)
    run_id, claim, fence, last_input = await _eager_task(store, [timer])
    assert await store.fire_due_timers(now=NOW + 1, limit=10) == 1  # a new input
    before = kinds(await store.read_history(run_id))

    result = await store.complete_task(
        success(claim, now=NOW + 3),
        FastActivation(run_fence=fence, last_input_seq=last_input, commands=[task(9)], time=NOW),
    )

    assert result.accepted and result.final and result.activation is None
    assert kinds(await store.read_history(run_id)) == [*before, "TaskCompleted"]
    record = await store.get_run(run_id)
    assert record is not None and record.runnable is True and record.fence == fence
    assert await claim_tasks(store, now=NOW + 5) == []


async def test_fast_activation_is_skipped_when_the_fence_moved(store: Store) -> None:
    timer = TimerStarted(cmd=2, fire_at=NOW + 1)
    run_id, claim, fence, _ = await _eager_task(store, [timer])
    await store.fire_due_timers(now=NOW + 1, limit=10)
    # Another worker activates the run for the timer, and so takes a new fence.
    other = await claim_run(store, run_id, worker="w2", now=NOW + 2)
    assert (await commit(store, other, [], worker="w2", now=NOW + 2)).ok
    before = kinds(await store.read_history(run_id))

    result = await store.complete_task(
        success(claim, now=NOW + 3),
        FastActivation(
            run_fence=fence,
            last_input_seq=other.run.last_input_seq,
            commands=[task(9)],
            time=NOW,
        ),
    )

    assert result.accepted and result.activation is None
    assert kinds(await store.read_history(run_id)) == [*before, "TaskCompleted"]
    record = await store.get_run(run_id)
    assert record is not None and record.runnable is True and record.fence == other.fence
    assert await claim_tasks(store, now=NOW + 5) == []


async def test_fast_activation_is_ignored_for_failures(store: Store) -> None:
    run_id, claim, fence, last_input = await _eager_task(store)

    result = await store.complete_task(
        failure(claim, now=NOW + 1),
        FastActivation(run_fence=fence, last_input_seq=last_input, commands=[task(2)], time=NOW),
    )

    assert result.accepted and result.final and result.activation is None
    assert kinds(await store.read_history(run_id))[-2:] == ["TaskAttemptFailed", "TaskFailed"]
    record = await store.get_run(run_id)
    assert record is not None and record.runnable is True and record.fence == fence


# -- release ------------------------------------------------------------------------------


async def test_release_tasks_hands_attempts_back_at_once(store: Store) -> None:
    run, _ = await start_with(store, [task(1, max_worker_losses=0), task(2, retry_delay=60.0)])
    held = await claim_tasks(store, worker="w1", now=NOW + 1)
    assert len(held) == 2

    released = await store.release_tasks("w1", now=NOW + 2)

    assert released == 2
    history = await store.read_history(run.run_id)
    failed = of_type(history, TaskAttemptFailed)
    assert sorted(e.cmd for e in failed) == [1, 2]
    for event in failed:
        assert event.reason == "released"
        assert event.error.type == "keepgoing.Released"
        assert event.worker == "w1"
        assert event.at == NOW + 2
    assert of_type(history, TaskFailed) == []
    record = await store.get_run(run.run_id)
    assert record is not None and record.runnable is False
    again = await claim_tasks(store, worker="w2", now=NOW + 2)
    assert sorted((c.cmd, c.attempt) for c in again) == [(1, 2), (2, 2)]
    assert await store.release_tasks("w1", now=NOW + 3) == 0


async def test_release_tasks_does_not_count_against_retries(store: Store) -> None:
    run, _ = await start_with(store, [task(1, retries=0, max_worker_losses=0)])
    for i in range(3):
        await claim_one(store, worker="w1", now=NOW + i)
        assert await store.release_tasks("w1", now=NOW + i) == 1

    last = await claim_one(store, worker="w2", now=NOW + 5)

    assert last.attempt == 4
    assert (await store.complete_task(success(last, now=NOW + 6, worker="w2"))).accepted
    assert of_type(await store.read_history(run.run_id), TaskFailed) == []


async def test_release_tasks_drops_the_workers_activation_leases(store: Store) -> None:
    run = await start(store)
    await claim_run(store, run.run_id, worker="w1")
    other = await start(store, "wf-2")
    await claim_run(store, other.run_id, worker="w2")

    assert await store.release_tasks("w1", now=NOW + 1) == 0

    claims = await claim_runs(store, worker="w3", now=NOW + 1)
    assert [c.run.run_id for c in claims] == [run.run_id]


async def test_release_tasks_leaves_other_workers_alone(store: Store) -> None:
    run, _ = await start_with(store, [task(1), task(2)])
    await claim_one(store, worker="w1")
    theirs = await claim_one(store, worker="w2")

    assert await store.release_tasks("w1", now=NOW + 1) == 1

    assert (await store.complete_task(success(theirs, worker="w2"))).accepted
    assert len(of_type(await store.read_history(run.run_id), TaskAttemptFailed)) == 1


async def test_timer_commands_do_not_create_tasks(store: Store) -> None:
    await start_with(store, [TimerStarted(cmd=1, fire_at=NOW)])

    assert await claim_tasks(store, now=NOW + 10) == []


async def test_a_task_of_a_blocked_run_still_records_its_result(store: Store) -> None:
    run, _ = await start_with(store, [task(1), TimerStarted(cmd=2, fire_at=NOW + 1)])
    claim = await claim_one(store, now=NOW)
    await store.fire_due_timers(now=NOW + 1, limit=10)
    activation = await claim_run(store, run.run_id, now=NOW + 2)
    await schedule(store, activation, [], now=NOW + 2, blocked_reason="diff")

    result = await store.complete_task(success(claim, "kept", now=NOW + 3))

    assert result.accepted and result.final
    history = await store.read_history(run.run_id)
    assert history[-1] == TaskCompleted(
        seq=history[-1].seq,
        at=NOW + 3,
        cmd=1,
        result="kept",
        attempt=1,
        worker="w1",
        started_at=NOW,
    )
    record = await store.get_run(run.run_id)
    assert record is not None and record.status == "blocked"
    assert record.last_input_seq == history[-1].seq
    assert await claim_runs(store, now=NOW + 4) == []
