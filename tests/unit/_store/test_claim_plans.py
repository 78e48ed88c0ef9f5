"""The claims read their rows in the order of an index that spells RUN_ORDER and
TASK_ORDER exactly (migration 0027), so a claim never sorts the open runs."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from keepgoing._store.sql import admission, leases
from keepgoing._store.sqlite import SqliteStore


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
