"""The embedded default store: one SQLite file in WAL mode.

Durability: ``synchronous=FULL`` by default (a committed step survives a power
loss); ``?synchronous=normal`` in the URL trades that for speed while staying
durable against a process crash. A commit that only takes or extends a
lease is never fsynced (see ``sqlite.thread``). All access goes through one thread with
group commit (``sqlite.thread``); other processes are woken through a
:class:`~keepgoing._store.doorbell.Doorbell`.
"""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any

from keepgoing._clock import system_clock
from keepgoing._store.doorbell import Doorbell
from keepgoing._store.liveness import FileTokens, file_token_state
from keepgoing._store.migrate import check_version, load_migrations
from keepgoing._store.sql.rows import value
from keepgoing._store.sql.store import SqlStore
from keepgoing._store.sqlite.inline import InlineSqlite
from keepgoing._store.sqlite.open import make_folder, memory_copy, open_error
from keepgoing._store.sqlite.thread import BUSY_TIMEOUT_MS, SqliteThread
from keepgoing._store.startup import StoreUnavailableError

__all__ = ["SqliteStore"]

OPEN_BUSY_TIMEOUT_MS = 1_000
FLOCK = "flock:"  # a liveness token that is a lock file (see ``liveness``)


class SqliteStore(SqlStore):
    """A :class:`Store` on one SQLite file (``path``), or in memory with ``":memory:"``."""

    def __init__(self, path: str, *, synchronous: str = "full", url: str | None = None) -> None:
        if path.startswith("sqlite:"):
            raise ValueError(f"SqliteStore takes a file path, not a store URL: {path!r}")
        if synchronous.lower() not in ("full", "normal"):
            raise ValueError(f"synchronous must be 'full' or 'normal', not {synchronous!r}")
        self.path = path
        self.synchronous = synchronous.upper()
        self.url = url or f"sqlite:///{path}"
        key = path if path == ":memory:" else os.path.abspath(path)
        self._bell = Doorbell(f"{key}:{id(self) if path == ':memory:' else ''}")
        # In memory there is no disk to wait for: calls run on the caller's thread.
        backend = InlineSqlite if path == ":memory:" else SqliteThread
        self._thread: SqliteThread | InlineSqlite = backend(self._connect, self._bell.ring)
        self._liveness = FileTokens(self._bell.folder + ".live")
        self._opened = False

    # -- lifecycle -------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        if self.path == ":memory:":
            pragmas = ("PRAGMA foreign_keys = ON", f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            return memory_copy(self._migrated, pragmas)
        make_folder(self.path)
        return self._migrated()

    def _migrated(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise open_error(exc, self.path) from None
        try:
            # A short wait for locks while migrating: a migration in another process
            # that takes longer is waited out by the caller, which says so in a line.
            conn.execute(f"PRAGMA busy_timeout = {OPEN_BUSY_TIMEOUT_MS}")
            # Before the first table: a new file gives freed pages back in steps
            # (the retention sweep's PRAGMA incremental_vacuum); an old one keeps its mode.
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            conn.execute("PRAGMA foreign_keys = ON")
            _migrate(conn, self.url)
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        except sqlite3.Error as exc:
            conn.close()
            raise open_error(exc, self.path) from None
        except BaseException:
            conn.close()
            raise
        return conn

    async def open(self) -> None:
        self.open_sync()

    def open_sync(self) -> None:
        """Open, waiting up to the busy timeout (30 s) for a lock another process holds."""
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                self.try_open_sync()
                return
            except StoreUnavailableError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)

    def try_open_sync(self) -> None:
        """One attempt to open (see :class:`~keepgoing._store.startup.Opening`).

        Raises:
            StoreUnavailableError: the file is locked or its folder is not there yet.
            StoreError: it cannot be opened (read-only, not a database, too new).
        """
        if not self._opened:
            self._thread.start()
            self._opened = True

    async def close(self) -> None:
        self.close_sync()

    def close_sync(self) -> None:
        if self._opened:
            self._thread.stop()
            self._bell.close()
            self._opened = False
        self._liveness.release_all()

    async def _read(self, op: Any) -> Any:
        return await self._thread.call(op, write=False)

    async def _write(self, op: Any, notify: Any = False) -> Any:
        return await self._thread.call(op, write=True, notify=notify)

    async def _write_lease(self, op: Any, notify: Any = False) -> Any:
        return await self._thread.call(op, write=True, notify=notify, durable=False)

    def _refresh_liveness(self) -> None:
        self._liveness.refresh()

    def _probe_liveness(self, conn: Any, owners: list[tuple[str, str]]) -> dict[str, bool | None]:
        return {
            owner: file_token_state(token[len(FLOCK) :]) if token.startswith(FLOCK) else None
            for owner, token in owners
        }

    async def wait_for_change(self, timeout: float, key: object | None = None) -> None:
        await self._bell.wait(timeout, key)

    async def hold_liveness(self, worker_id: str) -> str | None:
        return FLOCK + self._liveness.hold(worker_id)

    async def release_liveness(self, worker_id: str) -> None:
        self._liveness.release(worker_id)


def _migrate(conn: sqlite3.Connection, where: str) -> None:
    known = load_migrations("sqlite")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS keepgoing_schema ("
        "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
    )
    conn.execute("BEGIN IMMEDIATE")
    try:
        applied = int(value(conn, "SELECT COALESCE(MAX(version), 0) FROM keepgoing_schema"))
        check_version(applied, known, where)
        for migration in known:
            if migration.version > applied:
                for statement in _statements(migration.sql):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO keepgoing_schema (version, name, applied_at) VALUES (?, ?, ?)",
                    (migration.version, migration.name, system_clock.now()),
                )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _statements(sql: str) -> list[str]:
    lines = [line for line in sql.splitlines() if not line.strip().startswith("--")]
    statements, pending = [], ""
    for piece in "\n".join(lines).split(";"):
        pending += piece + ";"
        # A trigger's BEGIN ... END holds semicolons: keep going until it is whole.
        if sqlite3.complete_statement(pending):
            if pending.strip(" \n;"):
                statements.append(pending.strip())
            pending = ""
    if pending.strip(" \n;"):
        statements.append(pending.strip().rstrip(";"))
    return statements
