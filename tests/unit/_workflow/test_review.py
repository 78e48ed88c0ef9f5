"""The workflow side of an uncertain outcome, deterministically: a ``TaskFailed`` with
reason ``uncertain`` makes the step's await wait for ``review:<operation id>``;
approve returns the reviewer's result, retry schedules the step again with the
same operation id, fail raises; messages for another round are passed over;
and the history replays."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from keepgoing import TaskFailedError, task, workflow
from keepgoing._history import events as ev
from keepgoing._workflow.review import parse_decision
from keepgoing.errors import UncertainOutcome

from .._sim import Sim, commands_of, replay_fresh

MakeSim = Callable[..., Sim]
OP = "op-run-1-1"
UNSURE = "keepgoing.errors.UncertainOutcome"


@task(name="review.write")
def write(key: str) -> str:
    raise UncertainOutcome(f"lost the answer for {key}")


async def one_write(key: str) -> Any:
    try:
        return await write(key)
    except TaskFailedError as exc:
        return {"failed": exc.reason, "message": exc.message}


async def awaited_twice(key: str) -> Any:
    handle = write.submit(key)
    first = await handle
    second = await handle  # one review, however often the handle is awaited
    both = await asyncio.gather(handle, handle)
    return [first, second, *both]


def _uncertain(sim: Sim, cmd: int = 1) -> None:
    error = ev.ErrorInfo(type=UNSURE, message="lost")
    sim.append(
        ev.TaskFailed(cmd=cmd, name="review.write", error=error, attempts=1, reason="uncertain")
    )


def _review(sim: Sim, payload: Any, sender: str = "dana", name: str = f"review:{OP}") -> None:
    sim.append(
        ev.MessageReceived(
            message_id=f"m{len(sim.history)}",
            name=name,
            payload=payload,
            sender_kind="user",
            sender_id=sender,
            sent_at=sim.now,
        )
    )


def _waits(sim: Sim) -> list[str]:
    return [w.name for w in commands_of(sim.history, ev.MessageWaitStarted)]


def test_an_uncertain_step_waits_and_an_approval_returns_the_reviewers_result(
    make_sim: MakeSim,
) -> None:
    sim = make_sim(one_write, "k")
    sim.activate()
    _uncertain(sim)
    sim.activate()
    assert _waits(sim) == [f"review:{OP}"]
    assert not commands_of(sim.history, ev.WorkflowCompleted)
    _review(sim, {"decision": "approve", "cmd": 1, "result": {"version": 3}})
    sim.activate()
    assert sim.result() == {"version": 3}
    _, replayed = replay_fresh(one_write, sim.history)
    assert replayed.commands == []


def test_a_retry_schedules_the_step_again_with_the_same_operation_id(make_sim: MakeSim) -> None:
    sim = make_sim(one_write, "k")
    sim.activate()
    _uncertain(sim)
    sim.activate()
    _review(sim, {"decision": "retry", "cmd": 1})
    sim.activate()
    scheduled = commands_of(sim.history, ev.TaskScheduled)
    assert [(t.cmd, t.operation_id) for t in scheduled] == [(1, None), (3, OP)]
    _uncertain(sim, cmd=3)  # uncertain again: a second round, decided by its own cmd
    sim.activate()
    _review(sim, {"decision": "approve", "cmd": 1, "result": "stale"})  # for round 1: passed over
    sim.activate()
    assert not commands_of(sim.history, ev.WorkflowCompleted)
    _review(sim, {"decision": "approve", "cmd": 3, "result": "second"})
    sim.activate()
    assert sim.result() == "second"
    _, replayed = replay_fresh(one_write, sim.history)
    assert replayed.commands == []  # the whole history replays, nothing new to do


def test_a_fail_raises_task_failed_with_the_reviewer_named(make_sim: MakeSim) -> None:
    sim = make_sim(one_write, "k")
    sim.activate()
    _uncertain(sim)
    sim.activate()
    _review(sim, "not a decision")
    _review(sim, {"decision": "maybe", "cmd": 1})
    _review(sim, {"decision": "fail", "cmd": 1, "reason": "not in the CRM"}, sender="sam")
    sim.activate()
    result = sim.result()
    assert result["failed"] == "reviewed"
    assert "reviewer user:sam" in result["message"] and "not in the CRM" in result["message"]


def test_a_handle_awaited_many_times_is_reviewed_once(make_sim: MakeSim) -> None:
    sim = make_sim(awaited_twice, "k")
    sim.activate()
    _uncertain(sim)
    sim.activate()
    _review(sim, {"decision": "approve", "cmd": 1, "result": 7})
    sim.activate()
    assert sim.result() == [7, 7, 7, 7]
    assert _waits(sim) == [f"review:{OP}"]


def test_an_ordinary_failure_is_not_reviewed(make_sim: MakeSim) -> None:
    sim = make_sim(one_write, "k")
    sim.activate()
    sim.fail(1, "review.write", error_type=UNSURE, message="raised by hand")  # reason "error"
    sim.activate()
    assert sim.result() == {"failed": "error", "message": "raised by hand"}
    assert _waits(sim) == []


def test_parse_decision_rules() -> None:
    assert parse_decision({"decision": "retry", "cmd": 2}, 2) is not None
    for payload in (
        None,
        [],
        {"decision": "retry"},
        {"decision": "retry", "cmd": True},
        {"decision": "retry", "cmd": "2"},
        {"decision": "RETRY", "cmd": 2},
    ):
        assert parse_decision(payload, 2) is None, payload
    found = parse_decision({"decision": "fail", "cmd": 2, "reason": 5}, 2, "user", "u")
    assert found is not None and found.reason == "" and found.sender_id == "u"


@task(name="review.direct_write")
def direct_write(key: str) -> str:
    raise UncertainOutcome(f"lost the answer for {key}")


@workflow(name="review.direct")
async def direct(key: str) -> Any:
    try:
        return await direct_write(key)
    except TaskFailedError as exc:
        return [exc.reason, exc.error_type, exc.message]


async def test_a_direct_call_raises_the_uncertain_failure_instead_of_waiting() -> None:
    # No message can reach a direct call, so there is nobody to wait for.
    assert await direct("k") == ["uncertain", UNSURE, "lost the answer for k"]


async def bounded_review(key: str) -> Any:
    try:
        return await asyncio.wait_for(write(key), 60)
    except TimeoutError:
        return "gave up"


def test_a_wait_that_times_out_records_that_the_workflow_stopped_waiting(
    make_sim: MakeSim,
) -> None:
    sim = make_sim(bounded_review, "k")
    sim.activate()
    (timer,) = commands_of(sim.history, ev.TimerStarted)
    _uncertain(sim)
    sim.activate()
    assert _waits(sim) == [f"review:{OP}"]
    assert commands_of(sim.history, ev.ReviewAbandoned) == []
    sim.fire(timer.cmd)
    sim.activate()
    (gave_up,) = commands_of(sim.history, ev.ReviewAbandoned)
    assert (gave_up.cmd, gave_up.operation_id) == (1, OP)
    assert sim.result() == "gave up"
    _, replayed = replay_fresh(bounded_review, sim.history)
    assert replayed.commands == []
    # A history recorded before the marker existed replays alike: it is never matched.
    older = [e for e in sim.history if not isinstance(e, ev.ReviewAbandoned)]
    instance, live = replay_fresh(bounded_review, older)
    assert live.commands == []
    instance.close()


def test_a_decided_review_records_no_abandonment(make_sim: MakeSim) -> None:
    sim = make_sim(bounded_review, "k")
    sim.activate()
    _uncertain(sim)
    sim.activate()
    _review(sim, {"decision": "approve", "cmd": 1, "result": "ok"})
    sim.activate()
    assert sim.result() == "ok"
    assert commands_of(sim.history, ev.ReviewAbandoned) == []
