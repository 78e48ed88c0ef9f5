"""Workflows for the messaging integration tests (``test_messages_*.py``).

``review_account``, ``assistant`` and ``supervisor`` are the docs' examples
as written; their tasks also log side effects (see ``kg_effects``) so the
tests can count them. ``answer_question`` holds on a question ``q`` when the
test has created the marker ``hold-<q>``, until ``release-<q>`` appears.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from kg_effects import attempt, folder, record, wait_for_marker

from keepgoing import (
    KeepgoingError,
    WorkflowMessageTimeoutError,
    send_message,
    start_child,
    task,
    wait_for_message,
    workflow,
)

# -- "Wait for messages" -----------------------------------------------------------------------


@task
def apply_decision(account_id: str, approved: bool, reviewer: str) -> None:
    record("done", "apply", f"{account_id}:{approved}:{reviewer}", attempt())


@workflow
async def review_account(account_id: str) -> str:
    try:
        review = await wait_for_message("review", timeout=timedelta(days=2))
    except WorkflowMessageTimeoutError:
        return "expired"
    await apply_decision(account_id, review.payload["approved"], review.sender_id)
    return "approved" if review.payload["approved"] else "rejected"


@task
def hold(key: str) -> None:
    """Block until the marker ``release-<key>`` exists."""
    n = attempt()
    record("start", "hold", key, n)
    wait_for_marker(f"release-{key}")
    record("done", "hold", key, n)


@workflow
async def review_after_hold(account_id: str) -> str:
    """A step that blocks first, so a message can be sent before the wait exists."""
    await hold(account_id)
    return await review_account(account_id)  # inline: the same run


# -- "Child workflows" ---------------------------------------------------------------------------


@task
def answer_question(question: str) -> str:
    n = attempt()
    record("start", "answer", question, n)
    if (folder() / f"hold-{question}").exists():
        wait_for_marker(f"release-{question}")
    record("done", "answer", question, n)
    return f"answer to {question}"


@workflow
async def assistant() -> int:
    answered = 0
    while True:
        ask = await wait_for_message("ask", timeout=timedelta(hours=1))
        if ask.payload.get("stop"):
            return answered
        answer = await answer_question(ask.payload["question"])
        await send_message(ask.sender_id, "answer", {"answer": answer})
        answered += 1


@workflow
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


@workflow
async def starts_unknown_child() -> str:
    """Start a child by a name no worker serves; report the error it raises, if any."""
    try:
        child = await start_child("no_such_workflow")
        await child
    except KeepgoingError as exc:
        return type(exc).__name__
    return "finished"


# -- ordering ------------------------------------------------------------------------------------


@workflow
async def collector(n: int) -> list[object]:
    """The payloads of the next ``n`` messages called ``item``, in the order received."""
    return [(await wait_for_message("item")).payload for _ in range(n)]


# -- cancellation --------------------------------------------------------------------------------


@task
def cleanup(who: str) -> None:
    record("done", "cleanup", who, attempt())


@workflow
async def waiting_child() -> str:
    try:
        await wait_for_message("never")
    finally:
        await cleanup("child")
    return "unreachable"


@workflow
async def cancel_parent() -> str:
    child = await start_child(waiting_child)
    try:
        return await child
    finally:
        await cleanup("parent")


@task(timeout="2m")
async def slow(key: str) -> str:
    n = attempt()
    record("start", "slow", key, n)
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        record("cancelled", "slow", key, n)
        raise
    record("done", "slow", key, n)
    return "finished"


@workflow
async def runs_slow(key: str) -> str:
    try:
        return await slow(key)
    finally:
        await cleanup(f"runs_slow-{key}")
