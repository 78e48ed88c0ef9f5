"""Retention on every store: which ended runs may go, and that every row of theirs goes."""

from __future__ import annotations

from keepgoing._history.events import ErrorInfo, WorkflowCompleted
from keepgoing._store.protocol import Store
from keepgoing._store.records import StartRequest
from keepgoing._store.retention_protocol import RetentionWindow

from ._builders import NOW, QUEUE, WF, claim_one, claim_run, failure, schedule, start, success, task

DAY = 86400.0
UNSURE = ErrorInfo(type="keepgoing.errors.UncertainOutcome", message="connection dropped")


async def _ended(store: Store, workflow_id: str, *, at: float = NOW) -> str:
    """A run that ran one task and completed at ``at``."""
    run = await start(store, workflow_id, now=at)
    claim = await claim_run(store, run.run_id, now=at)
    await schedule(store, claim, [task(1)], now=at)
    attempt = await claim_one(store, now=at)
    assert (await store.complete_task(success(attempt, 2, now=at))).accepted
    claim = await claim_run(store, run.run_id, now=at)
    await schedule(store, claim, [WorkflowCompleted(result={"ok": workflow_id})], now=at)
    return run.run_id


async def _child(store: Store, parent_run: str, workflow_id: str) -> str:
    child = await store.start_run(
        StartRequest(
            run_id=f"run-{workflow_id}",
            workflow_id=workflow_id,
            workflow_name=WF,
            input={},
            task_queue=QUEUE,
            code_version="v1",
            now=NOW,
            parent_workflow_id="parent",
            parent_run_id=parent_run,
            parent_cmd=9,
        )
    )
    claim = await claim_run(store, child.run_id)
    await schedule(store, claim, [WorkflowCompleted(result=None)])
    return child.run_id


def _window(after: float, default: float | None = DAY) -> RetentionWindow:
    return RetentionWindow(now=NOW + after, default=default)


async def test_nothing_goes_without_a_policy(store: Store) -> None:
    await _ended(store, "wf-1")

    assert await store.expired_runs(_window(400 * DAY, default=None), 10) == []


async def test_an_ended_run_past_its_policy_goes_with_every_row(store: Store) -> None:
    gone = await _ended(store, "wf-1")
    kept = await _ended(store, "wf-2", at=NOW + DAY)

    early = await store.expired_runs(_window(DAY - 1), 10)
    due = await store.expired_runs(_window(DAY + 1), 10)
    swept = await store.delete_runs([r.run_id for r in due], _window(DAY + 1), actor="test")

    assert early == [] and [r.run_id for r in due] == [gone]
    assert swept.runs == 1 and swept.rows["history"] >= 5 and swept.rows["tasks"] == 1
    assert await store.get_run(gone) is None and await store.read_history(gone) == []
    assert await store.get_run(kept) is not None
    audit = [e for e in await store.list_audit(limit=10) if e.action == "retention.sweep"]
    assert [e.detail["runs"] for e in audit] == [1] and audit[0].run_id is None


async def test_open_runs_children_of_open_parents_and_reviews_survive(store: Store) -> None:
    parent = await start(store, "parent")
    child = await _child(store, parent.run_id, "child")
    await start(store, "open")
    # An uncertain operation: the run ends, its step still waits for a reviewer.
    await start(store, "unsure")
    claim = await claim_run(store, "run-unsure")
    await schedule(store, claim, [task(1, retries=3)])
    attempt = await claim_one(store)
    assert (await store.complete_task(failure(attempt, UNSURE, reason="uncertain"))).final
    claim = await claim_run(store, "run-unsure")
    await schedule(store, claim, [WorkflowCompleted(result=None)])

    due = await store.expired_runs(_window(30 * DAY), 10)
    swept = await store.delete_runs([child, "run-open", "run-unsure"], _window(30 * DAY), actor="t")

    assert due == [] and swept.runs == 0
    for run_id in (child, "run-open", "run-unsure", parent.run_id):
        assert await store.get_run(run_id) is not None


async def test_a_workflows_own_policy_wins_and_prune_overrides_both(store: Store) -> None:
    await _ended(store, "wf-1")
    await store.record_retention({WF: 7 * DAY, "other": None}, NOW)

    assert await store.workflow_retention() == {WF: 7 * DAY, "other": None}
    assert await store.expired_runs(_window(2 * DAY), 10) == []  # 7 days, not the default 1
    assert len(await store.expired_runs(_window(8 * DAY), 10)) == 1
    prune = RetentionWindow(now=NOW + 60, older_than=30.0, workflow=WF)
    assert len(await store.expired_runs(prune, 10)) == 1
    other = RetentionWindow(now=NOW + 60, older_than=30.0, workflow="other")
    assert await store.expired_runs(other, 10) == []


async def test_batches_are_bounded_and_oldest_first(store: Store) -> None:
    for i in range(5):
        await _ended(store, f"wf-{i}", at=NOW + i)

    first = await store.expired_runs(_window(10 * DAY), 2)

    assert [r.workflow_id for r in first] == ["wf-0", "wf-1"]


async def test_the_audit_log_is_trimmed_by_its_own_policy(store: Store) -> None:
    gone = await _ended(store, "wf-1")
    await store.delete_runs([gone], _window(2 * DAY), actor="t")

    assert await store.trim_audit(NOW, 10) == 0
    assert await store.trim_audit(NOW + 3 * DAY, 10) == 1
