"""An in-memory SQLite database, used on the caller's own thread.

A database in memory (``sqlite://``, ``memory://``, every direct call) waits
for no disk, so a hop to a store thread (``sqlite.thread``) would cost more
than the statements it runs. Each call runs at once under a lock, a write in
its own ``BEGIN IMMEDIATE`` transaction, with the same error mapping as the
thread; then it yields to the event loop once, as a call to the thread does,
so a caller that loops over store calls still lets other tasks run.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable
from typing import Any

from keepgoing._store.sqlite.thread import Op, _attempt, _begin_immediate
from keepgoing.errors import StoreError

__all__ = ["InlineSqlite"]


class InlineSqlite:
    """The interface of :class:`~keepgoing._store.sqlite.thread.SqliteThread`,
    without the thread."""

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        on_commit: Callable[[], None],
    ) -> None:
        self._connect = connect
        self._on_commit = on_commit
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def start(self) -> None:
        with self._lock:
            if self._conn is None:
                self._conn = self._connect()

    def stop(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    async def call(
        self,
        op: Op,
        *,
        write: bool,
        notify: bool | Callable[[Any], bool] = False,
        durable: bool = True,  # in memory, nothing is synced either way
    ) -> Any:
        value = self.call_sync(op, write=write, notify=notify)
        await asyncio.sleep(0)
        return value

    def call_sync(
        self,
        op: Op,
        *,
        write: bool,
        notify: bool | Callable[[Any], bool] = False,
        durable: bool = True,
    ) -> Any:
        with self._lock:
            conn = self._conn
            if conn is None:
                raise StoreError("the SQLite store is not open; call `await store.open()` first")
            ok, value = _write(conn, op) if write else _attempt(op, conn)
        if not ok:
            raise value
        if write and (notify(value) if callable(notify) else notify):
            with contextlib.suppress(Exception):
                self._on_commit()
        return value


def _write(conn: sqlite3.Connection, op: Op) -> tuple[bool, Any]:
    try:
        _begin_immediate(conn)
    except sqlite3.Error as exc:
        return False, StoreError(f"could not start a SQLite write transaction: {exc}")
    ok, value = _attempt(op, conn)
    if not ok:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        return False, value
    try:
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        return False, StoreError(f"SQLite commit failed: {exc}")
    return True, value
