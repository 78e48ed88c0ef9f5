"""``fire_timer``: a due timer fired together with the activation it causes."""

from __future__ import annotations

from keepgoing._history.events import (
    ActivationCompleted,
    TimerCancelled,
    TimerFired,
    TimerStarted,
    WorkflowCompleted,
)
from keepgoing._store.protocol import Store
from keepgoing._store.records import CancelRequest, FastActivation

from ._builders import NOW, claim_run, claim_runs, claim_tasks, commit, kinds, start_with, task


async def _sleeping_run(store: Store) -> tuple[str, int, int]:
    """A run whose only activation started timer 1; returns (run_id, fence, last_input)."""
    run, result = await start_with(store, [TimerStarted(cmd=1, fire_at=NOW + 5)])
    return run.run_id, result.fence, result.saw_upto


async def test_a_timer_fires_with_its_activation_in_one_commit(store: Store) -> None:
    run_id, fence, last_input = await _sleeping_run(store)
    fast = FastActivation(
        run_fence=fence, last_input_seq=last_input, commands=[task(2)], time=NOW + 5
    )

    result = await store.fire_timer(run_id, 1, worker_id="w1", now=NOW + 5, fast=fast)

    assert result is not None and result.ok
    history = await store.read_history(run_id)
    assert history[3:] == [
        TimerFired(seq=4, at=NOW + 5, cmd=1),
        ActivationCompleted(seq=5, at=NOW + 5, saw_upto=4, time=NOW + 5, worker="w1"),
        task(2, seq=6, at=NOW + 5),
    ]
    assert result.saw_upto == 4 and result.last_seq == 6 and result.fence == fence + 1
    assert [c.cmd for c in result.eager] == [2]
    record = await store.get_run(run_id)
    assert record is not None and not record.runnable and record.last_input_seq == 4
    assert await store.fire_due_timers(now=NOW + 10, limit=10) == 0  # fired exactly once


async def test_a_changed_run_gets_the_timer_but_not_the_activation(store: Store) -> None:
    run_id, fence, last_input = await _sleeping_run(store)
    # The instance's view is stale: the run's fence moved since it committed.
    fast = FastActivation(
        run_fence=fence - 1, last_input_seq=last_input, commands=[task(2)], time=NOW + 5
    )

    result = await store.fire_timer(run_id, 1, worker_id="w1", now=NOW + 5, fast=fast)

    assert result is None
    assert kinds(await store.read_history(run_id))[-1] == "TimerFired"
    record = await store.get_run(run_id)
    assert record is not None and record.runnable
    assert await claim_tasks(store, now=NOW + 6) == []  # no command was applied
    assert [c.run.run_id for c in await claim_runs(store, now=NOW + 6)] == [run_id]


async def test_a_timer_that_is_not_pending_writes_nothing(store: Store) -> None:
    run_id, fence, last_input = await _sleeping_run(store)
    assert await store.fire_due_timers(now=NOW + 5, limit=10) == 1
    before = await store.read_history(run_id)
    fast = FastActivation(run_fence=fence, last_input_seq=last_input, commands=[], time=NOW + 5)

    assert await store.fire_timer(run_id, 1, worker_id="w1", now=NOW + 6, fast=fast) is None
    assert await store.fire_timer(run_id, 99, worker_id="w1", now=NOW + 6, fast=fast) is None
    assert await store.read_history(run_id) == before


async def test_a_cancelled_timer_or_an_ended_run_never_fires(store: Store) -> None:
    run_id, fence, last_input = await _sleeping_run(store)
    fast = FastActivation(
        run_fence=fence,
        last_input_seq=last_input,
        commands=[TimerCancelled(cmd=1), WorkflowCompleted(result="done")],
        time=NOW + 1,
    )
    # End the run through the regular path first: a cancel makes it runnable.
    await store.cancel_run(CancelRequest("wf-1", "stop", "user", "u1", NOW + 1))
    claim = await claim_run(store, run_id, now=NOW + 1)
    assert (await commit(store, claim, [WorkflowCompleted(result="done")], now=NOW + 1)).ok
    before = await store.read_history(run_id)

    assert await store.fire_timer(run_id, 1, worker_id="w1", now=NOW + 5, fast=fast) is None
    assert await store.read_history(run_id) == before
