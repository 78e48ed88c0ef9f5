"""Queue depths joined with the workers that serve each queue (client and API share it)."""

from __future__ import annotations

from typing import Any

from keepgoing._store.observe_protocol import QueueDepth
from keepgoing._store.protocol import Store

__all__ = ["queue_summary"]


async def queue_summary(store: Store, now: float) -> list[dict[str, Any]]:
    """Every queue that has work or a worker, by name: its depth, what is in it,
    and how many live workers serve it (a worker marked lost is not counted)."""
    depths = {q.queue: q for q in await store.queue_depths(now)}
    served: dict[str, int] = {}
    for worker in await store.list_workers():
        if worker.lost_at is not None:
            continue
        for queue in worker.queues:
            served[queue] = served.get(queue, 0) + 1
    rows = []
    for name in sorted(set(depths) | set(served)):
        q = depths.get(name, QueueDepth(name))
        rows.append(
            {
                "queue": name,
                "depth": q.depth,
                "runnable_runs": q.runnable_runs,
                "ready_tasks": q.ready_tasks,
                "delayed_tasks": q.delayed_tasks,
                "running_tasks": q.running_tasks,
                "workers": served.get(name, 0),
            }
        )
    return rows
