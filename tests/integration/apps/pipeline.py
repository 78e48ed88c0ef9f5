"""The example of DESIGN section 1, with a short durable sleep."""

from __future__ import annotations

import asyncio

from keepgoing import task, workflow


@task(retries=2, retry_delay="30s", timeout="5m")
def score(rows: list[int]) -> list[float]:
    return [round(row * 0.1, 2) for row in rows]


@task
def summarize(batch_id: str, scores: list[float]) -> dict:
    return {
        "batch_id": batch_id,
        "rows": len(scores),
        "mean_score": sum(scores) / len(scores) if scores else None,
    }


@workflow
async def score_batch(batch_id: str, rows: list[int]) -> dict:
    scores = await score(rows)
    await asyncio.sleep(0.2)  # durable timer: no worker is held
    return await summarize(batch_id, scores)
