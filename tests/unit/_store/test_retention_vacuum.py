"""A new SQLite store gives the pages a sweep freed back to the file system, in steps."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from contract._builders import NOW, claim_run, schedule, start
from keepgoing._history.events import WorkflowCompleted
from keepgoing._store.retention_protocol import RetentionWindow
from keepgoing._store.sql.retention import _FREE_KEPT, _VACUUM_PAGES
from keepgoing._store.sqlite import SqliteStore


def _pages(path: Path) -> tuple[int, int, int]:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        mode = conn.execute("PRAGMA auto_vacuum").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    conn.close()
    return mode, pages, free


async def test_freed_pages_go_back_a_step_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "kg.db"
    store = SqliteStore(str(path))
    await store.open()
    try:
        ids = []
        for i in range(400):
            run = await start(store, f"wf-{i}", input={"blob": "x" * 8000})
            claim = await claim_run(store, run.run_id)
            await schedule(store, claim, [WorkflowCompleted(result=None)])
            ids.append(run.run_id)
        mode, before, _ = _pages(path)
        window = RetentionWindow(now=NOW + 10, older_than=5.0)
        for chunk in range(0, len(ids), 100):
            swept = await store.delete_runs(ids[chunk : chunk + 100], window, actor="t")
            assert swept.runs == 100
        _, after, free = _pages(path)
    finally:
        await store.close()

    assert mode == 2  # INCREMENTAL
    assert before - after >= min(4 * _VACUUM_PAGES, before // 4)  # given back
    assert free >= _FREE_KEPT // 2  # some kept for new rows
