"""The claims read their rows in the order of an index that spells RUN_ORDER and
TASK_ORDER exactly (migration 0027), so a claim never sorts the open runs; and
those indexes hold only claimable rows, so a store that keeps many ended runs
(retention's steady state) claims as fast as an empty one."""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from keepgoing._history.events import WorkflowCompleted
from keepgoing._store.sql import admission, leases
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
    # A walk of a partial index in claim order reads only claimable rows (and stops
    # at LIMIT); no other scan of runs or tasks, and no sort.
    assert "USING INDEX runs_runnable" in plan and "TEMP B-TREE" not in plan, plan
    assert not _SCAN.search(plan.replace("SCAN runs USING INDEX runs_runnable", "")), plan
    (task_claim,) = [s for s in tasks if "FROM tasks WHERE status = 'pending'" in s]
    plan = _plan(path, task_claim)
    assert "USING INDEX tasks_pending" in plan, plan
    assert not _SCAN.search(plan.replace("SCAN tasks USING INDEX tasks_pending", "")), plan


class _Planner:
    """A connection that keeps the plan of each SELECT it runs."""

    def __init__(self, raw: sqlite3.Connection) -> None:
        self.raw = raw
        self.plans: list[tuple[str, list[str]]] = []

    def execute(self, sql: str, params: Iterable[Any] = ()) -> sqlite3.Cursor:
        args = tuple(params)
        if sql.lstrip().startswith("SELECT"):
            rows = self.raw.execute("EXPLAIN QUERY PLAN " + sql, args).fetchall()
            self.plans.append((sql, [str(r[3]) for r in rows]))
        return self.raw.execute(sql, args)

    def executemany(self, sql: str, rows: Iterable[Any]) -> sqlite3.Cursor:
        return self.raw.executemany(sql, rows)


def _migrated(tmp_path: Path) -> sqlite3.Connection:
    path = str(tmp_path / "kg.db")
    store = SqliteStore(path)

    async def open_and_close() -> None:
        await store.open()
        await store.close()

    asyncio.run(open_and_close())
    return sqlite3.connect(path)


def test_the_run_claim_reads_runs_runnable_in_run_order(tmp_path: Path) -> None:
    conn = _Planner(_migrated(tmp_path))

    leases.claim_activations(conn, "w", ["default"], ["a", "b"], 10, 15.0, 1000.0)  # type: ignore[arg-type]

    sql, plan = conn.plans[0]
    assert f"ORDER BY {admission.RUN_ORDER} " in sql
    assert any("USING INDEX runs_runnable" in step for step in plan), plan
    assert not any("TEMP B-TREE FOR ORDER BY" in step for step in plan), plan
    assert any("USING INDEX runs_flow_slots" in step for step in plan), plan


def test_the_task_claim_reads_tasks_pending_in_task_order(tmp_path: Path) -> None:
    conn = _Planner(_migrated(tmp_path))

    leases.claim_tasks(conn, "w", ["default"], ["t"], 10, 15.0, 1000.0)  # type: ignore[arg-type]

    sql, plan = conn.plans[0]
    assert f"ORDER BY {admission.TASK_ORDER} " in sql
    assert any("USING INDEX tasks_pending" in step for step in plan), plan
    assert not any("TEMP B-TREE FOR ORDER BY" in step for step in plan), plan


def test_the_index_spells_the_order_the_claim_uses(tmp_path: Path) -> None:
    raw = _migrated(tmp_path)
    (runs,) = raw.execute("SELECT sql FROM sqlite_master WHERE name = 'runs_runnable'").fetchone()
    (tasks,) = raw.execute("SELECT sql FROM sqlite_master WHERE name = 'tasks_pending'").fetchone()

    assert f"({admission.RUN_ORDER})" in runs
    assert f"({admission.TASK_ORDER})" in tasks
