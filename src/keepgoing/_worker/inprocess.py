"""The in-process orchestrator: ``await my_workflow(...)`` without a server.

The same engine on a private SQLite store in memory, with tasks on the calling event loop
(sync ones in threads). Under :func:`keepgoing.testing.fake_clock` the clock
jumps to the next due timer whenever nothing else can happen, so a workflow
that sleeps for two days finishes in milliseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from keepgoing._clock import Clock, system_clock
from keepgoing._store.records import TERMINAL, MessageRequest, RunRecord, StartRequest
from keepgoing._store.sqlite import SqliteStore
from keepgoing._worker.settings import WorkerSettings
from keepgoing._worker.worker import Worker
from keepgoing._workflow.messages import pending_local_messages
from keepgoing.errors import WorkflowBlockedError, WorkflowCancelledError, WorkflowFailedError

if TYPE_CHECKING:
    from keepgoing._workflow.workflow import WorkflowDefinition

__all__ = ["JumpingClock", "drive", "local_clock", "run_in_process", "use_clock"]

LOCAL_QUEUE = "local"


class JumpingClock(Clock, Protocol):
    def jump_to(self, moment: float) -> None: ...


_clock: contextvars.ContextVar[Clock | None] = contextvars.ContextVar(
    "keepgoing_local_clock", default=None
)


@contextmanager
def use_clock(clock: Clock) -> Iterator[Clock]:
    """Run in-process workflows started inside this block on ``clock``."""
    token = _clock.set(clock)
    try:
        yield clock
    finally:
        _clock.reset(token)


def local_clock() -> Clock:
    return _clock.get() or system_clock


async def run_in_process(definition: WorkflowDefinition[..., Any], inputs: dict[str, Any]) -> Any:
    """Run one workflow to its end in this process and return its result.

    Raises:
        Exception: whatever the workflow raised, as the same object.
    """
    clock = local_clock()
    store = SqliteStore(":memory:", url="sqlite://")
    await store.open()
    settings = WorkerSettings(
        queues=(LOCAL_QUEUE,), concurrency=64, lease_ttl=3600.0, heartbeat_interval=60.0
    )
    worker = Worker(store, settings=settings, clock=clock, worker_id="local")
    worker.keep_failures = True
    run_id = uuid.uuid4().hex
    run = await store.start_run(
        StartRequest(
            run_id=run_id,
            workflow_id=f"{definition.name}-{run_id[:12]}",
            workflow_name=definition.name,
            input=inputs,
            task_queue=LOCAL_QUEUE,
            code_version=definition.code_version,
            now=clock.now(),
        )
    )
    for name, payload in pending_local_messages():
        await store.send_message(
            MessageRequest(run.workflow_id, name, payload, "local", "local", clock.now())
        )
    try:
        run = await drive(worker, run_id, settle_children=True)
    finally:
        await worker.stop_local()
        await store.close()
    if run.status == "failed" and run.run_id in worker.failures:
        raise worker.failures[run.run_id]
    return outcome(run)


async def drive(worker: Worker, run_id: str, *, settle_children: bool = False) -> RunRecord:
    """Run ``worker`` until run ``run_id`` ends (or is blocked); return the run.

    With ``settle_children`` it goes on until no run of the store is running,
    so cancelled children get to run their ``finally`` blocks.
    """
    heartbeat = asyncio.create_task(worker.heartbeat_loop())  # keeps long attempts leased
    try:
        return await _drive(worker, run_id, settle_children)
    finally:
        heartbeat.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await heartbeat


async def _drive(worker: Worker, run_id: str, settle_children: bool) -> RunRecord:
    clock = worker.clock
    while True:
        progressed = await worker.tick()
        run = await worker.store.get_run(run_id)
        assert run is not None
        if run.status == "continued" and run.continued_to:
            run_id = run.continued_to  # continue_as_new: follow the newest run
            continue
        ended = run.status in TERMINAL or run.status == "blocked"
        if ended and not (settle_children and await _children_running(worker, run)):
            return run
        if progressed:
            continue
        if hasattr(clock, "jump_to") and worker.running_attempts == 0:
            wake = await worker.store.next_wakeup()
            if wake is None:
                # The last attempt's outcome may have landed since this pass's claims
                # (the store commits on its own thread): a run made runnable is no
                # wake-up, so look once more before giving up.
                if await worker.tick():
                    continue
                raise RuntimeError(
                    f"workflow {run.workflow_name!r} is waiting for something that cannot "
                    "happen in this process (nothing is scheduled)"
                )
            clock.jump_to(wake)
            continue
        await worker.idle()


async def _children_running(worker: Worker, run: RunRecord) -> bool:
    """Whether any descendant of ``run`` is still running (so it can still clean up)."""
    pending = [run.workflow_id]
    while pending:
        lineage = await worker.store.lineage(pending.pop())
        for child in lineage.children:
            if child.status == "running":
                return True
            pending.append(child.workflow_id)
    return False


def outcome(run: RunRecord) -> Any:
    """The result of an ended run, or the error that describes why there is none."""
    if run.status == "completed":
        return run.result
    if run.status == "blocked":
        raise WorkflowBlockedError(f"run {run.run_id} is blocked:\n{run.blocked_reason}")
    error = run.error
    kind = WorkflowCancelledError if run.status == "cancelled" else WorkflowFailedError
    raise kind(
        run.run_id,
        error.type if error else run.status,
        error.message if error else f"the run was {run.status}",
    )
