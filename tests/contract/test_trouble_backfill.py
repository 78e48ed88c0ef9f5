"""Migration 0018 on a store that already holds runs: their trouble counters are
filled in once from their histories, on SQLite and on PostgreSQL."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from keepgoing._history import events as ev
from keepgoing._history.codec import encode_at
from keepgoing._store.migrate import load_migrations
from keepgoing._store.postgres import PostgresStore
from keepgoing._store.protocol import Store
from keepgoing._store.sqlite import SqliteStore
from keepgoing._store.trouble import Trouble

BEFORE = 18  # the migration under test
NOW = 1_000_000.0
LIMITED = ev.ErrorInfo(type="RateLimitedError", message="429 Too Many Requests")


def _history(run_id: str) -> list[ev.Event]:
    return [
        ev.WorkflowStarted(
            workflow_name="wf", workflow_id=f"wf-{run_id}", run_id=run_id, input={}, code_version=""
        ),
        ev.TaskScheduled(cmd=1, name="t", args=[], kwargs={}),
        ev.TaskAttemptFailed(
            cmd=1,
            name="t",
            attempt=1,
            error=ev.ErrorInfo(type="x", message="gone"),
            reason="worker_lost",
        ),
        ev.TaskAttemptFailed(
            cmd=1, name="t", attempt=2, error=LIMITED, reason="error", retry_at=NOW + 1
        ),
        ev.TaskAttemptFailed(
            cmd=1,
            name="t",
            attempt=3,
            error=ev.ErrorInfo(type="ValueError", message="no"),
            reason="error",
            retry_at=NOW + 2,
        ),
        ev.TaskCompleted(cmd=1, result=1, attempt=4),
        ev.TaskScheduled(cmd=2, name="t", args=[], kwargs={}),
        ev.TaskFailed(
            cmd=2,
            name="t",
            error=ev.ErrorInfo(type="x", message="?"),
            attempts=1,
            reason="uncertain",
        ),
        ev.MessageWaitStarted(cmd=3, name=f"review:op-{run_id}-2"),
    ]


def _rows(run_id: str) -> tuple[list[tuple[Any, ...]], tuple[Any, ...], tuple[Any, ...]]:
    history = [
        (run_id, seq, type(e).__name__, NOW, encode_at(e, seq, NOW))
        for seq, e in enumerate(_history(run_id), 1)
    ]
    run = (run_id, f"wf-{run_id}", "wf", "running", "{}", "default", "", NOW, NOW, 10)
    task = (run_id, 2, f"wf-{run_id}", "t", "default", "uncertain", "[]", "{}", 0, 60.0, 3, NOW)
    return history, run, task


_RUN = (
    "INSERT INTO runs (run_id, workflow_id, workflow_name, status, input, task_queue, "
    "code_version, created_at, updated_at, next_seq) VALUES ({})"
)
_TASK = (
    "INSERT INTO tasks (run_id, cmd, workflow_id, name, queue, status, args, kwargs, retries, "
    "timeout, max_worker_losses, available_at) VALUES ({})"
)
_HISTORY = "INSERT INTO history (run_id, seq, type, at, body) VALUES ({})"


def _old_sqlite(tmp_path: Path) -> str:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE keepgoing_schema (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
        "applied_at REAL NOT NULL)"
    )
    for m in load_migrations("sqlite"):
        if m.version < BEFORE:
            conn.executescript(m.sql)
            conn.execute("INSERT INTO keepgoing_schema VALUES (?, ?, ?)", (m.version, m.name, NOW))
    for run_id in ("r1", "r2"):
        history, run, task = _rows(run_id)
        conn.execute(_RUN.format(",".join("?" * len(run))), run)
        conn.execute(_TASK.format(",".join("?" * len(task))), task)
        conn.executemany(_HISTORY.format("?, ?, ?, ?, ?"), history)
    conn.execute("UPDATE runs SET status = 'completed' WHERE run_id = 'r2'")  # waits no more
    conn.commit()
    conn.close()
    return str(path)


@pytest.fixture
def old_postgres() -> Iterator[str]:
    psycopg = pytest.importorskip("psycopg")
    from postgres_support import session_database  # noqa: PLC0415

    databases = session_database()
    url = next(databases)
    with psycopg.connect(url) as conn:
        conn.execute(
            "CREATE TABLE keepgoing_schema (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
            "applied_at DOUBLE PRECISION NOT NULL)"
        )
        for m in load_migrations("postgresql"):
            if m.version < BEFORE:
                conn.execute(m.sql.encode())
                conn.execute(
                    "INSERT INTO keepgoing_schema VALUES (%s, %s, %s)", (m.version, m.name, NOW)
                )
        for run_id in ("r1", "r2"):
            history, run, task = _rows(run_id)
            conn.execute(_RUN.format(",".join(["%s"] * len(run))).encode(), run)
            conn.execute(_TASK.format(",".join(["%s"] * len(task))).encode(), task)
            conn.cursor().executemany(_HISTORY.format("%s, %s, %s, %s, %s").encode(), history)
        conn.execute("UPDATE runs SET status = 'completed' WHERE run_id = 'r2'")
    yield url
    for _ in databases:  # drops it
        pass


async def _check(store: Store) -> None:
    await store.open()
    try:
        (r1, r2) = (await store.get_run("r1"), await store.get_run("r2"))
        assert r1 is not None and r2 is not None
        assert r1.trouble == Trouble(worker_losses=1, retries=2, rate_limited=1, reviews_waiting=1)
        assert r2.trouble == Trouble(worker_losses=1, retries=2, rate_limited=1)
    finally:
        await store.close()


async def test_sqlite_fills_the_counters_of_existing_runs(tmp_path: Path) -> None:
    await _check(SqliteStore(_old_sqlite(tmp_path)))


async def test_postgres_fills_the_counters_of_existing_runs(old_postgres: str) -> None:
    make: Callable[[str], Store] = PostgresStore
    await _check(make(old_postgres))
