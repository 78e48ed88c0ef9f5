"""Group commit on PostgreSQL: the writes that queue up while a transaction runs share the next.

A worker that claims 64 runs commits 64 activations at once; a client that
starts runs from many threads starts them at once. Each would be a
transaction of its own: a ``BEGIN``, a ``COMMIT``, a WAL flush and two
thread hand-offs. Instead a few writer threads each take every write queued
so far and run them in one transaction, then release their callers after
the ``COMMIT`` (as SQLite's single thread does, without its savepoints).

The batch is optimistic. If any of its writes fails (a typed error such as
a duplicate workflow id, a lock conflict, a lost connection), the batch is
rolled back and each write runs again alone, with the runner's own retry
rules, so one failing write never fails another. A batch waits at most
:data:`LOCK_WAIT` for a row lock (``lock_timeout``): writes batched in one
process may lock rows in an order another process's batch does not, and a
short wait followed by one write at a time breaks any such cycle quickly.

If the connection drops while ``COMMIT`` is under way with no answer, no
write of the batch is reported as done (see ``_postgres_pool``).

Reads are grouped the same way, for the hand-offs alone: a batch of reads
runs one after another on one connection, each statement on its own (the
pool's connections are in autocommit mode), so 64 claimed runs read their
histories in one hand-off, not 64.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg

from keepgoing._store.postgres.sql import PgConnection, begin, rollback
from keepgoing.errors import StoreError

if TYPE_CHECKING:
    from keepgoing._store.postgres.pool import Op, PgRunner

__all__ = ["GroupWriter", "LOCK_WAIT"]

LOCK_WAIT = "100ms"
_BATCH = 64


@dataclass
class _Call:
    op: Op
    notify: Any
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Any]


class GroupWriter:
    """``threads`` threads that take queued calls in batches (see the module docstring):
    writes (one transaction per batch), or reads (``write=False``: autocommit)."""

    def __init__(self, runner: PgRunner, threads: int, *, write: bool = True) -> None:
        self._runner = runner
        self._writes = write
        self._queue: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        kind = "write" if write else "read"
        self._threads = [
            threading.Thread(target=self._main, name=f"keepgoing-pg-{kind}-{i}", daemon=True)
            for i in range(threads)
        ]
        for thread in self._threads:
            thread.start()

    async def submit(self, op: Op, notify: Any) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._queue.put(_Call(op, notify, loop, future))
        return await future

    def close(self) -> None:
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join()
        while True:  # calls that came in after the stop signal fail rather than hang
            try:
                late = self._queue.get_nowait()
            except queue.Empty:
                return
            if late is not None:
                _deliver(late, (False, StoreError("the PostgreSQL store is closed")))

    # -- the writer threads -----------------------------------------------------------
    def _main(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < _BATCH:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._queue.put(None)  # another writer's stop signal, or ours later
                    break
                batch.append(item)
            self._run(batch)

    def _run(self, batch: list[_Call]) -> None:
        if len(batch) > 1:
            try:
                outcomes = self._together(batch)
            except Exception:  # _Apart, or no connection at all: each alone decides
                pass
            else:
                for write, outcome in zip(batch, outcomes, strict=True):
                    _deliver(write, outcome)
                return
        for write in batch:  # alone, with the runner's retry rules
            try:
                value = self._runner.call_sync(write.op, write=self._writes, notify=write.notify)
            except BaseException as exc:  # handed to the caller; the thread must live on
                _deliver(write, (False, exc))
            else:
                _deliver(write, (True, value))

    def _together(self, batch: list[_Call]) -> list[tuple[bool, Any]]:
        """One transaction for the whole batch; :class:`_Apart` to run them one by one."""
        runner = self._runner
        raw = runner.connection()
        if not self._writes:
            return self._read_together(raw, batch)
        committing = False
        try:
            with raw.pipeline() as pipeline:
                begin(raw)
                raw.execute(f"SET LOCAL lock_timeout = '{LOCK_WAIT}'")
                conn = PgConnection(raw, pipeline)
                results = [write.op(conn) for write in batch]
                wakes = any(
                    bool(w.notify(r) if callable(w.notify) else w.notify)
                    for w, r in zip(batch, results, strict=True)
                )
                if wakes:
                    raw.execute(runner.notify_sql)
                committing = True
                raw.execute("COMMIT")  # answered at the pipeline's closing sync
        except Exception as exc:
            rollback(raw)
            lost_answer = isinstance(exc, psycopg.Error) and exc.sqlstate is None
            if committing and lost_answer and (raw.broken or raw.closed):
                runner.outage.down(exc)
                message = (
                    f"lost the connection to PostgreSQL at {runner.where} while committing; "
                    "the outcome is unknown, so it is not reported as done"
                )
                return [(False, StoreError(message)) for _ in batch]
            raise _Apart from exc
        finally:
            runner.release(raw)
        runner.outage.up()
        if wakes:
            runner.committed()
        return [(True, result) for result in results]

    def _read_together(
        self, raw: psycopg.Connection[Any], batch: list[_Call]
    ) -> list[tuple[bool, Any]]:
        try:
            conn = PgConnection(raw)
            results = [write.op(conn) for write in batch]
        except Exception as exc:
            raise _Apart from exc  # each alone, with the runner's rules for errors
        finally:
            self._runner.release(raw)
        self._runner.outage.up()
        return [(True, result) for result in results]


class _Apart(Exception):
    """The batch could not commit as one: run its writes one at a time."""


def _deliver(write: _Call, outcome: tuple[bool, Any]) -> None:
    ok, value = outcome
    future = write.future

    def settle() -> None:
        if future.done():
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    with contextlib.suppress(RuntimeError):  # the caller's loop has closed
        write.loop.call_soon_threadsafe(settle)
