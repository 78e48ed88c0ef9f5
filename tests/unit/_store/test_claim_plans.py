"""The run and task claims read indexes that hold only claimable rows, so a store
that keeps many ended runs (retention's steady state) claims as fast as an empty
one: checked on SQLite's query plans of the very statements the claims send."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from keepgoing._history.events import WorkflowCompleted
from keepgoing._store.sqlite import SqliteStore

_SCAN = re.compile(r"\bSCAN (runs|tasks)\b")


async def _ended_runs(store: SqliteStore, count: int) -> None:
    from contract._builders import claim_one, claim_run, schedule, start, success, task  # noqa: PLC0415

    for i in range(count):
        run = await start(store, f"wf-{i}")
        claim = await claim_run(store, run.run_id)
        await schedule(store, claim, [task(1)])
        attempt = await claim_one(store)
        assert (await store.complete_task(success(attempt, i))).accepted
        claim = await claim_run(store, run.run_id)
        await schedule(store, claim, [WorkflowCompleted(result=i)])


async def _selects(store: SqliteStore, work: object) -> list[str]:
    sent: list[str] = []
    await store._write(lambda c: c.set_trace_callback(sent.append))
    try:
        await work  # type: ignore[misc]
    finally:
        await store._write(lambda c: c.set_trace_callback(None))
    return [s for s in sent if s.lstrip().upper().startswith("SELECT")]


def _plan(path: str, sql: str) -> str:
    conn = sqlite3.connect(path)
    try:
        return " | ".join(str(row[-1]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
    finally:
        conn.close()


async def test_claims_use_their_partial_indexes_and_never_scan_ended_runs(tmp_path: Path) -> None:
    from contract._builders import NOW, QUEUE, WF, start  # noqa: PLC0415

    path = str(tmp_path / "kg.db")
    store = SqliteStore(path)
    await store.open()
    try:
        await _ended_runs(store, 60)
        await start(store, "open")
        runs = await _selects(
            store,
            store.claim_activations(
                worker_id="w", queues=[QUEUE], workflow_names=[WF], limit=1, lease_ttl=30, now=NOW
            ),
        )
        tasks = await _selects(
            store,
            store.claim_tasks(
                worker_id="w", queues=[QUEUE], task_names=["t"], limit=1, lease_ttl=30, now=NOW
            ),
        )
    finally:
        await store.close()
    (run_claim,) = [s for s in runs if "FROM runs WHERE runnable = 1" in s]
    plan = _plan(path, run_claim)
    assert "USING INDEX runs_claimable" in plan and "TEMP B-TREE" not in plan, plan
    assert not _SCAN.search(plan), plan
    (task_claim,) = [s for s in tasks if "FROM tasks WHERE status = 'pending'" in s]
    plan = _plan(path, task_claim)
    assert "USING INDEX tasks_pending" in plan and not _SCAN.search(plan), plan
