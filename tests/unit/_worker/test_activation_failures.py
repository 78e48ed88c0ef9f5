"""An activation that fails (not a lost lease) is retried with backoff, then blocked.

It never spins: the run's lease is held through each backoff, so neither this
worker nor another retries at once, and the fifth failure in a row blocks the
run with the error as its reason.
"""

from __future__ import annotations

import uuid

from keepgoing import workflow
from keepgoing._store.records import ActivationCommit, CommitResult, StartRequest
from keepgoing._store.sqlite import SqliteStore
from keepgoing._worker.activation import ACTIVATION_ATTEMPTS
from keepgoing._worker.inprocess import drive
from keepgoing._worker.settings import WorkerSettings
from keepgoing._worker.worker import Worker


@workflow(name="af.simple")
async def simple() -> str:
    return "done"


class FlakyStore(SqliteStore):
    """Refuses the first ``failures`` activation commits that carry commands."""

    def __init__(self, failures: int) -> None:
        super().__init__(":memory:")
        self.failures = failures
        self.refused = 0

    async def commit_activation(self, commit: ActivationCommit) -> CommitResult:
        if commit.blocked_reason is None and self.refused < self.failures:
            self.refused += 1
            raise RuntimeError(f"disk says no ({self.refused})")
        return await super().commit_activation(commit)


async def _run(store: FlakyStore) -> tuple[str, str | None]:
    await store.open()
    settings = WorkerSettings(queues=("q",), concurrency=4)
    worker = Worker(store, settings=settings, worker_id="w-af")
    run_id = uuid.uuid4().hex
    await store.start_run(
        StartRequest(
            run_id=run_id,
            workflow_id=f"af-{run_id}",
            workflow_name=simple.name,
            input={"args": [], "kwargs": {}},
            task_queue="q",
            code_version="v1",
            now=worker.clock.now(),
        )
    )
    try:
        run = await drive(worker, run_id)
    finally:
        await worker.stop_local()
        await store.close()
    return run.status, run.blocked_reason


async def test_an_activation_that_keeps_failing_is_blocked_after_a_bound() -> None:
    store = FlakyStore(failures=1_000)

    status, reason = await _run(store)

    assert status == "blocked"
    assert store.refused == ACTIVATION_ATTEMPTS  # no hot loop: one try per backoff
    assert reason is not None
    assert f"failed {ACTIVATION_ATTEMPTS} times in a row" in reason
    assert f"RuntimeError: disk says no ({ACTIVATION_ATTEMPTS})" in reason


async def test_an_activation_that_fails_for_a_while_goes_on_after_backoff() -> None:
    store = FlakyStore(failures=ACTIVATION_ATTEMPTS - 1)

    status, reason = await _run(store)

    assert (status, reason) == ("completed", None)
    assert store.refused == ACTIVATION_ATTEMPTS - 1
