"""Queue depths joined with the workers that serve each queue, and what live workers
serve (the client, the HTTP API and the CLI share both)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from keepgoing._store.observe_protocol import QueueDepth
from keepgoing._store.protocol import Store
from keepgoing._store.records import RunRecord
from keepgoing._views.catalog import known_queues
from keepgoing._views.waiting import Served, held_back, served_workflows

__all__ = ["queue_summary", "serving"]


async def serving(store: Store, now: float, runs: Iterable[RunRecord] = ()) -> Served:
    """What a run's ``waiting_for`` is read against: the pairs live workers serve, the
    queues anything has served, and what limits hold back the tasks of ``runs``."""
    served = served_workflows(await store.list_workers(), now, await known_queues(store))
    waiting = [r.run_id for r in runs if r.status == "running" and not r.runnable]
    if not waiting:
        return served
    return dataclasses.replace(served, limited=held_back(await store.limit_waits(waiting, now)))


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
