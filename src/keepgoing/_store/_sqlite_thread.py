"""One thread, one SQLite connection, group commit.

Every call is queued to a single thread that owns the connection. The
thread takes every queued call at once: reads run as they are, writes share
one ``BEGIN IMMEDIATE`` transaction, each inside its own ``SAVEPOINT``, so
one failing request rolls back only itself. Waiters are released after the
``COMMIT``; a commit failure fails every write of the batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from keepgoing.errors import StoreError

__all__ = ["SqliteThread"]

T = TypeVar("T")
Op = Callable[[sqlite3.Connection], Any]
_BATCH = 512


@dataclass
class _Request:
    op: Op
    write: bool
    notify: bool | Callable[[Any], bool]
    loop: asyncio.AbstractEventLoop | None
    future: asyncio.Future[Any] | None
    done: threading.Event | None = None
    outcome: list[Any] = field(default_factory=list)


class SqliteThread:
    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        on_commit: Callable[[], None],
    ) -> None:
        self._connect = connect
        self._on_commit = on_commit
        self._queue: queue.SimpleQueue[_Request | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._main, name="keepgoing-sqlite", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread = None
            raise self._error

    def stop(self) -> None:
        if self._thread is None:
            return
        self._queue.put(None)
        self._thread.join()
        self._thread = None

    async def call(
        self, op: Op, *, write: bool, notify: bool | Callable[[Any], bool] = False
    ) -> Any:
        if self._thread is None:
            raise StoreError("the SQLite store is not open; call `await store.open()` first")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._queue.put(_Request(op, write, notify, loop, future))
        return await future

    def call_sync(
        self, op: Op, *, write: bool, notify: bool | Callable[[Any], bool] = False
    ) -> Any:
        """The same from a thread with no event loop (start-up, CLI)."""
        if self._thread is None:
            raise StoreError("the SQLite store is not open")
        request = _Request(op, write, notify, None, None, threading.Event())
        self._queue.put(request)
        assert request.done is not None
        request.done.wait()
        ok, value = request.outcome
        if not ok:
            raise value
        return value

    # -- the thread ------------------------------------------------------------
    def _main(self) -> None:
        try:
            conn = self._connect()
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            while True:
                first = self._queue.get()
                if first is None:
                    return
                batch = [first]
                stop = False
                while len(batch) < _BATCH:
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if item is None:
                        stop = True
                        break
                    batch.append(item)
                self._run_batch(conn, batch)
                if stop:
                    return
        finally:
            conn.close()

    def _run_batch(self, conn: sqlite3.Connection, batch: list[_Request]) -> None:
        results: list[tuple[_Request, bool, Any]] = []
        writes = [r for r in batch if r.write]
        for request in batch:
            if not request.write:
                results.append((request, *_attempt(request.op, conn)))
        if writes:
            written = self._run_writes(conn, writes)
            results.extend(written)
            if any(ok and _wants_notify(r, value) for r, ok, value in written):
                with contextlib.suppress(Exception):
                    self._on_commit()
        for request, ok, value in results:
            _resolve(request, ok, value)

    def _run_writes(
        self, conn: sqlite3.Connection, writes: list[_Request]
    ) -> list[tuple[_Request, bool, Any]]:
        try:
            _begin_immediate(conn)
        except sqlite3.Error as exc:
            error = StoreError(f"could not start a SQLite write transaction: {exc}")
            return [(r, False, error) for r in writes]
        done: list[tuple[_Request, bool, Any]] = []
        alone = len(writes) == 1  # no savepoint needed: a failure rolls back everything
        for request in writes:
            if not alone:
                conn.execute("SAVEPOINT op")
            ok, value = _attempt(request.op, conn)
            if alone:
                if not ok:
                    conn.execute("ROLLBACK")
                    return [(request, ok, value)]
            else:
                if not ok:
                    conn.execute("ROLLBACK TO op")
                conn.execute("RELEASE op")
            done.append((request, ok, value))
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            error = StoreError(f"SQLite commit failed: {exc}")
            return [(r, False, error) for r in writes]
        return done


def _wants_notify(request: _Request, value: Any) -> bool:
    return request.notify(value) if callable(request.notify) else request.notify


def _begin_immediate(conn: sqlite3.Connection) -> None:
    # busy_timeout covers most contention; this loop covers the rest.
    deadline = time.monotonic() + 30.0
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)


def _attempt(op: Op, conn: sqlite3.Connection) -> tuple[bool, Any]:
    try:
        return True, op(conn)
    except sqlite3.Error as exc:
        return False, StoreError(f"SQLite error: {exc}")
    except Exception as exc:  # a typed error raised by the op itself
        return False, exc


def _resolve(request: _Request, ok: bool, value: Any) -> None:
    if request.done is not None:
        request.outcome[:] = [ok, value]
        request.done.set()
        return
    assert request.loop is not None and request.future is not None
    future = request.future

    def deliver() -> None:
        if future.done():
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    with contextlib.suppress(RuntimeError):  # the caller's loop has closed
        request.loop.call_soon_threadsafe(deliver)
