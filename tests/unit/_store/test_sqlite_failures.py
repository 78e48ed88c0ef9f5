"""A SQLite store whose database fails: full, locked, corrupt, closed.

Every failure comes out as ``StoreError`` (never a bare ``sqlite3`` error),
every caller gets an answer (none is left waiting), and the store works again
once the cause is gone.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from keepgoing._store.records import StartRequest
from keepgoing._store.sqlite import SqliteStore
from keepgoing._store.sqlite import thread as sqlite_thread
from keepgoing.errors import StoreError

NOW = 1_000_000.0


def _request(i: int, size: int = 10) -> StartRequest:
    return StartRequest(
        run_id=f"run-{i}",
        workflow_id=f"wf-{i}",
        workflow_name="wf",
        input={"blob": "x" * size},
        task_queue="default",
        code_version="v1",
        now=NOW,
    )


def _pragma(store: SqliteStore, statement: str) -> Any:
    """Run a PRAGMA on the store's own connection (on its thread)."""
    return store._thread.call_sync(lambda c: c.execute(statement).fetchone(), write=False)


@pytest.fixture
async def store(tmp_path: Path) -> Any:
    opened = SqliteStore(str(tmp_path / "kg.db"))
    await opened.open()
    yield opened
    await opened.close()


async def test_a_full_disk_fails_the_writes_and_the_store_goes_on(store: SqliteStore) -> None:
    await store.start_run(_request(0))
    pages = _pragma(store, "PRAGMA page_count")[0]
    _pragma(store, f"PRAGMA max_page_count = {pages + 2}")  # as good as a full disk
    # Several writes at once share one transaction (savepoints): all of them answer.
    outcomes = await asyncio.gather(
        *(store.start_run(_request(i, size=20_000)) for i in range(1, 9)),
        return_exceptions=True,
    )
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert errors, "the database never filled up"
    for error in errors:
        assert type(error) is StoreError, repr(error)
        assert "full" in str(error)
    _pragma(store, "PRAGMA max_page_count = 1073741823")  # room again
    run = await store.start_run(_request(100, size=20_000))
    assert (await store.get_run(run.run_id)) == run
    written = [o for o in outcomes if not isinstance(o, BaseException)]
    for record in written:  # what was reported written is there
        assert await store.get_run(record.run_id) == record


async def test_a_database_locked_past_the_wait_fails_with_store_error(
    store: SqliteStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_thread, "LOCK_WAIT", 0.2)
    _pragma(store, "PRAGMA busy_timeout = 50")
    store._thread._wait_ms = 50  # what the thread sets back after a write on the caller's
    other = sqlite3.connect(str(tmp_path / "kg.db"), isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        with pytest.raises(StoreError, match="locked") as caught:
            await store.start_run(_request(1))
        assert not isinstance(caught.value, sqlite3.Error)
        assert await store.get_run("run-1") is None  # reads still work (WAL)
    finally:
        other.execute("ROLLBACK")
        other.close()
    await store.start_run(_request(1))
    assert (await store.get_run("run-1")) is not None


def _corrupt(path: Path) -> None:
    """Overwrite every page of the file but the first two (the header and schema)."""
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) > 8 * page
    for offset in range(2 * page, len(data), page):
        data[offset : offset + page] = b"\xa5" * page
    path.write_bytes(bytes(data))


async def test_a_database_corrupted_under_an_open_store_fails_with_store_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "kg.db"
    store = SqliteStore(str(path))
    await store.open()
    try:
        for i in range(50):
            await store.start_run(_request(i, size=3000))
        _pragma(store, "PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the file
        _pragma(store, "PRAGMA cache_size = 1")  # and read from it again
        _corrupt(path)
        with pytest.raises(StoreError, match="malformed") as caught:
            for i in range(50):
                await store.get_run(f"run-{i}")
                await store.read_history(f"run-{i}")
        assert not isinstance(caught.value, sqlite3.Error)
        with pytest.raises(StoreError, match="malformed"):
            await store.start_run(_request(99))
    finally:
        await store.close()
    with pytest.raises(StoreError, match="malformed"):  # and opening it again says so
        await SqliteStore(str(path)).open()


async def test_calls_racing_a_close_are_all_answered(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "kg.db"))
    await store.open()
    await store.start_run(_request(0))
    answers: list[object] = []
    started = threading.Barrier(5)

    def caller() -> None:
        async def calls() -> None:
            started.wait()
            while True:  # until the close answers it (a thread must never finish first)
                try:
                    answers.append(await store.get_run("run-0"))
                except StoreError as exc:
                    answers.append(exc)
                    return

        asyncio.run(calls())

    threads = [threading.Thread(target=caller) for _ in range(4)]
    for t in threads:
        t.start()
    started.wait()
    await store.close()
    for t in threads:
        t.join(timeout=20)
        assert not t.is_alive(), "a call was left waiting on a closed store"
    errors = [a for a in answers if isinstance(a, BaseException)]
    assert len(errors) == 4 and all("not open" in str(e) or "closed" in str(e) for e in errors)


async def test_an_in_memory_store_closed_says_so() -> None:
    store = SqliteStore(":memory:")
    await store.open()
    await store.start_run(_request(0))
    await store.close()
    with pytest.raises(StoreError, match="not open"):
        await store.get_run("run-0")


# -- calls run on the caller's thread when nothing else waits -------------------------
async def test_a_call_on_an_idle_loop_runs_here_and_is_committed_when_it_returns(
    store: SqliteStore, tmp_path: Path
) -> None:
    where = await store._write(lambda c: threading.current_thread().name)
    assert where == threading.current_thread().name  # no hop to the store thread
    run = await store.start_run(_request(1))
    other = sqlite3.connect(str(tmp_path / "kg.db"))
    try:  # another connection sees it at once: the call returned after its COMMIT
        row = other.execute("SELECT run_id FROM runs WHERE run_id = ?", (run.run_id,)).fetchone()
    finally:
        other.close()
    assert row == (run.run_id,)
    assert _pragma(store, "PRAGMA synchronous")[0] == 2  # FULL, on the one connection


async def test_calls_made_together_share_the_store_threads_group_commit(
    store: SqliteStore,
) -> None:
    where = await asyncio.gather(
        *(store._write(lambda c: threading.current_thread().name) for _ in range(20))
    )
    # Each of them but (perhaps) the last found others ready to run beside it.
    assert where.count("keepgoing-sqlite") >= 19, where


async def test_a_write_lock_held_elsewhere_is_waited_for_on_the_store_thread(
    store: SqliteStore, tmp_path: Path
) -> None:
    other = sqlite3.connect(str(tmp_path / "kg.db"), isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        write = asyncio.create_task(store.start_run(_request(1)))
        for _ in range(5):
            await asyncio.sleep(0)  # this loop runs on: the write waits elsewhere
        assert not write.done()
        other.execute("ROLLBACK")
        run = await write
    finally:
        other.close()
    assert await store.get_run(run.run_id) == run
    assert _pragma(store, "PRAGMA busy_timeout")[0] == 30_000  # left as it was
