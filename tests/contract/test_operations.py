"""Operation status and the review queue on every store: an uncertain attempt is
never retried, its row is the review queue, a reviewed retry keeps the operation id,
and the status rules (``keepgoing._views.operations``) read the same on each."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from keepgoing._history.events import (
    ErrorInfo,
    MessageDelivered,
    MessageReceived,
    MessageSent,
    ReviewAbandoned,
    TaskFailed,
    TaskScheduled,
    WorkflowCancelled,
)
from keepgoing._store.protocol import Store
from keepgoing._store.records import MessageRequest, ReviewRequest
from keepgoing._views import operations
from keepgoing._views.steps import build_steps
from keepgoing.errors import (
    InvalidRequestError,
    OperationNotFoundError,
    OperationNotUncertainError,
)

from ._builders import NOW, claim_one, claim_run, failure, schedule, start, success, task

UNSURE = ErrorInfo(type="keepgoing.errors.UncertainOutcome", message="connection dropped")


async def _uncertain_run(store: Store, workflow_id: str = "wf-1") -> str:
    """A run whose step 1 (retries=3) raised UncertainOutcome; its operation id."""
    await start(store, workflow_id)
    claim = await claim_run(store, f"run-{workflow_id}")
    await schedule(store, claim, [task(1, retries=3)])
    attempt = await claim_one(store)
    result = await store.complete_task(failure(attempt, UNSURE, reason="uncertain"))
    assert result.accepted and result.final  # never retried, whatever `retries` says
    return f"op-run-{workflow_id}-1"


async def test_an_uncertain_attempt_is_final_and_queued_for_review(store: Store) -> None:
    op = await _uncertain_run(store)
    history = await store.read_history("run-wf-1")
    (failed,) = [e for e in history if isinstance(e, TaskFailed)]
    assert (failed.reason, failed.attempts) == ("uncertain", 1)
    assert [(r.run_id, r.cmd, r.status) for r in await store.uncertain_steps()] == [
        ("run-wf-1", 1, "uncertain")
    ]
    found = await operations.read_operation(store, op)
    assert (found.status, found.waiting_for_review, found.attempts) == ("uncertain", True, 1)
    assert found.evidence is not None
    assert found.evidence["error"]["message"] == "connection dropped"
    assert found.evidence["inputs"] == {"args": [1], "kwargs": {"k": "v"}}
    assert [o.operation_id for o in await operations.read_reviews(store)] == [op]
    (step,) = build_steps("run-wf-1", history, await store.run_tasks("run-wf-1"))
    assert step.status == "uncertain"  # the checkpoint inspector says so too


async def test_the_statuses_of_an_operation(store: Store) -> None:
    await start(store, "s")
    claim = await claim_run(store, "run-s")
    await schedule(store, claim, [task(1), task(2, retries=1)])
    assert (await operations.read_operation(store, "op-run-s-1")).status == "pending"
    first = await claim_one(store)
    assert (await operations.read_operation(store, "op-run-s-1")).status == "running"
    await store.complete_task(success(first, {"crm": "W-1"}))
    done = await operations.read_operation(store, "op-run-s-1")
    assert (done.status, done.result, done.task) == ("completed", {"crm": "W-1"}, "t")
    second = await claim_one(store)
    await store.complete_task(failure(second))  # retried: pending again
    assert (await operations.read_operation(store, "op-run-s-2")).status == "pending"
    again = await claim_one(store, now=NOW + 100)
    await store.complete_task(failure(again, now=NOW + 101))
    failed = await operations.read_operation(store, "op-run-s-2")
    assert (failed.status, failed.attempts) == ("failed", 2)
    assert failed.error is not None and failed.error["message"] == "boom"


async def test_unknown_and_malformed_operation_ids(store: Store) -> None:
    await start(store, "u")
    with pytest.raises(OperationNotFoundError, match="no run"):
        await operations.read_operation(store, "op-nope-1")
    with pytest.raises(OperationNotFoundError, match="no step 7"):
        await operations.read_operation(store, "op-run-u-7")
    for bad in ("", "op-", "op-run-u-0", "op-run-u-x", "run-u-1", "op-run u-1"):
        with pytest.raises(operations.InvalidOperationIdError):
            await operations.read_operation(store, bad)
    with pytest.raises(operations.InvalidOperationIdError, match="at most 220"):
        await operations.read_operation(store, "op-" + "r" * 300 + "-1")


async def _review(store: Store, op: str, decision: str, **kw: object) -> None:
    await operations.review_operation(
        store,
        op,
        decision,
        sender_kind="user",
        sender_id="rev-1",
        now=NOW + 5,
        **kw,  # type: ignore[arg-type]
    )


async def test_an_approval_completes_the_operation_with_the_reviewers_result(
    store: Store,
) -> None:
    op = await _uncertain_run(store)
    await _review(store, op, "approve", result={"crm": "W-9"}, reason="seen in the CRM")
    found = await operations.read_operation(store, op)
    assert (found.status, found.result, found.waiting_for_review) == (
        "completed",
        {"crm": "W-9"},
        False,
    )
    assert [(r["decision"], r["sender_id"], r["reason"]) for r in found.reviews] == [
        ("approve", "rev-1", "seen in the CRM")
    ]
    assert await operations.read_reviews(store) == []
    (audit,) = await store.list_audit(action="operation.review")
    assert (audit.actor_kind, audit.actor_id) == ("user", "rev-1")
    assert audit.detail["operation_id"] == op and audit.detail["decision"] == "approve"
    assert len(await store.list_audit(action="message.send")) == 1
    with pytest.raises(OperationNotUncertainError, match="completed"):
        await _review(store, op, "approve", result=1)  # decided once


async def test_a_reviewed_retry_keeps_the_operation_id(store: Store) -> None:
    op = await _uncertain_run(store)
    await _review(store, op, "retry")
    assert (await operations.read_operation(store, op)).status == "pending"
    # The workflow's next activation schedules the retry as a new step.
    claim = await claim_run(store, "run-wf-1", now=NOW + 6)
    await schedule(store, claim, [task(2, operation_id=op)], now=NOW + 6)
    attempt = await claim_one(store, now=NOW + 7)
    assert (attempt.cmd, attempt.operation_id) == (2, op)
    assert (await operations.read_operation(store, op)).status == "running"
    await store.complete_task(success(attempt, "applied", now=NOW + 8))
    found = await operations.read_operation(store, op)
    assert (found.status, found.result, found.rounds, found.cmd) == (
        "completed",
        "applied",
        (1, 2),
        2,
    )
    with pytest.raises(OperationNotFoundError, match="carries operation"):
        await operations.read_operation(store, "op-run-wf-1-2")


async def test_a_raw_message_named_like_a_decision_is_refused_and_approves_nothing(
    store: Store,
) -> None:
    await start(store, "wf-1")
    claim = await claim_run(store, "run-wf-1")
    await schedule(store, claim, [task(1, retries=3)])
    op = "op-run-wf-1-1"
    decision = {"decision": "approve", "cmd": 1, "result": "forged"}
    # Sent before the step is even uncertain, as a plain message: refused.
    with pytest.raises(InvalidRequestError, match="kept for review decisions"):
        await store.send_message(
            MessageRequest("wf-1", f"review:{op}", decision, "user", "mallory", NOW + 1)
        )
    attempt = await claim_one(store)
    await store.complete_task(failure(attempt, UNSURE, reason="uncertain", now=NOW + 2))
    for payload in (decision, {"decision": "maybe", "cmd": 1}, "yes"):
        with pytest.raises(InvalidRequestError, match="kept for review decisions"):
            await store.send_message(
                MessageRequest("wf-1", f"review:{op}", payload, "user", "mallory", NOW + 3)
            )
    history = await store.read_history("run-wf-1")
    assert [e for e in history if isinstance(e, MessageReceived)] == []
    found = await operations.read_operation(store, op)
    assert (found.status, found.waiting_for_review, found.reviews) == ("uncertain", True, ())
    assert await store.list_audit(action="message.send") == []
    await _review(store, op, "fail", reason="not applied")
    found = await operations.read_operation(store, op)
    assert found.status == "failed"
    assert [r["decision"] for r in found.reviews] == ["fail"]


async def test_a_workflow_cannot_send_a_decision_either(store: Store) -> None:
    op = await _uncertain_run(store)
    await start(store, "other")
    claim = await claim_run(store, "run-other")
    forged = MessageSent(cmd=1, workflow_id="wf-1", name=f"review:{op}", payload={"cmd": 1})
    await schedule(store, claim, [forged])
    (delivered,) = [
        e for e in await store.read_history("run-other") if isinstance(e, MessageDelivered)
    ]
    assert delivered.error is not None and "kept for review decisions" in delivered.error.message
    assert (await operations.read_operation(store, op)).status == "uncertain"


async def test_two_reviewers_at_once_one_is_accepted_and_one_refused(store: Store) -> None:
    op = await _uncertain_run(store)

    async def approve(who: str) -> str:
        try:
            await operations.review_operation(
                store,
                op,
                "approve",
                result=who,
                sender_kind="user",
                sender_id=who,
                now=NOW + 5,
            )
        except OperationNotUncertainError as exc:
            return f"refused: {exc}"
        return "accepted"

    answers = await asyncio.gather(approve("ann"), approve("bob"))
    assert sorted(a.split(":")[0] for a in answers) == ["accepted", "refused"]
    winner = "ann" if answers[0] == "accepted" else "bob"
    refusal = next(a for a in answers if a != "accepted")
    assert f"decided already (approve by user:{winner})" in refusal
    found = await operations.read_operation(store, op)
    assert (found.status, found.result) == ("completed", winner)
    (audit,) = await store.list_audit(action="operation.review")
    assert audit.actor_id == winner
    history = await store.read_history("run-wf-1")
    assert len([e for e in history if isinstance(e, MessageReceived)]) == 1


async def test_the_store_accepts_a_round_once_however_many_ask(store: Store) -> None:
    op = await _uncertain_run(store)

    def request(who: str) -> ReviewRequest:
        payload = {"decision": "approve", "cmd": 1, "result": who, "reason": ""}
        return ReviewRequest(op, "wf-1", "run-wf-1", 1, "approve", payload, "", "user", who, NOW)

    outcomes = await asyncio.gather(
        *(store.decide_review(request(f"r{i}")) for i in range(10)), return_exceptions=True
    )
    accepted = [o for o in outcomes if isinstance(o, str)]
    refused = [o for o in outcomes if isinstance(o, OperationNotUncertainError)]
    assert (len(accepted), len(refused)) == (1, 9), outcomes
    assert len(await store.list_audit(action="operation.review")) == 1
    with pytest.raises(OperationNotUncertainError, match="no round at step 2"):
        await store.decide_review(dataclasses.replace(request("x"), cmd=2))


async def test_a_workflow_that_stopped_waiting_refuses_decisions_and_says_so(
    store: Store,
) -> None:
    op = await _uncertain_run(store)
    # The workflow's own timeout around the step fired: it gives the round up.
    claim = await claim_run(store, "run-wf-1", now=NOW + 3)
    await schedule(store, claim, [ReviewAbandoned(cmd=1, operation_id=op)], now=NOW + 3)
    found = await operations.read_operation(store, op)
    assert (found.status, found.waiting_for_review, found.abandoned_at) == (
        "uncertain",
        False,
        NOW + 3,
    )
    assert found.evidence is not None and "stopped waiting" in found.evidence["note"]
    assert await operations.read_reviews(store) == []
    with pytest.raises(OperationNotUncertainError, match="stopped waiting"):
        await _review(store, op, "approve", result="late")
    payload = {"decision": "approve", "cmd": 1, "result": "late", "reason": ""}
    with pytest.raises(OperationNotUncertainError, match="stopped waiting"):
        await store.decide_review(
            ReviewRequest(op, "wf-1", "run-wf-1", 1, "approve", payload, "", "user", "x", NOW)
        )
    assert await store.list_audit(action="operation.review") == []


async def test_a_decision_that_raced_the_workflows_timeout_is_shown_unused(
    store: Store,
) -> None:
    op = await _uncertain_run(store)
    claim = await claim_run(store, "run-wf-1", now=NOW + 3)  # the timeout's activation runs
    await _review(store, op, "approve", result="in time?")  # accepted meanwhile
    await schedule(store, claim, [ReviewAbandoned(cmd=1, operation_id=op)], now=NOW + 6)
    found = await operations.read_operation(store, op)
    # The workflow never took it: the operation is still uncertain, not completed.
    assert (found.status, found.result, found.waiting_for_review) == ("uncertain", None, False)
    assert found.abandoned_at == NOW + 6


async def test_bad_reviews_are_refused_and_nothing_is_sent(store: Store) -> None:
    op = await _uncertain_run(store)
    for decision, kw, match in (
        ("maybe", {}, "decision must be one of"),
        ("retry", {"result": 1}, "only approve takes a result"),
        ("fail", {"reason": "x" * 2001}, "reason must be text"),
    ):
        with pytest.raises(operations.InvalidRequestError, match=match):
            await _review(store, op, decision, **kw)
    assert await store.list_audit(action="message.send") == []


async def test_an_ended_run_leaves_the_operation_uncertain_but_not_reviewable(
    store: Store,
) -> None:
    op = await _uncertain_run(store)
    claim = await claim_run(store, "run-wf-1")
    await schedule(store, claim, [WorkflowCancelled(reason="stop")])
    found = await operations.read_operation(store, op)
    assert (found.status, found.waiting_for_review, found.run_status) == (
        "uncertain",
        False,
        "cancelled",
    )
    assert await store.uncertain_steps() == []
    with pytest.raises(OperationNotUncertainError, match="cancelled"):
        await _review(store, op, "approve")


async def test_a_pending_step_of_an_ended_run_is_cancelled(store: Store) -> None:
    await start(store, "c")
    claim = await claim_run(store, "run-c")
    await schedule(store, claim, [task(1), task(2)])
    first = await claim_one(store)
    await store.complete_task(success(first))  # an input: the run is runnable again
    claim = await claim_run(store, "run-c", now=NOW + 2)
    await schedule(store, claim, [WorkflowCancelled(reason="stop")], now=NOW + 2)
    assert (await operations.read_operation(store, "op-run-c-1")).status == "completed"
    assert (await operations.read_operation(store, "op-run-c-2")).status == "cancelled"


def test_task_scheduled_operation_id_is_left_out_when_unset() -> None:
    from keepgoing._history.codec import decode, encode  # noqa: PLC0415

    plain = TaskScheduled(cmd=1, name="t")
    assert "operation_id" not in encode(plain)
    carried = TaskScheduled(cmd=2, name="t", operation_id="op-r-1")
    assert decode(encode(carried)) == carried
