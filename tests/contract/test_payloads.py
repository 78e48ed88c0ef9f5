"""Values: every store accepts and refuses the same ones, and hands back decoded JSON.

A value no store can carry (a lone surrogate, an int past Python's digit
limit, NaN, a set, nesting too deep) is refused with ``PayloadError`` naming
the field, and nothing is written. A tuple comes back as a list everywhere.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from keepgoing._history.events import (
    MessageReceived,
    TaskCompleted,
    TaskScheduled,
    WorkflowCompleted,
    WorkflowStarted,
)
from keepgoing._store.protocol import Store
from keepgoing._store.records import EventRequest, MessageRequest
from keepgoing.errors import PayloadError

from ._builders import (
    NOW,
    claim_one,
    claim_run,
    commit,
    kinds,
    of_type,
    schedule,
    start,
    start_with,
    success,
    task,
)


def _nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


SURROGATE = json.loads('"\\ud800"')
BAD: dict[str, tuple[Any, str]] = {
    "surrogate": ({"rows": [1, 2, 3, f"a{SURROGATE}"]}, "lone surrogate"),
    "big-int": ({"n": 10**5000}, "4300 digits"),
    "nan": ({"x": float("nan")}, "nan"),
    "infinity": ({"x": float("inf")}, "inf"),
    "set": ({"x": {1, 2}}, "builtins.set"),
    "deep": (_nested(2000), "too deeply"),
    "surrogate-key": ({SURROGATE: 1}, "lone surrogate"),
}
bad_values = pytest.mark.parametrize("value,problem", BAD.values(), ids=list(BAD))


@bad_values
async def test_an_input_no_store_can_carry_is_refused_and_nothing_is_written(
    store: Store, value: Any, problem: str
) -> None:
    with pytest.raises(PayloadError, match=problem) as caught:
        await start(store, "bad-1", run_id="r-bad", input={"args": [value], "kwargs": {}})

    assert "input" in str(caught.value)
    assert await store.get_run("r-bad") is None
    assert await store.find_run("bad-1") is None
    assert await store.read_history("r-bad") == []


@bad_values
async def test_a_task_argument_no_store_can_carry_is_refused_with_nothing_written(
    store: Store, value: Any, problem: str
) -> None:
    run = await start(store)
    claim = await claim_run(store, run.run_id)
    bad = TaskScheduled(cmd=2, name="t", args=[value], kwargs={})

    with pytest.raises(PayloadError, match=problem):
        await commit(store, claim, [task(1), bad])

    assert kinds(await store.read_history(run.run_id)) == ["WorkflowStarted"]
    assert await claim_one_or_none(store) is None


async def claim_one_or_none(store: Store) -> Any:
    from ._builders import claim_tasks  # noqa: PLC0415

    claims = await claim_tasks(store, limit=1)
    return claims[0] if claims else None


@bad_values
async def test_a_workflow_result_no_store_can_carry_is_refused(
    store: Store, value: Any, problem: str
) -> None:
    run = await start(store)
    claim = await claim_run(store, run.run_id)

    with pytest.raises(PayloadError, match=problem):
        await commit(store, claim, [WorkflowCompleted(result=value)])

    after = await store.get_run(run.run_id)
    assert after is not None and after.status == "running" and after.result is None
    assert kinds(await store.read_history(run.run_id)) == ["WorkflowStarted"]


@bad_values
async def test_a_task_result_no_store_can_carry_is_refused_and_the_attempt_stays_open(
    store: Store, value: Any, problem: str
) -> None:
    run, _ = await start_with(store, [task(1)])
    claim = await claim_one(store)

    with pytest.raises(PayloadError, match=problem):
        await store.complete_task(success(claim, value))

    history = await store.read_history(run.run_id)
    assert of_type(history, TaskCompleted) == []
    # The attempt is still open: a valid outcome at the same fence is accepted.
    assert (await store.complete_task(success(claim, "fine"))).accepted


@bad_values
async def test_a_message_or_event_payload_no_store_can_carry_is_refused(
    store: Store, value: Any, problem: str
) -> None:
    run = await start(store)
    message = MessageRequest(run.workflow_id, "go", value, "user", "ann", NOW)
    event = EventRequest("paid", "order-1", value, "e-1", "user", "ann", NOW)

    with pytest.raises(PayloadError, match=problem):
        await store.send_message(message)
    with pytest.raises(PayloadError, match=problem):
        await store.publish_event(event)

    assert of_type(await store.read_history(run.run_id), MessageReceived) == []
    # Nothing was stored under the event id: publishing it again is not a duplicate.
    again = EventRequest("paid", "order-1", {"ok": True}, "e-1", "user", "ann", NOW)
    assert (await store.publish_event(again)).duplicate is False


async def test_nesting_within_the_limit_is_accepted_by_every_store(store: Store) -> None:
    run = await start(store, input={"args": [_nested(99)], "kwargs": {}})

    started = (await store.read_history(run.run_id))[0]
    assert isinstance(started, WorkflowStarted)
    assert started.input["args"][0] == _nested(99)


async def test_tuples_come_back_as_lists_from_every_store(store: Store) -> None:
    run = await start(store, input={"args": [(1, (2, 3))], "kwargs": {"t": ("a",)}})
    assert run.input == {"args": [[1, [2, 3]]], "kwargs": {"t": ["a"]}}
    claim = await claim_run(store, run.run_id)
    scheduled = TaskScheduled(cmd=1, name="t", args=[(1, 2)], kwargs={"k": ("v",)})
    result = await schedule(store, claim, [scheduled], eager_claim=True, eager_limit=1)

    eager = result.eager[0]
    assert (eager.args, eager.kwargs) == ([[1, 2]], {"k": ["v"]})
    assert await store.complete_task(success(eager, {"rows": (1, 2)}))
    history = await store.read_history(run.run_id)
    started = of_type(history, WorkflowStarted)[0]
    assert started.input == {"args": [[1, [2, 3]]], "kwargs": {"t": ["a"]}}
    assert of_type(history, TaskScheduled)[0].args == [[1, 2]]
    assert of_type(history, TaskCompleted)[0].result == {"rows": [1, 2]}


async def test_an_eager_claim_never_shares_the_objects_of_the_command(store: Store) -> None:
    run = await start(store)
    claim = await claim_run(store, run.run_id)
    order = {"card_number": "4242", "total": 3}
    scheduled = TaskScheduled(cmd=1, name="t", args=[order], kwargs={})
    result = await schedule(store, claim, [scheduled], eager_claim=True, eager_limit=1)

    result.eager[0].args[0].pop("card_number")

    assert order == {"card_number": "4242", "total": 3}
    assert of_type(await store.read_history(run.run_id), TaskScheduled)[0].args == [order]


async def test_text_with_a_lone_surrogate_outside_any_value_is_a_payload_error(
    store: Store,
) -> None:
    # Names are checked by the API; a store given one directly still answers with
    # PayloadError, never a bare UnicodeEncodeError.
    with pytest.raises(PayloadError):
        await start(store, f"wf-{SURROGATE}", run_id="r-s")
    assert await store.get_run("r-s") is None
