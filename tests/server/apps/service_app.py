"""Workflows the server and CLI tests run on a real worker."""

from __future__ import annotations

import asyncio
import os

from keepgoing import (
    UncertainOutcome,
    operation_id,
    start_child,
    task,
    wait_for_event,
    wait_for_message,
    workflow,
)


@task
def add(a: int, b: int) -> int:
    return a + b


@task(retries=1, retry_delay="10ms")
def flaky(key: str) -> str:
    # Fails on its first attempt (the marker file records it), then succeeds.
    marker = os.path.join(os.environ["KG_TEST_DIR"], f"flaky-{key}")
    if not os.path.exists(marker):
        open(marker, "w").close()
        raise RuntimeError("first attempt fails")
    return key


@task(retries=2)
def unsure_write(key: str) -> str:
    # Its first attempt of each operation loses the answer; a retry applies it.
    marker = os.path.join(os.environ["KG_TEST_DIR"], f"unsure-{operation_id()}")
    print(f"sent the write for {key} as {operation_id()}")
    if not os.path.exists(marker):
        open(marker, "w").close()
        raise UncertainOutcome(f"the connection dropped after sending the write for {key}")
    return f"written {key}"


@workflow
async def unsure(key: str) -> str:
    return await unsure_write(key)


@workflow
async def sum_two(a: int, b: int) -> int:
    return await add(a, b)


@workflow
async def two_steps(key: str) -> str:
    await add(1, 2)
    return await flaky(key)


@workflow
async def await_review(account: str) -> dict:
    message = await wait_for_message("review", timeout=60)
    return {
        "account": account,
        "payload": message.payload,
        "sender_kind": message.sender_kind,
        "sender_id": message.sender_id,
    }


@workflow
async def await_job(job: str) -> dict:
    event = await wait_for_event("job.done", job, timeout=60)
    return {"event_id": event.event_id, "payload": event.payload}


@workflow
async def sleeper(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "woke"


@workflow
async def broken() -> None:
    raise ValueError("broken on purpose")


@workflow
async def parent(n: int) -> list:
    handles = [await start_child(sum_two, {"a": i, "b": i}) for i in range(n)]
    return [await h for h in handles]


@workflow
async def unsure_with_deadline(key: str, seconds: float) -> str:
    """Waits at most ``seconds`` for the uncertain step's review, then moves on and
    waits for ``finish`` (its run stays open)."""
    try:
        outcome = await asyncio.wait_for(unsure_write(key), seconds)
    except TimeoutError:
        outcome = "gave up"
    await wait_for_message("finish")
    return outcome
