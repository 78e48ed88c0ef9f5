"""The prefix copy of a fork or a resume on every store: the new run's
``WorkflowStarted`` says how far the reused prefix reaches and why, and its
trouble counters start at what that prefix holds, not at zero."""

from __future__ import annotations

from typing import Any

from keepgoing._history import events as ev
from keepgoing._store.protocol import Store
from keepgoing._store.records import RunRecord
from keepgoing._store.trouble import Trouble

from ._builders import (
    NOW,
    claim_one,
    claim_run,
    claim_tasks,
    commit,
    failure,
    schedule,
    start_with,
    success,
    task,
)

LIMITED = ev.ErrorInfo(type="agent.RateLimitedError", message="429 Too Many Requests")
BROKEN = ev.ErrorInfo(type="ValueError", message="bad row 7")


async def _finished(store: Store) -> RunRecord:
    """A completed run whose step 1 was retried twice (once for a rate limit)."""
    run, _ = await start_with(store, [task(1, retries=3)], "src-1")
    for n, error in enumerate((LIMITED, BROKEN)):
        claim = await claim_one(store, now=NOW + 10 * n)
        assert (await store.complete_task(failure(claim, error, now=NOW + 10 * n + 1))).accepted
    await store.complete_task(success(await claim_one(store, now=NOW + 30), now=NOW + 31))
    await schedule(store, await claim_run(store, run.run_id, now=NOW + 32), [task(2)])
    await store.complete_task(success(await claim_one(store, now=NOW + 34), now=NOW + 35))
    done = ev.WorkflowCompleted(result="done")
    await schedule(store, await claim_run(store, run.run_id, now=NOW + 36), [done])
    found = await store.get_run(run.run_id)
    assert found is not None and found.status == "completed"
    assert found.trouble == Trouble(retries=2, rate_limited=1)
    return found


async def _fork(
    store: Store, step: int, new_id: str, input: dict[str, Any] | None = None
) -> RunRecord:
    new, _ = await store.fork_run(
        "src-1",
        from_step=step,
        input=input,
        new_workflow_id=new_id,
        run_id=f"run-{new_id}",
        revision=None,
        now=NOW + 40,
    )
    found = await store.get_run(new.run_id)
    assert found is not None
    return found


async def test_a_fork_starts_with_the_trouble_of_the_prefix_it_copies(store: Store) -> None:
    source = await _finished(store)
    after = await _fork(store, 2, "f2")
    assert after.trouble == Trouble(retries=2, rate_limited=1)  # step 1's attempts
    fresh = await _fork(store, 1, "f1")
    assert fresh.trouble == Trouble()  # nothing of step 1 was copied
    unchanged = await store.get_run(source.run_id)
    assert unchanged is not None and unchanged.trouble == source.trouble


async def test_the_copied_run_is_marked_with_how_far_its_reused_prefix_reaches(
    store: Store,
) -> None:
    source = await _finished(store)
    events = await store.read_history(source.run_id)
    step_two = next(e for e in events if isinstance(e, ev.TaskScheduled) and e.cmd == 2)
    marker = max(
        e.seq for e in events if isinstance(e, ev.ActivationCompleted) and e.seq < step_two.seq
    )
    same = await _fork(store, 2, "f-same")
    new = await _fork(store, 2, "f-new", {"args": [], "kwargs": {"x": 2}})
    for run, by in ((same, "fork"), (new, "fork_input")):
        copied = await store.read_history(run.run_id)
        first = copied[0]
        assert isinstance(first, ev.WorkflowStarted)
        assert (first.reused_upto, first.reused_by) == (marker - 1, by)
        assert [e.seq for e in copied] == list(range(1, marker))
    original = (await store.read_history(source.run_id))[0]
    assert isinstance(original, ev.WorkflowStarted) and original.reused_upto is None


async def test_a_step_open_at_the_cut_is_held_until_the_first_activation_passes(
    store: Store,
) -> None:
    run, _ = await start_with(store, [task(1), task(2)], "src-1")
    first, second = sorted(await claim_tasks(store, limit=2), key=lambda c: c.cmd)
    await store.complete_task(success(second, now=NOW + 2))
    await schedule(store, await claim_run(store, run.run_id, now=NOW + 3), [task(3)])
    await store.complete_task(success(first, now=NOW + 4))  # step 1 ends after the cut
    await store.complete_task(success(await claim_one(store, now=NOW + 5), now=NOW + 6))
    done = ev.WorkflowCompleted(result="done")
    await schedule(store, await claim_run(store, run.run_id, now=NOW + 7), [done])

    fork = await _fork(store, 3, "f3")  # reuses step 2; steps 1 and 3 run again
    assert await claim_tasks(store, now=NOW + 1000) == []  # step 1 waits for the check
    claim = await claim_run(store, fork.run_id, now=NOW + 50)
    result = await commit(store, claim, [task(3)], now=NOW + 51, release_held=True)
    assert result.ok
    claims = await claim_tasks(store, now=NOW + 52)
    assert sorted(c.cmd for c in claims) == [1, 3] and {c.run_id for c in claims} == {fork.run_id}
