"""Values across the workflow/task boundary: the decoded JSON copy, in every mode.

Live execution must see what replay sees: a tuple is a list, and a task never
shares an object with its workflow. A value no store can carry fails once,
where it is made, with ``PayloadError`` naming the path.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import keepgoing
from keepgoing import PayloadError, TaskFailedError, task, workflow

SURROGATE = json.loads('"\\ud800"')
CACHE: dict[str, Any] = {"rows": [1, 2]}
EXECUTIONS: list[str] = []


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    EXECUTIONS.clear()
    CACHE.clear()
    CACHE["rows"] = [1, 2]
    yield


@task(name="pv.charge")
def charge(order: dict[str, Any]) -> str:
    card = order.pop("card_number")  # a task that mutates its argument
    return f"charged {card[-4:]}"


@task(name="pv.pair")
def pair() -> tuple[int, tuple[str, str]]:
    return (1, ("a", "b"))


@task(name="pv.cached")
async def cached() -> dict[str, Any]:
    return CACHE  # the task's own object


@workflow(name="pv.checkout")
async def checkout(order: dict[str, Any]) -> dict[str, Any]:
    receipt = await charge(order)
    got = await pair()
    shared = await cached()
    shared["rows"].append(3)  # the workflow changes what it got
    return {
        "receipt": receipt,
        "card_kept": "card_number" in order,
        "pair_is_list": isinstance(got, list) and isinstance(got[1], list),
        "order": order,
    }


ORDER = {"card_number": "4242424242424242", "total": 30}
EXPECTED = {
    "receipt": "charged 4242",
    "card_kept": True,
    "pair_is_list": True,
    "order": ORDER,
}


def test_a_direct_call_hands_tasks_and_workflow_decoded_copies() -> None:
    assert asyncio.run(checkout(dict(ORDER))) == EXPECTED
    assert CACHE == {"rows": [1, 2]}


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
def test_run_workflow_hands_tasks_and_workflow_decoded_copies(backend: str, tmp_path: Path) -> None:
    url = "memory://" if backend == "memory" else f"sqlite:///{tmp_path / 'kg.db'}"
    with keepgoing.Client(store=url) as client:
        assert client.run_workflow(checkout, {"order": dict(ORDER)}) == EXPECTED
    assert CACHE == {"rows": [1, 2]}


@workflow(name="pv.echo")
async def echo(value: Any) -> dict[str, Any]:
    return {"input_is_list": isinstance(value, list), "back": (value, "done")}


def test_workflow_inputs_and_results_are_decoded_copies_in_a_direct_call() -> None:
    result = asyncio.run(echo((1, 2)))
    assert result == {"input_is_list": True, "back": [[1, 2], "done"]}


# -- values no store can carry -------------------------------------------------------------


@task(name="pv.load", retries=1)
def load() -> dict[str, Any]:
    EXECUTIONS.append("load")
    return {"rows": [0, 1, 2, f"caf{SURROGATE}"]}


@workflow(name="pv.loader")
async def loader() -> Any:
    return await load()


def test_a_task_result_no_store_can_carry_fails_the_attempt_and_counts_against_retries() -> None:
    with pytest.raises(TaskFailedError) as caught:
        asyncio.run(loader())

    assert EXECUTIONS == ["load", "load"]  # retries=1: two attempts, then the failure
    error = caught.value
    assert error.attempts == 2
    assert "keepgoing.errors.PayloadError" in str(error)
    assert "task 'pv.load'" in str(error)
    assert "result['rows'][3]" in str(error)
    assert "lone surrogate" in str(error)


@task(name="pv.store_it")
def store_it(value: Any) -> None:
    EXECUTIONS.append("store_it")


@workflow(name="pv.bad_argument")
async def bad_argument(which: str) -> None:
    await store_it({"surrogate": SURROGATE, "big": 10**5000, "nan": float("nan")}[which])


@pytest.mark.parametrize(
    "which,problem", [("surrogate", "lone surrogate"), ("big", "4300 digits"), ("nan", "nan")]
)
def test_a_task_argument_no_store_can_carry_fails_the_run(which: str, problem: str) -> None:
    with pytest.raises(PayloadError, match=problem) as caught:
        asyncio.run(bad_argument(which))
    assert "argument 'value' of task 'pv.store_it'" in str(caught.value)
    assert EXECUTIONS == []


@workflow(name="pv.bad_result")
async def bad_result() -> Any:
    return {"ok": [1, {2, 3}]}


def test_a_workflow_result_no_store_can_carry_fails_the_run() -> None:
    with pytest.raises(PayloadError, match=r"the result of workflow 'pv.bad_result'\['ok'\]\[1\]"):
        asyncio.run(bad_result())


def _deep(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = {"k": value}
    return value


def test_workflow_inputs_messages_and_events_refuse_surrogates_and_deep_nesting() -> None:
    with keepgoing.Client(store="memory://") as client:
        for bad, problem in ((SURROGATE, "lone surrogate"), (_deep(2000), "too deeply")):
            with pytest.raises(PayloadError, match=problem):
                client.trigger_workflow(echo, {"value": bad})
            with pytest.raises(PayloadError, match=problem):
                client.trigger_workflow("pv.unknown", {"value": bad})
            with pytest.raises(PayloadError, match=problem):
                client.send_workflow_message("wf-1", "go", {"x": bad})
            with pytest.raises(PayloadError, match=problem):
                client.publish_event("paid", "order-1", [bad])
        with pytest.raises(PayloadError, match="lone surrogate"):
            client.send_workflow_message("wf-1", f"go{SURROGATE}", None)
        assert client.list_runs() == []


def test_a_direct_call_refuses_surrogates_and_deep_nesting_in_inputs() -> None:
    with pytest.raises(PayloadError, match="lone surrogate"):
        echo(SURROGATE)  # type: ignore[unused-coroutine]
    with pytest.raises(PayloadError, match="too deeply"):
        echo(_deep(2000))  # type: ignore[unused-coroutine]
