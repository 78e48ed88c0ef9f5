"""Small builders shared by the contract tests. Time is a fixed fake ``NOW``."""

from __future__ import annotations

from typing import Any, TypeVar

from keepgoing._history.events import ErrorInfo, Event, TaskScheduled
from keepgoing._store.protocol import Store
from keepgoing._store.records import (
    ActivationClaim,
    ActivationCommit,
    CommitResult,
    RunRecord,
    StartRequest,
    TaskClaim,
    TaskOutcome,
    WorkerRecord,
)

E = TypeVar("E", bound=Event)

NOW = 1_000_000.0
TTL = 15.0
QUEUE = "default"
WF = "wf"
TASK = "t"
BOOM = ErrorInfo(type="ValueError", message="boom")


async def start(
    store: Store,
    workflow_id: str = "wf-1",
    *,
    run_id: str | None = None,
    name: str = WF,
    queue: str = QUEUE,
    now: float = NOW,
    input: dict[str, Any] | None = None,
) -> RunRecord:
    """Start a run of workflow ``name`` (run id defaults to ``run-<workflow_id>``)."""
    request = StartRequest(
        run_id=run_id or f"run-{workflow_id}",
        workflow_id=workflow_id,
        workflow_name=name,
        input=input if input is not None else {"x": 1},
        task_queue=queue,
        code_version="v1",
        now=now,
    )
    return await store.start_run(request)


async def claim_runs(
    store: Store,
    *,
    worker: str = "w1",
    now: float = NOW,
    limit: int = 10,
    ttl: float = TTL,
    queues: tuple[str, ...] = (QUEUE,),
    names: tuple[str, ...] = (WF,),
) -> list[ActivationClaim]:
    return await store.claim_activations(
        worker_id=worker,
        queues=list(queues),
        workflow_names=list(names),
        limit=limit,
        lease_ttl=ttl,
        now=now,
    )


async def claim_run(
    store: Store, run_id: str, *, worker: str = "w1", now: float = NOW, ttl: float = TTL
) -> ActivationClaim:
    """Claim the activation of ``run_id``; fail the test if it is not claimable."""
    claims = await claim_runs(store, worker=worker, now=now, ttl=ttl)
    mine = [c for c in claims if c.run.run_id == run_id]
    assert len(mine) == 1, f"run {run_id} was not claimable: {claims}"
    for other in claims:
        if other.run.run_id != run_id:
            await store.release_activation(other.run.run_id, other.fence)
    return mine[0]


async def commit(
    store: Store,
    claim: ActivationClaim,
    commands: list[Event],
    *,
    saw_upto: int | None = None,
    worker: str = "w1",
    now: float = NOW,
    **options: Any,
) -> CommitResult:
    """Commit ``commands`` for ``claim``; ``saw_upto`` defaults to what the claim saw."""
    return await store.commit_activation(
        ActivationCommit(
            run_id=claim.run.run_id,
            fence=claim.fence,
            worker_id=worker,
            saw_upto=claim.run.last_input_seq if saw_upto is None else saw_upto,
            time=now - 1,
            commands=commands,
            now=now,
            **options,
        )
    )


async def schedule(
    store: Store,
    claim: ActivationClaim,
    commands: list[Event],
    *,
    now: float = NOW,
    **options: Any,
) -> CommitResult:
    """Commit ``commands`` and insist that the commit succeeded."""
    result = await commit(store, claim, commands, now=now, **options)
    assert result.ok
    return result


async def start_with(
    store: Store, commands: list[Event], workflow_id: str = "wf-1", **options: Any
) -> tuple[RunRecord, CommitResult]:
    """Start a run and commit ``commands`` as its first activation."""
    run = await start(store, workflow_id)
    claim = await claim_run(store, run.run_id)
    result = await schedule(store, claim, commands, **options)
    return run, result


def task(cmd: int = 1, name: str = TASK, **options: Any) -> TaskScheduled:
    return TaskScheduled(cmd=cmd, name=name, args=[cmd], kwargs={"k": "v"}, **options)


async def claim_tasks(
    store: Store,
    *,
    worker: str = "w1",
    now: float = NOW,
    limit: int = 10,
    ttl: float = TTL,
    names: tuple[str, ...] = (TASK,),
    queues: tuple[str, ...] = (QUEUE,),
) -> list[TaskClaim]:
    return await store.claim_tasks(
        worker_id=worker,
        queues=list(queues),
        task_names=list(names),
        limit=limit,
        lease_ttl=ttl,
        now=now,
    )


async def claim_one(store: Store, **kwargs: Any) -> TaskClaim:
    claims = await claim_tasks(store, limit=1, **kwargs)
    assert len(claims) == 1, "no task was claimable"
    return claims[0]


def success(
    claim: TaskClaim, result: Any = "ok", *, now: float = NOW + 1, worker: str = "w1"
) -> TaskOutcome:
    return TaskOutcome(
        run_id=claim.run_id,
        cmd=claim.cmd,
        fence=claim.fence,
        worker_id=worker,
        attempt=claim.attempt,
        started_at=claim.started_at,
        now=now,
        ok=True,
        result=result,
    )


def failure(
    claim: TaskClaim,
    error: ErrorInfo = BOOM,
    *,
    now: float = NOW + 1,
    worker: str = "w1",
    reason: str = "error",
) -> TaskOutcome:
    return TaskOutcome(
        run_id=claim.run_id,
        cmd=claim.cmd,
        fence=claim.fence,
        worker_id=worker,
        attempt=claim.attempt,
        started_at=claim.started_at,
        now=now,
        ok=False,
        error=error,
        reason=reason,
    )


def worker(worker_id: str = "w1", *, started_at: float = NOW, **options: Any) -> WorkerRecord:
    values: dict[str, Any] = {
        "queues": [QUEUE],
        "host": "host-a",
        "pid": 4242,
        "heartbeat_at": started_at,
        "info": {"version": "0.1.0"},
    }
    values.update(options)
    return WorkerRecord(worker_id=worker_id, started_at=started_at, **values)


def kinds(events: list[Event]) -> list[str]:
    return [type(e).__name__ for e in events]


def of_type(events: list[Event], cls: type[E]) -> list[E]:
    return [e for e in events if isinstance(e, cls)]
