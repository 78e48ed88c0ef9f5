"""What a running run waits for that is not there: a worker that serves its workflow,
or anything at all that serves its queue."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from keepgoing._store.records import RunRecord, WorkerRecord

__all__ = ["LIVE_WORKER_SECONDS", "Served", "queued_for", "served_workflows", "waiting_for"]

#: A registered worker whose heartbeat is older than this is not counted as serving.
LIVE_WORKER_SECONDS = 60.0


@dataclass(frozen=True)
class Served:
    """What ``waiting_for`` is read against: the (workflow name, queue) pairs that live
    workers serve, and every queue that a group, worker or deploy has served (None:
    not read, so no run is said to wait on an unknown queue)."""

    pairs: frozenset[tuple[str, str]] = frozenset()
    queues: frozenset[str] | None = field(default=None)


def served_workflows(
    workers: Iterable[WorkerRecord], now: float, queues: frozenset[str] | None = None
) -> Served:
    """The (workflow name, queue) pairs that the live registered workers serve."""
    pairs: set[tuple[str, str]] = set()
    for worker in workers:
        if worker.lost_at is not None or worker.heartbeat_at < now - LIVE_WORKER_SECONDS:
            continue
        names = worker.info.get("workflows", [])
        pairs.update((str(name), queue) for name in names for queue in worker.queues)
    return Served(frozenset(pairs), queues)


def queued_for(run: RunRecord) -> str | None:
    """ "queued: waiting for a concurrency slot of NAME (2/2 held)" for a queued run."""
    if run.status != "queued":
        return None
    return f"queued: {run.queued_for or 'waiting for a concurrency slot of ' + run.workflow_name}"


def waiting_for(run: RunRecord, served: Served | None) -> str | None:
    """ "queued: waiting for a concurrency slot of NAME (2/2 held)" for a queued run;
    "waiting on queue Q, which nothing serves" for a run on a queue that nothing has
    ever served; "waiting for a worker that serves NAME" for one that no live worker
    can run (``served``: what live workers serve; None, not read)."""
    if run.status == "queued":
        return queued_for(run)
    if served is None or run.status != "running" or not run.runnable:
        return None
    if served.queues is not None and run.task_queue not in served.queues:
        return f"waiting on queue {run.task_queue}, which nothing serves"
    if (run.workflow_name, run.task_queue) in served.pairs:
        return None
    where = "" if run.task_queue == "default" else f" on queue {run.task_queue}"
    return f"waiting for a worker that serves {run.workflow_name}{where}"
