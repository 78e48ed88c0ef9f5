"""Child workflows, lineage and continue-as-new, in-process and on a SQLite store."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

import keepgoing
from keepgoing import (
    WorkflowAlreadyRunningError,
    WorkflowFailedError,
    continue_as_new,
    current_workflow_id,
    parent_workflow_id,
    send_message,
    start_child,
    task,
    wait_for_message,
    workflow,
)
from keepgoing._history import events as ev
from keepgoing.testing import fake_clock

from .._messaging_support import Runs, of_type

pytestmark = pytest.mark.timeout(30)

# -- the docs' example ("Child workflows") ---------------------------------------------------


@task(name="tchild.answer_question")
def answer_question(question: str) -> str:
    return f"answer to {question}"


@workflow(name="tchild.assistant")
async def assistant() -> int:
    answered = 0
    while True:
        ask = await wait_for_message("ask", timeout=timedelta(hours=1))
        if ask.payload.get("stop"):
            return answered
        answer = await answer_question(ask.payload["question"])
        await send_message(ask.sender_id, "answer", {"answer": answer})
        answered += 1


@workflow(name="tchild.supervisor")
async def supervisor(questions: list[str]) -> list[str]:
    helper = await start_child(assistant)
    answers = []
    for question in questions:
        await helper.send_message("ask", {"question": question})
        reply = await wait_for_message("answer", timeout=timedelta(minutes=30))
        answers.append(reply.payload["answer"])
    await helper.send_message("ask", {"stop": True})
    await helper
    return answers


QUESTIONS = ["q1", "q2", "q3", "q4", "q5"]


def test_supervisor_and_assistant_return_the_answers_in_order(client: keepgoing.Client) -> None:
    answers = client.run_workflow(supervisor, {"questions": QUESTIONS}, workflow_id="sup-1")
    assert answers == [f"answer to {q}" for q in QUESTIONS]

    child_id = "sup-1/tchild.assistant-1"  # <parent id>/<child name>-<command number>
    assert client.result(child_id) == len(QUESTIONS)
    parent_history = client.history("sup-1")
    child_history = client.history(child_id)

    # The parent sent every ask and got every answer, each once, from the child.
    replies = of_type(parent_history, ev.MessageReceived, name="answer")
    assert [r.payload["answer"] for r in replies] == answers
    assert {(r.sender_kind, r.sender_id) for r in replies} == {("workflow", child_id)}
    asks = of_type(child_history, ev.MessageReceived, name="ask")
    assert [a.payload for a in asks] == [{"question": q} for q in QUESTIONS] + [{"stop": True}]
    assert {(a.sender_kind, a.sender_id) for a in asks} == {("workflow", "sup-1")}

    # Each has its own history; the child's tasks are in the child's.
    assert of_type(parent_history, ev.TaskScheduled) == []
    assert len(of_type(child_history, ev.TaskCompleted)) == len(QUESTIONS)
    (started,) = of_type(child_history, ev.WorkflowStarted)
    assert (started.parent_workflow_id, started.workflow_id) == ("sup-1", child_id)
    (ended,) = of_type(parent_history, ev.ChildEnded)
    assert (ended.workflow_id, ended.status, ended.result) == (child_id, "completed", 5)


def test_lineage_shows_the_parent_and_its_children(client: keepgoing.Client) -> None:
    client.run_workflow(supervisor, {"questions": ["q"]}, workflow_id="sup-lineage")
    child_id = "sup-lineage/tchild.assistant-1"
    family = client.lineage("sup-lineage")
    assert family["run"].workflow_id == "sup-lineage"
    assert family["parent"] is None
    assert [(c.workflow_id, c.status) for c in family["children"]] == [(child_id, "completed")]
    below = client.lineage(child_id)
    assert below["run"].workflow_id == child_id
    assert below["parent"].workflow_id == "sup-lineage"
    assert below["children"] == []
    with pytest.raises(keepgoing.RunNotFoundError):
        client.lineage("no-such-family")


# -- ids, inputs, results and failures ------------------------------------------------------


@workflow(name="tchild.whoami")
async def whoami(tag: str = "") -> dict[str, Any]:
    return {"me": current_workflow_id(), "parent": parent_workflow_id(), "tag": tag}


@workflow(name="tchild.family")
async def family(chosen_id: str) -> list[Any]:
    first = await start_child(whoami, {"tag": "a"})
    second = await start_child("tchild.whoami", {"tag": "b"}, workflow_id=chosen_id)
    return [await first, await second, first.workflow_id, second.workflow_id]


def test_a_child_knows_its_own_id_and_its_parents(client: keepgoing.Client) -> None:
    first, second, first_id, second_id = client.run_workflow(
        family, {"chosen_id": "chosen-child"}, workflow_id="fam-1"
    )
    assert first == {"me": first_id, "parent": "fam-1", "tag": "a"}
    assert first_id.startswith("fam-1/tchild.whoami-")
    assert second == {"me": "chosen-child", "parent": "fam-1", "tag": "b"}
    assert second_id == "chosen-child"
    assert client.run_workflow(whoami)["parent"] is None


@workflow(name="tchild.failing_child")
async def failing_child() -> None:
    raise ValueError("the child broke")


@workflow(name="tchild.catches_child_failure")
async def catches_child_failure() -> str:
    handle = await start_child(failing_child)
    try:
        await handle
    except WorkflowFailedError as exc:
        return f"caught {exc.error_type}: {exc.message}"
    return "no error"


def test_a_failed_child_raises_workflow_failed_error_in_the_parent(
    client: keepgoing.Client,
) -> None:
    assert client.run_workflow(catches_child_failure) == "caught ValueError: the child broke"


# -- duplicate child ids ----------------------------------------------------------------------


@workflow(name="tchild.parks")
async def parks() -> None:
    await wait_for_message("never")


@workflow(name="tchild.start_with_id")
async def start_with_id(child_id: str, twice: bool = False) -> list[str]:
    outcomes = []
    for _ in range(2 if twice else 1):
        try:
            handle = await start_child(parks, workflow_id=child_id)
        except WorkflowAlreadyRunningError as exc:
            outcomes.append(f"already running: {exc}")
        else:
            outcomes.append(f"started {handle.run_id}")
    return outcomes


def test_a_child_with_the_id_of_a_running_workflow_fails_inside_the_parent(
    runs: Runs, client: keepgoing.Client
) -> None:
    other = runs.start(parks, workflow_id="taken-id")  # running, never driven
    (outcome,) = client.run_workflow(start_with_id, {"child_id": "taken-id"}, workflow_id="dup-1")
    assert outcome.startswith("already running:") and "taken-id" in outcome
    assert client.get_run("taken-id").run_id == other.handle.run_id  # untouched
    (started,) = of_type(client.history("dup-1"), ev.ChildRunStarted)
    assert started.run_id is None and started.error is not None
    assert client.lineage("dup-1")["children"] == []


def test_a_parent_cannot_start_two_running_children_with_one_id(
    client: keepgoing.Client,
) -> None:
    first, second = client.run_workflow(
        start_with_id, {"child_id": "twin", "twice": True}, workflow_id="dup-2"
    )
    assert first.startswith("started ")
    assert second.startswith("already running:")
    assert [c.workflow_id for c in client.lineage("dup-2")["children"]] == ["twin"]


# -- a parent that returns before its child ----------------------------------------------------

cleanups: list[str] = []
child_pids: list[int] = []


@task(name="tchild.cleanup")
def cleanup(who: str) -> None:
    cleanups.append(who)


@task(name="tchild.record_pid")
def record_pid() -> None:
    child_pids.append(os.getpid())


@workflow(name="tchild.lingering")
async def lingering() -> str:
    await record_pid()
    try:
        await wait_for_message("never")
    finally:
        await cleanup("lingering child")
    return "unreachable"


@workflow(name="tchild.returns_first")
async def returns_first(pause: float) -> str:
    handle = await start_child(lingering)
    await asyncio.sleep(pause)  # a durable timer: the child reaches its wait meanwhile
    return handle.workflow_id


@workflow(name="tchild.signalling_child")
async def signalling_child() -> str:
    """Like ``lingering``, but tells its parent once it is inside its try block."""
    await record_pid()
    try:
        parent = parent_workflow_id()
        assert parent is not None
        await send_message(parent, "ready")
        await wait_for_message("never")
    finally:
        await cleanup("lingering child")
    return "unreachable"


@workflow(name="tchild.returns_when_child_ready")
async def returns_when_child_ready(fail: bool) -> str:
    handle = await start_child(signalling_child)
    await wait_for_message("ready")
    if fail:
        raise RuntimeError("the parent broke")
    return handle.workflow_id


@workflow(name="tchild.awaits_child")
async def awaits_child() -> dict[str, Any]:
    return await (await start_child(whoami, {"tag": "in-process"}))


@pytest.fixture
def side_effects() -> Iterator[None]:
    cleanups.clear()
    child_pids.clear()
    yield
    cleanups.clear()
    child_pids.clear()


def test_in_process_a_child_runs_here_and_returns_its_result() -> None:
    got = asyncio.run(awaits_child())
    assert got["tag"] == "in-process"
    assert got["parent"] is not None and got["me"].startswith(got["parent"] + "/")


def test_in_process_a_child_is_cancelled_and_cleans_up_when_the_parent_returns_first(
    side_effects: None,
) -> None:
    with fake_clock():
        child_id = asyncio.run(returns_first(3600))
    assert child_id.endswith("/tchild.lingering-1")
    assert child_pids == [os.getpid()]  # the child ran in this process
    assert cleanups == ["lingering child"]  # and its finally block ran


def test_through_the_store_a_child_is_cancelled_when_the_parent_returns_first(
    client: keepgoing.Client, side_effects: None
) -> None:
    child_id = client.run_workflow(
        returns_when_child_ready, {"fail": False}, workflow_id="returns-first"
    )
    assert child_pids == [os.getpid()]  # the child ran here
    assert client.get_run(child_id).status == "cancelled"  # settled before run_workflow returned
    assert cleanups == ["lingering child"]


def test_through_the_store_a_child_is_cancelled_when_the_parent_fails(
    client: keepgoing.Client, side_effects: None
) -> None:
    with pytest.raises(WorkflowFailedError, match="the parent broke"):
        client.run_workflow(returns_when_child_ready, {"fail": True}, workflow_id="fails-first")
    (child,) = client.lineage("fails-first")["children"]
    assert child.status == "cancelled"
    assert cleanups == ["lingering child"]
    (requested,) = of_type(client.history(child.workflow_id), ev.CancelRequested)
    assert requested.actor_kind == "workflow"


# -- continue-as-new ---------------------------------------------------------------------------


@task(name="tchild.step")
def step(n: int) -> int:
    return n * 10


@workflow(name="tchild.countdown")
async def countdown(n: int, seen: list[int]) -> dict[str, Any]:
    done = await step(n)
    if n > 0:
        continue_as_new(n=n - 1, seen=[*seen, done])
    return {"seen": [*seen, done], "me": current_workflow_id()}


def test_continue_as_new_keeps_the_id_and_starts_fresh_linked_runs(
    client: keepgoing.Client,
) -> None:
    final = {"seen": [30, 20, 10, 0], "me": "cd-1"}
    assert client.run_workflow(countdown, {"n": 3, "seen": []}, workflow_id="cd-1") == final
    assert client.result("cd-1") == final

    newest = client.get_run("cd-1")
    assert newest.status == "completed"
    chain = []
    run_id: str | None = newest.run_id
    while run_id is not None:
        history = client.history("cd-1", run_id=run_id)
        first = history[0]
        assert isinstance(first, ev.WorkflowStarted)
        assert (first.workflow_id, first.run_id) == ("cd-1", run_id)
        assert len(of_type(history, ev.TaskScheduled)) == 1  # a fresh history per run
        chain.append((run_id, first.input["kwargs"]["n"]))
        run_id = first.continued_from
    assert [n for _, n in chain] == [0, 1, 2, 3]
    assert len({r for r, _ in chain}) == 4
    for old_run, _ in chain[1:]:
        assert client.get_run("cd-1", run_id=old_run).status == "continued"
        assert of_type(client.history("cd-1", run_id=old_run), ev.WorkflowContinuedAsNew)


def test_client_result_follows_continue_as_new_while_it_runs(
    runs: Runs, client: keepgoing.Client
) -> None:
    run = runs.start(countdown, {"n": 2, "seen": []}, workflow_id="cd-2")
    first_run = run.handle.run_id
    run.drive()
    assert client.result("cd-2", timeout=15) == {"seen": [20, 10, 0], "me": "cd-2"}
    assert client.result("cd-2", run_id=first_run, timeout=5) == {"seen": [20, 10, 0], "me": "cd-2"}
    run.join()
    assert client.get_run("cd-2").run_id != first_run


def test_continue_as_new_in_process() -> None:
    result = asyncio.run(countdown(2, []))
    assert result["seen"] == [20, 10, 0]
    assert result["me"].startswith("tchild.countdown-")


def test_continue_as_new_outside_a_workflow_raises_runtime_error() -> None:
    with pytest.raises(RuntimeError, match="only inside a workflow"):
        continue_as_new(n=1)
    with pytest.raises(RuntimeError, match="only inside a workflow"):
        parent_workflow_id()


async def test_start_child_outside_a_workflow_raises_runtime_error() -> None:
    with pytest.raises(RuntimeError, match="only inside a workflow"):
        await start_child(whoami)
