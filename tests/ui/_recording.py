"""A run with a long history, written through the store's own contract, fast.

Running 5,000 steps on a worker takes minutes on a busy two-core machine; the
timeline's speed depends only on the history, so :func:`record_long_run` plays the
worker's part against the real store: it claims the run's activation, commits
``steps`` ``TaskScheduled`` commands, claims and completes every task (with
their completions in flight at once, so the store commits them in groups), then
claims the next activation and completes the workflow. The result is the
history a worker would write for ``asyncio.gather`` of ``steps`` tasks.
"""

from __future__ import annotations

import asyncio
import time

from keepgoing._history import events as ev
from keepgoing._open_store import store_from_url
from keepgoing._store.protocol import Store
from keepgoing._store.records import ActivationClaim, ActivationCommit, TaskOutcome

__all__ = ["WORKFLOW", "record_long_run"]

#: Served by no worker, so only the recorder activates it.
WORKFLOW = "long_recording"
WORKER = "recorder-1"
#: Served by no worker either (the test workers serve a `tick`), so no worker races the recorder.
TASK = "long_recording_tick"


async def _record(url: str, steps: int) -> None:
    store = store_from_url(url)
    await store.open()
    try:
        claims = await _claim(store)
        claim = claims[0]
        commands: list[ev.Event] = [
            ev.TaskScheduled(cmd=i, name=TASK, args=[i]) for i in range(1, steps + 1)
        ]
        now = time.time()
        done = await store.commit_activation(
            ActivationCommit(
                run_id=claim.run.run_id,
                fence=claim.fence,
                worker_id=WORKER,
                saw_upto=claim.run.last_input_seq,
                time=now,
                commands=commands,
                now=now,
            )
        )
        assert done.ok, done
        tasks = []
        while len(tasks) < steps:
            got = await store.claim_tasks(
                worker_id=WORKER,
                queues=["default"],
                task_names=[TASK],
                limit=1000,
                lease_ttl=600,
                now=time.time(),
            )
            assert got, "the recorder found no task to claim"
            tasks.extend(got)
        outcomes = [
            TaskOutcome(
                run_id=t.run_id,
                cmd=t.cmd,
                fence=t.fence,
                worker_id=WORKER,
                attempt=t.attempt,
                started_at=t.started_at,
                now=time.time(),
                ok=True,
                result=t.cmd,
            )
            for t in tasks
        ]
        for start in range(0, len(outcomes), 500):
            batch = outcomes[start : start + 500]
            results = await asyncio.gather(*(store.complete_task(o) for o in batch))
            assert all(r.accepted for r in results)
        claim = (await _claim(store))[0]
        now = time.time()
        final = await store.commit_activation(
            ActivationCommit(
                run_id=claim.run.run_id,
                fence=claim.fence,
                worker_id=WORKER,
                saw_upto=claim.run.last_input_seq,
                time=now,
                commands=[ev.WorkflowCompleted(result=steps * (steps + 1) // 2)],
                now=now,
            )
        )
        assert final.ok, final
    finally:
        await store.close()


async def _claim(store: Store) -> list[ActivationClaim]:
    deadline = time.monotonic() + 30
    while True:
        found = await store.claim_activations(
            worker_id=WORKER,
            queues=["default"],
            workflow_names=[WORKFLOW],
            limit=1,
            lease_ttl=600,
            now=time.time(),
        )
        if found:
            return list(found)
        assert time.monotonic() < deadline, "the run never became runnable"
        await store.wait_for_change(0.5)  # woken by the store's doorbell


def record_long_run(url: str, steps: int) -> None:
    """Write the history of a run of ``WORKFLOW`` (already started) with ``steps`` steps."""
    asyncio.run(_record(url, steps))
