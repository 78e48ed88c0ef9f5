"""What a running run waits for that is not there: a worker that serves its workflow,
anything at all that serves its queue, or a slot or a token of a task's limit."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from keepgoing._store.limits_protocol import LimitWait
from keepgoing._store.records import RunRecord, WorkerRecord

__all__ = [
    "LIVE_WORKER_SECONDS",
    "Served",
    "held_back",
    "limit_text",
    "served_workflows",
    "waiting_for",
]

#: A registered worker whose heartbeat is older than this is not counted as serving.
LIVE_WORKER_SECONDS = 60.0


@dataclass(frozen=True)
class Served:
    """What ``waiting_for`` is read against: the (workflow name, queue) pairs that live
    workers serve, and every queue that a group, worker or deploy has served (None:
    not read, so no run is said to wait on an unknown queue), and what holds back
    the tasks of runs a limit keeps waiting (run id -> words; :func:`held_back`)."""

    pairs: frozenset[tuple[str, str]] = frozenset()
    queues: frozenset[str] | None = field(default=None)
    limited: Mapping[str, str] = field(default_factory=dict)


def limit_text(wait: LimitWait) -> str:
    """ "waiting for a concurrency slot of NAME (2/2 held)", or "rate-limited by NAME
    until 12:00:01.250" (UTC)."""
    if wait.kind == "concurrency":
        return f"waiting for a concurrency slot of {wait.limit} ({wait.held}/{wait.cap} held)"
    until = datetime.fromtimestamp(wait.until or 0.0, UTC).strftime("%H:%M:%S.%f")[:-3]
    return f"rate-limited by {wait.limit} until {until}"


def held_back(waits: Iterable[LimitWait]) -> dict[str, str]:
    """Each run's limit waits in words, one phrase per limit, by run id."""
    phrases: dict[str, list[str]] = {}
    for wait in waits:
        text = limit_text(wait)
        if text not in phrases.setdefault(wait.run_id, []):
            phrases[wait.run_id].append(text)
    return {run_id: "; ".join(texts) for run_id, texts in phrases.items()}


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


def waiting_for(run: RunRecord, served: Served) -> str | None:
    """ "waiting on queue Q, which nothing serves" for a run on a queue that nothing has
    ever served; "waiting for a worker that serves NAME" for one that no live worker
    can run; what holds back its tasks when a limit does (:func:`limit_text`)."""
    if run.status != "running":
        return None
    if not run.runnable:
        return served.limited.get(run.run_id)
    if served.queues is not None and run.task_queue not in served.queues:
        return f"waiting on queue {run.task_queue}, which nothing serves"
    if (run.workflow_name, run.task_queue) in served.pairs:
        return None
    where = "" if run.task_queue == "default" else f" on queue {run.task_queue}"
    return f"waiting for a worker that serves {run.workflow_name}{where}"
