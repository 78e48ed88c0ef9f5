"""Which start-up failures are waited out, and what the messages show of a DSN."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

import psycopg
import pytest

from keepgoing._store.postgres import connect_error
from keepgoing._store.sqlite import SqliteStore
from keepgoing._store.startup import Opening, StoreUnavailableError
from keepgoing._store.url import redact_url
from keepgoing.errors import StoreError

WHERE = "postgresql://app:***@db:5432/kg"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://app:s3cret@db:5432/kg", "postgresql://app:***@db:5432/kg"),
        (
            "postgresql://app@db/kg?password=s3cret&sslmode=require",
            "postgresql://app@db/kg?password=***&sslmode=require",
        ),
        ("postgresql://app@db/kg?sslmode=require", "postgresql://app@db/kg?sslmode=require"),
        ("sqlite:///relative.db", "sqlite:///relative.db"),
        ("sqlite:////abs/kg.db?synchronous=normal", "sqlite:////abs/kg.db?synchronous=normal"),
    ],
)
def test_redact_url_hides_every_password(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@pytest.mark.parametrize(
    "message",
    [
        'connection to server at "db" (10.0.0.5), port 5432 failed: Connection refused',
        'connection to server at "db", port 5432 failed: FATAL:  the database system is '
        "starting up",
        'connection to server at "db", port 5432 failed: FATAL:  the database system is '
        "shutting down",
        'connection to server at "db", port 5432 failed: FATAL:  sorry, too many clients already',
        'could not translate host name "db" to address: Name or service not known',
        'connection to server at "db", port 5432 failed: timeout expired',
    ],
)
def test_a_database_that_may_come_back_is_waited_for(message: str) -> None:
    error = connect_error(psycopg.OperationalError("connection failed: " + message), WHERE)
    assert isinstance(error, StoreUnavailableError)
    assert str(error).startswith(f"could not connect to PostgreSQL at {WHERE}: ")
    assert "connection failed:" not in str(error)


@pytest.mark.parametrize(
    "message",
    [
        'FATAL:  password authentication failed for user "app"',
        'FATAL:  database "kg" does not exist',
        'FATAL:  role "app" does not exist',
        'FATAL:  no pg_hba.conf entry for host "10.0.0.9", user "app", database "kg"',
        "fe_sendauth: no password supplied",
        'FATAL:  role "app" is not permitted to log in',
        'FATAL:  permission denied for database "kg"',
    ],
)
def test_a_refusal_that_retrying_cannot_fix_is_not_waited_for(message: str) -> None:
    error = connect_error(
        psycopg.OperationalError(f"connection failed: connection to server failed: {message}"),
        WHERE,
    )
    assert type(error) is StoreError
    assert WHERE in str(error) and "retrying cannot fix this" in str(error)


async def test_opening_waits_for_a_locked_sqlite_file_and_logs_twice(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "kg.db"
    lock = sqlite3.connect(db, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    store = SqliteStore(str(db))
    opening = Opening(store)
    caplog.set_level(logging.WARNING, "keepgoing.store")
    try:
        assert not await opening.try_once()
        assert opening.waiting and "is locked by another process" in (opening.reason or "")
        waiting = asyncio.create_task(opening.wait())
        await asyncio.sleep(0)  # its next attempt may or may not still find the lock
        lock.execute("COMMIT")
        assert await asyncio.wait_for(waiting, 30)
        assert not opening.waiting
        assert await store.list_runs() == []
    finally:
        lock.close()
        await store.close()
    lines = [r.getMessage() for r in caplog.records]
    assert sum("waiting for the store" in m for m in lines) == 1, lines
    assert sum("connected to the store" in m for m in lines) == 1, lines


async def test_a_stop_ends_the_waiting(tmp_path: Path) -> None:
    db = tmp_path / "kg.db"
    lock = sqlite3.connect(db, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    stop = asyncio.Event()
    store = SqliteStore(str(db))
    try:
        waiting = asyncio.create_task(Opening(store).wait(stop))
        stop.set()
        assert await asyncio.wait_for(waiting, 30) is False
    finally:
        lock.close()
        await store.close()


async def test_a_file_that_is_not_a_database_fails_at_once(tmp_path: Path) -> None:
    db = tmp_path / "kg.db"
    db.write_bytes(b"this is not a database, it is a text file of some length\n" * 20)
    with pytest.raises(StoreError, match="is not a SQLite database") as raised:
        await Opening(SqliteStore(str(db))).try_once()
    assert not isinstance(raised.value, StoreUnavailableError)


async def test_a_failed_sqlite_open_can_be_tried_again(tmp_path: Path) -> None:
    db = tmp_path / "kg.db"
    lock = sqlite3.connect(db, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    store = SqliteStore(str(db))
    try:
        with pytest.raises(StoreUnavailableError):
            store.try_open_sync()
        lock.execute("COMMIT")
        store.try_open_sync()
        assert await store.list_runs() == []
    finally:
        lock.close()
        await store.close()
