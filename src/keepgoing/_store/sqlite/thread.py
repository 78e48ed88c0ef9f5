"""One thread, one SQLite connection, group commit.

Every call is queued to a single thread that owns the connection. The
thread takes every queued call at once: reads run as they are, writes share
one ``BEGIN IMMEDIATE`` transaction, each inside its own ``SAVEPOINT``, so
one failing request rolls back only itself. Waiters are released after the
``COMMIT``; a commit failure fails every write of the batch.

No ``sqlite3`` error leaves this module: an operation's error becomes a
:class:`~keepgoing.errors.StoreError`, or a
:class:`~keepgoing.errors.PayloadError` for a value SQLite refuses
(:mod:`keepgoing._store.refused` names the field). A batch that fails
outside its operations (a savepoint or rollback on a broken database) fails
its waiters and the thread goes on; requests still queued when the store
closes are failed, never left waiting.

The hand-off to the thread and back costs more than a small commit, so a
call runs on the caller's own thread instead when that changes nothing for
anyone else: the caller's event loop has nothing else ready to run (nobody
waits behind it, and nobody could have joined a group commit), nothing is
queued for the thread, and the thread is idle. Such a call takes the
connection under the same lock the thread takes for a batch, and is exactly
a batch of one: the same transaction, the same ``COMMIT`` with the same
``synchronous`` setting, the same error mapping, the same wake-up after
the commit. A write lock another process holds is not waited for there
(that would stall the caller's loop): the call goes to the thread, which
waits as it always did.

A write marked ``durable=False`` only takes or extends a lease (a run's
activation claim, a heartbeat, a released activation). A transaction made
only of such writes commits with ``synchronous=NORMAL``: no fsync of its
own. It still survives a crash of any process (WAL frames are in the
operating system's cache once ``COMMIT`` returns), and the next durable
commit's fsync flushes it too, because WAL frames reach the disk in order.
Only a power loss or an operating-system crash can take it back, and that
also ends every process on the machine that could hold the lease (a SQLite
file is shared by one machine's processes only): the run is claimable again,
exactly as after its lease expired. A batch with any durable write is
committed as the connection is set.
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

from keepgoing._store.refused import RefusedValueError, refused_by_sqlite
from keepgoing._store.sql.rows import value as single_value
from keepgoing.errors import KeepgoingError, StoreError

__all__ = ["SqliteThread"]

T = TypeVar("T")
Op = Callable[[sqlite3.Connection], Any]
_BATCH = 512
#: The connection's busy timeout (``sqlite.store`` sets it).
BUSY_TIMEOUT_MS = 30_000
#: How long a write waits for another connection's write lock, beyond busy_timeout.
LOCK_WAIT = 30.0
#: ``PRAGMA synchronous`` levels: NORMAL syncs at checkpoints only, FULL at every commit.
_NORMAL = 1


@dataclass
class _Request:
    op: Op
    write: bool
    notify: bool | Callable[[Any], bool]
    loop: asyncio.AbstractEventLoop | None
    future: asyncio.Future[Any] | None
    done: threading.Event | None = None
    outcome: list[Any] = field(default_factory=list)
    durable: bool = True


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
        # Held while a request is queued and while closing: nothing is queued
        # behind the stop signal, so every request is answered.
        self._gate = threading.Lock()
        # Held by whoever uses the connection: the thread for a batch, or a caller
        # running its call on its own thread (``_call_here``).
        self._conn_lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._level = 0  # the connection's own ``PRAGMA synchronous`` (2 is FULL)
        # The connection's own ``PRAGMA busy_timeout``: a write run on the caller's
        # thread starts without waiting (0); the thread and every read wait this long.
        self._wait_ms = 0
        # What ``synchronous`` and ``busy_timeout`` are set to now: each is set only
        # when the kind of call changes (``_set``).
        self._pragmas: dict[str, int] = {}

    def start(self) -> None:
        if self._thread is not None:
            return
        self._ready.clear()  # a failed start may be tried again
        self._error = None
        self._thread = threading.Thread(target=self._main, name="keepgoing-sqlite", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            self._thread = None
            raise self._error

    def stop(self) -> None:
        with self._gate:
            thread, self._thread = self._thread, None
            if thread is None:
                return
            self._queue.put(None)
        thread.join()
        _fail_queued(self._queue, StoreError("the SQLite store was closed"))

    async def call(
        self,
        op: Op,
        *,
        write: bool,
        notify: bool | Callable[[Any], bool] = False,
        durable: bool = True,
    ) -> Any:
        loop = asyncio.get_running_loop()
        if _alone_on(loop):
            done = self._call_here(op, write, notify, durable)
            if done is not None:
                ok, value = done
                if not ok:
                    raise value
                return value
        future: asyncio.Future[Any] = loop.create_future()
        with self._gate:
            if self._thread is None:
                raise StoreError("the SQLite store is not open; call `await store.open()` first")
            self._queue.put(_Request(op, write, notify, loop, future, durable=durable))
        return await future

    def call_sync(
        self,
        op: Op,
        *,
        write: bool,
        notify: bool | Callable[[Any], bool] = False,
        durable: bool = True,
    ) -> Any:
        """The same from a thread with no event loop (start-up, CLI)."""
        request = _Request(op, write, notify, None, None, threading.Event(), durable=durable)
        with self._gate:
            if self._thread is None:
                raise StoreError("the SQLite store is not open")
            self._queue.put(request)
        assert request.done is not None
        request.done.wait()
        ok, value = request.outcome
        if not ok:
            raise value
        return value

    def _call_here(
        self, op: Op, write: bool, notify: bool | Callable[[Any], bool], durable: bool
    ) -> tuple[bool, Any] | None:
        """Run the call on this thread as a batch of one, or None if it must go to
        the thread (busy, queued work, closed, or a write lock held elsewhere)."""
        if not self._conn_lock.acquire(blocking=False):
            return None
        try:
            conn = self._conn
            if conn is None or not self._queue.empty():
                return None
            if not write:
                self._patience(conn, True)
                return _attempt(op, conn)
            self._patience(conn, False)
            try:
                self._durability(conn, not durable)
            except sqlite3.Error as exc:
                return False, StoreError(f"could not set SQLite's synchronous level: {exc}")
            done = _write_here(conn, op)
        finally:
            self._conn_lock.release()
        if done is not None and done[0] and _wants(notify, done[1]):
            with contextlib.suppress(Exception):
                self._on_commit()
        return done

    # -- the thread ------------------------------------------------------------
    def _main(self) -> None:
        try:
            conn = self._connect()
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        with self._conn_lock:
            self._conn = conn
            self._level = _synchronous(conn)
            self._wait_ms = int(single_value(conn, "PRAGMA busy_timeout"))
            self._pragmas = {"synchronous": self._level, "busy_timeout": self._wait_ms}
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
                try:
                    with self._conn_lock:
                        self._run_batch(conn, batch)
                except BaseException as exc:  # the thread outlives a broken batch
                    error = StoreError(f"SQLite error: {exc}")
                    for request in batch:
                        _resolve(request, False, error)  # a resolved one is not resolved twice
                    if not isinstance(exc, Exception):
                        raise
                if stop:
                    return
        finally:
            with self._conn_lock:
                self._conn = None
                with contextlib.suppress(sqlite3.Error):
                    conn.close()

    def _set(self, conn: sqlite3.Connection, pragma: str, value: int) -> None:
        """``PRAGMA pragma = value`` unless it is so already (the caller holds the
        connection's lock)."""
        if self._pragmas.get(pragma) != value:
            conn.execute(f"PRAGMA {pragma} = {value}")
            self._pragmas[pragma] = value

    def _patience(self, conn: sqlite3.Connection, patient: bool) -> None:
        """Set the connection's busy timeout to its own (``patient``) or to 0. A failure
        to set it is the caller's: its next statement fails the same way."""
        with contextlib.suppress(sqlite3.Error):
            self._set(conn, "busy_timeout", self._wait_ms if patient else 0)

    def _run_batch(self, conn: sqlite3.Connection, batch: list[_Request]) -> None:
        self._patience(conn, True)
        results: list[tuple[_Request, bool, Any]] = []
        writes = [r for r in batch if r.write]
        for request in batch:
            if not request.write:
                results.append((request, *_attempt(request.op, conn)))
        if writes:
            self._durability(conn, not any(r.durable for r in writes))
            written = self._run_writes(conn, writes)
            results.extend(written)
            if any(ok and _wants_notify(r, value) for r, ok, value in written):
                with contextlib.suppress(Exception):
                    self._on_commit()
        for request, ok, value in results:
            _resolve(request, ok, value)

    def _durability(self, conn: sqlite3.Connection, lease_only: bool) -> None:
        """Before a write transaction: with ``lease_only``, commit it without an fsync
        (``synchronous=NORMAL``) if the connection is set to sync more than that; else
        as the connection is set. Set only when it changes (the caller holds the
        connection's lock); a failure to set it is the transaction's own."""
        self._set(conn, "synchronous", min(self._level, _NORMAL) if lease_only else self._level)

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
            try:
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
            except sqlite3.Error as exc:
                # The transaction cannot go on (the database broke under it): none of
                # the batch is committed, so every write of it fails.
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                error = StoreError(f"SQLite error: {exc}")
                return [(r, False, error) for r in writes]
            done.append((request, ok, value))
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            error = StoreError(f"SQLite commit failed: {exc}")
            return [(r, False, error) for r in writes]
        return done


def _synchronous(conn: sqlite3.Connection) -> int:
    return int(single_value(conn, "PRAGMA synchronous"))


def _wants_notify(request: _Request, value: Any) -> bool:
    return _wants(request.notify, value)


def _wants(notify: bool | Callable[[Any], bool], value: Any) -> bool:
    return notify(value) if callable(notify) else notify


def _alone_on(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether nothing else is ready to run on ``loop`` (asyncio's own loop keeps its
    ready callbacks in ``_ready``; another loop type is never run on)."""
    ready = getattr(loop, "_ready", None)
    return ready is not None and len(ready) == 0


def _write_here(conn: sqlite3.Connection, op: Op) -> tuple[bool, Any] | None:
    """One write transaction without waiting for another process's write lock (the
    connection's busy timeout is 0 here): None if that lock is held (nothing was
    done), else the outcome. Once ``BEGIN IMMEDIATE`` holds the write lock of the
    WAL, no statement of the transaction waits for another connection."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            return None
        return False, StoreError(f"could not start a SQLite write transaction: {exc}")
    except sqlite3.Error as exc:
        return False, StoreError(f"could not start a SQLite write transaction: {exc}")
    try:
        ok, value = _attempt(op, conn)
        if not ok:
            conn.execute("ROLLBACK")
            return ok, value
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        return False, StoreError(f"SQLite commit failed: {exc}")
    return True, value


def _begin_immediate(conn: sqlite3.Connection) -> None:
    # busy_timeout covers most contention; this loop covers the rest.
    deadline = time.monotonic() + LOCK_WAIT
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
    except KeepgoingError as exc:  # a typed error raised by the op itself
        return False, exc
    except (sqlite3.Error, ValueError, TypeError, OverflowError) as exc:
        # Values are checked before they get here (keepgoing._payload); this is the
        # backstop for one that was not, such as text with a lone surrogate: the
        # store method that called names the field (keepgoing._store.refused).
        if refused_by_sqlite(exc):
            return False, RefusedValueError("SQLite", exc)
        if isinstance(exc, sqlite3.Error):
            return False, StoreError(f"SQLite error: {exc}")
        return False, exc
    except Exception as exc:
        return False, exc


def _fail_queued(requests: queue.SimpleQueue[_Request | None], error: StoreError) -> None:
    while True:
        try:
            request = requests.get_nowait()
        except queue.Empty:
            return
        if request is not None:
            _resolve(request, False, error)


def _resolve(request: _Request, ok: bool, value: Any) -> None:
    if request.done is not None:
        if request.done.is_set():
            return
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
