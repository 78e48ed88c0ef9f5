"""The quickstart: score a batch, wait durably, summarise.

Run in-process:        python examples/quickstart.py
Run on a worker:       keepgoing worker examples/quickstart.py
                       python -c "from keepgoing import Client; \
                           print(Client().trigger_workflow('score_batch', \
                           {'batch_id': 'b-1', 'rows': [2, 4, 6]}, wait=True))"
"""

from __future__ import annotations

import asyncio

from keepgoing import task, workflow


@task(retries=2, retry_delay="30s", timeout="5m")
def score(rows: list[int]) -> list[float]:
    return [round(row * 0.1, 2) for row in rows]


@task
def summarize(batch_id: str, scores: list[float]) -> dict[str, object]:
    return {
        "batch_id": batch_id,
        "rows": len(scores),
        "mean_score": sum(scores) / len(scores) if scores else None,
    }


@workflow
async def score_batch(batch_id: str, rows: list[int]) -> dict[str, object]:
    scores = await score(rows)
    await asyncio.sleep(1)  # a durable timer: no worker is held while it waits
    return await summarize(batch_id, scores)


if __name__ == "__main__":
    print(asyncio.run(score_batch("local-batch", [2, 4, 6])))
