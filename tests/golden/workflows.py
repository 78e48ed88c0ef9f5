"""Workflows whose recorded histories are kept in ``tests/golden/*.json``.

Their code must keep replaying those histories: change a workflow here only
together with a re-recording (``python tests/golden/record.py``), and only
when the change is meant to break old runs.
"""

from __future__ import annotations

import asyncio

import keepgoing
from keepgoing import TaskFailedError, task, workflow

__all__ = ["GOLDEN", "fan_out", "race", "retry_then_recover", "score_batch"]

# The durations are short because the recordings run on the real clock.
SUMMARY_DELAY = 0.2


# -- score_batch: task, durable sleep, task (DESIGN section 1) --------------


@task(name="golden.score", retries=2, retry_delay="30s", timeout="5m")
def score(rows: list[int]) -> list[float]:
    return [round(row * 0.1, 2) for row in rows]


@task(name="golden.summarize")
def summarize(batch_id: str, scores: list[float]) -> dict[str, object]:
    return {
        "batch_id": batch_id,
        "rows": len(scores),
        "mean_score": sum(scores) / len(scores) if scores else None,
    }


@workflow(name="golden.score_batch")
async def score_batch(batch_id: str, rows: list[int]) -> dict[str, object]:
    scores = await score(rows)
    await asyncio.sleep(SUMMARY_DELAY)  # a durable timer
    return await summarize(batch_id, scores)


# -- fan_out: gather, a wait_for the task wins, a wait_for the timer wins ---


@task(name="golden.square")
def square(n: int) -> int:
    return n * n


@task(name="golden.crawl", timeout="30s")
async def crawl(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "crawled"


@workflow(name="golden.fan_out")
async def fan_out(n: int) -> dict[str, object]:
    squares = await asyncio.gather(*(square(i) for i in range(n)))
    quick = await asyncio.wait_for(square(n), timeout=60)
    try:
        slow: str = await asyncio.wait_for(crawl(5.0), timeout=0.2)
    except TimeoutError:
        slow = "timed out"
    return {
        "squares": list(squares),
        "quick": quick,
        "slow": slow,
        "pick": keepgoing.random(),
        "id": str(keepgoing.uuid4()),
    }


# -- retry_then_recover: attempts that fail, a task that fails for good -----


@task(name="golden.always_fails", retries=1, retry_delay="50ms")
def always_fails(reason: str) -> None:
    raise ValueError(reason)


@workflow(name="golden.retry_then_recover")
async def retry_then_recover(reason: str) -> dict[str, object]:
    try:
        await always_fails(reason)
    except TaskFailedError as exc:
        return {"recovered": True, "type": exc.error_type, "attempts": exc.attempts}
    return {"recovered": False}


# -- race: the Trap 1 interleaving (hand-built history) ---------------------


@task(name="golden.first")
def first() -> str:
    return "first"


@task(name="golden.second")
def second() -> str:
    return "second"


@task(name="golden.third")
def third() -> str:
    return "third"


@workflow(name="golden.race")
async def race() -> list[str]:
    first_handle = first.submit()
    second_handle = second.submit()
    a = await first_handle
    if second_handle.done():  # only if both results were delivered together
        return [a, second_handle.result(), "together"]
    c = await third()
    return [a, await second_handle, c]


GOLDEN = {wf.name: wf for wf in (score_batch, fan_out, retry_then_recover, race)}
