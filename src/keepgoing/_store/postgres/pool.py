"""Pooled PostgreSQL connections that run the shared op functions.

Every store call is an op function (one of the shared ``keepgoing._store.sql``
functions) handed to a few threads that own no connection of their own: they take
one from a ``psycopg_pool.ConnectionPool`` per batch (``postgres/group.py``).
The connections are in autocommit mode. Reads run so, one statement each;
writes run in a transaction whose statements are pipelined (``PgConnection``),
``BEGIN`` to ``COMMIT``, and which sends ``NOTIFY`` before its ``COMMIT`` when
a write made work for others (``pg_notify`` is transactional, so listeners
hear of a change only once it is visible). Writes that queue up together share
one transaction (group commit).

The ``BEGIN`` is a statement of its own, queued in the pipeline like the rest
(``begin`` in ``postgres/sql.py``): psycopg's implicit one, outside autocommit
mode, syncs the pipeline before the first statement is sent, a round trip of
its own. So a write waits for the server only where it reads an answer and at
its ``COMMIT``.

Why threads and sync connections rather than ``AsyncConnectionPool``: the
queries exist once, as sync functions over a DB-API connection, shared with
SQLite; an async query layer would be a second copy of every query. A store
is also used from several event loops (the client's portal thread,
``asyncio.run`` in-process, test threads), and an async pool belongs to the
loop that opened it. The hand-off to a thread costs tens of microseconds,
and grouping pays it once per batch, not once per call.

Faults, and what the caller sees (:meth:`PgRunner.call_sync`, one call alone):

* **Lock conflicts** (SQLSTATE 40001 serialization failure, 40P01 deadlock)
  and **unique violations** (23505: a concurrent insert of the same key,
  such as two starts of one workflow id) roll back and run the op again,
  after a jittered backoff. On the second run the op sees the other
  transaction's rows and answers as it would have, had it come second.
* **A lost connection, or a server that refuses** (shutting down, out of
  resources) before the transaction committed: nothing was written. The op
  runs again on a fresh connection once one can be had, with jittered
  exponential backoff, for up to ``outage_timeout`` seconds; then
  :class:`~keepgoing.errors.StoreError`.
* **A ``COMMIT`` that got no answer**: the outcome is unknown, so it is never
  reported as success: :class:`~keepgoing.errors.StoreError`. A worker then
  writes a task's completion again, with the same fence (refused if the
  first landed), and renews only the leases it knows it holds, so a claim
  whose answer was lost expires and is reaped.

An outage is logged once when it starts and once when it ends (see
:class:`Outage`), not once per failed call, and psycopg's own per-attempt
warnings during it are folded into those two lines.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import errors as pgerrors
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from keepgoing._backoff import backoff
from keepgoing._store.postgres.group import GroupWriter
from keepgoing._store.postgres.sql import PgConnection, begin, rollback
from keepgoing._store.refused import RefusedValueError
from keepgoing.errors import KeepgoingError, StoreError

__all__ = ["CHANNEL", "Outage", "PgRunner"]

log = logging.getLogger("keepgoing.store")

CHANNEL = "keepgoing"
Op = Callable[[PgConnection], Any]
_CONFLICTS = (pgerrors.SerializationFailure, pgerrors.DeadlockDetected)
_MAX_CONFLICT_RETRIES = 30
_MAX_UNIQUE_RETRIES = 3
_NOISY = ("psycopg", "psycopg.pool")  # loggers whose outage warnings Outage folds


class Outage:
    """Logs a lost database once when it is first noticed, and once when it is back.

    Connections break one by one as they are next used, so one restart makes
    several calls fail over a moment, some after others have reconnected.
    Losses within :attr:`QUIET` seconds of a recovery belong to the same outage
    and are not logged again.
    """

    QUIET = 5.0

    def __init__(self, where: str) -> None:
        self.where = where
        self._lock = threading.Lock()
        self._since: float | None = None  # down since (None: up)
        self._began = 0.0  # when the outage that was logged began
        self._told_up = True
        self._up_at = -self.QUIET

    def recent(self) -> bool:
        """Down now, or back for less than :attr:`QUIET` seconds."""
        return self._since is not None or time.monotonic() - self._up_at < self.QUIET

    def down(self, exc: BaseException) -> None:
        with self._lock:
            if self._since is not None:
                return
            now = self._since = time.monotonic()
            if now - self._up_at < self.QUIET:
                return  # a straggler of the outage already logged
            self._began, self._told_up = now, False
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        log.warning(
            "lost the connection to PostgreSQL at %s (%s); reconnecting with backoff",
            self.where,
            reason,
        )

    def up(self) -> None:
        if self._since is None:  # the common case: no lock
            return
        with self._lock:
            if self._since is None:
                return
            self._since, self._up_at = None, time.monotonic()
            told, self._told_up = self._told_up, True
        if not told:
            log.warning(
                "reconnected to PostgreSQL at %s after %.1fs",
                self.where,
                self._up_at - self._began,
            )


class _QuietPool(logging.Filter):
    """Folds psycopg's warnings during an outage (one per failed connection attempt,
    one per broken connection handed back) into the two lines :class:`Outage` logs."""

    def __init__(self, outage: Outage) -> None:
        super().__init__()
        self.outage = outage

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR or not self.outage.recent()


class PgRunner:
    """Runs op functions on pooled connections, in threads, with the retry rules above."""

    def __init__(
        self,
        conninfo: str,
        *,
        where: str,
        min_size: int,
        max_size: int,
        outage_timeout: float,
        on_commit: Callable[[], None],
        notify_payload: str,
        outage: Outage,
    ) -> None:
        self.where = where
        self.outage = outage
        self.outage_timeout = outage_timeout
        self._on_commit = on_commit
        self.notify_sql = f"NOTIFY {CHANNEL}, '{notify_payload}'"
        self._writers = max(1, min(4, max_size // 3))
        self._readers = max(1, min(4, max_size - self._writers))
        name = f"keepgoing-{notify_payload[:8]}"
        self._filter = _QuietPool(outage)
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            conninfo,
            min_size=min_size,
            max_size=max_size,
            open=False,
            name=name,
            kwargs={"autocommit": True},  # a write's BEGIN is its own: see begin()
            timeout=outage_timeout,
            reconnect_timeout=max(outage_timeout, 60.0),
        )
        # Calls are handed to these threads in batches (``_postgres_group``).
        self._group: GroupWriter | None = None
        self._reads: GroupWriter | None = None

    def open(self) -> None:
        for name in _NOISY:
            logging.getLogger(name).addFilter(self._filter)
        try:
            self._pool.open(wait=True, timeout=self.outage_timeout)
        except PoolTimeout as exc:
            self._pool.close()
            raise StoreError(
                f"could not open {self._pool.min_size} connection(s) to PostgreSQL at "
                f"{self.where} within {self.outage_timeout:g}s"
            ) from exc
        self._group = GroupWriter(self, self._writers)
        self._reads = GroupWriter(self, self._readers, write=False)

    def close(self) -> None:
        for group in (self._group, self._reads):
            if group is not None:
                group.close()
        self._group = self._reads = None
        self._pool.close()
        for name in _NOISY:
            logging.getLogger(name).removeFilter(self._filter)

    def notify(self, payload: str) -> None:
        """Send one notification outside any store call (the listener's stop signal)."""
        self.call_sync(
            lambda c: c.raw.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload)), write=False
        )

    async def call(self, op: Op, *, write: bool, notify: Any = False) -> Any:
        group = self._group if write else self._reads
        if group is None:
            raise StoreError("the PostgreSQL store is closed")
        return await group.submit(op, notify)

    def call_sync(self, op: Op, *, write: bool, notify: Any = False) -> Any:
        conflicts = uniques = lost = 0
        give_up: float | None = None
        while True:
            conn = self._connection(give_up)
            try:
                result, wakes = self._once(conn, op, write, notify)
            except _Conflict as exc:
                conflicts += 1
                if conflicts > _MAX_CONFLICT_RETRIES:
                    raise StoreError(f"PostgreSQL kept refusing a transaction: {exc}") from exc
                time.sleep(backoff(conflicts, base=0.002, cap=0.2))
                continue
            except _Duplicate as exc:
                uniques += 1
                if uniques > _MAX_UNIQUE_RETRIES:
                    raise StoreError(f"PostgreSQL error: {exc}") from exc
                continue
            except _Lost as exc:
                self.outage.down(exc.__cause__ or exc)
                now = time.monotonic()
                give_up = give_up or now + self.outage_timeout
                if now >= give_up:
                    raise StoreError(
                        f"PostgreSQL at {self.where} unreachable for {self.outage_timeout:g}s"
                    ) from exc
                lost += 1
                time.sleep(backoff(lost, base=0.05, cap=2.0))
                continue
            finally:
                self._pool.putconn(conn)
            self.outage.up()
            if wakes:
                self.committed()
            return result

    def committed(self) -> None:
        """A commit made work for others: wake this process's waiters at once."""
        with contextlib.suppress(Exception):
            self._on_commit()

    def connection(self) -> psycopg.Connection[Any]:
        """A pooled connection (give it back with :meth:`release`)."""
        return self._connection(None)

    def release(self, raw: psycopg.Connection[Any]) -> None:
        self._pool.putconn(raw)

    def _connection(self, give_up: float | None) -> psycopg.Connection[Any]:
        wait = self.outage_timeout if give_up is None else max(0.05, give_up - time.monotonic())
        try:
            return self._pool.getconn(timeout=wait)
        except PoolTimeout as exc:
            raise StoreError(
                f"no connection to PostgreSQL at {self.where} within {wait:.1f}s"
            ) from exc
        except PoolClosed as exc:
            raise StoreError("the PostgreSQL store is closed") from exc

    def _once(
        self, raw: psycopg.Connection[Any], op: Op, write: bool, notify: Any
    ) -> tuple[Any, bool]:
        committing = False
        try:
            if not write:
                return op(PgConnection(raw)), False
            with raw.pipeline() as pipeline:  # see PgConnection: writes wait only for reads
                begin(raw)
                result = op(PgConnection(raw, pipeline))
                wakes = bool(notify(result) if callable(notify) else notify)
                if wakes:
                    raw.execute(self.notify_sql)
                committing = True
                # Sent in the pipeline, answered at its closing Sync: one round trip.
                # (``raw.commit()`` here syncs, and leaving the pipeline syncs again.)
                raw.execute("COMMIT")
            return result, wakes
        except BaseException as exc:
            rollback(raw)
            mapped = _classify(exc, raw, committing, self.where)
            if mapped is exc:
                raise
            raise mapped from exc


class _Conflict(Exception):
    pass


class _Duplicate(Exception):
    pass


class _Lost(Exception):
    pass


def _classify(
    exc: BaseException, raw: psycopg.Connection[Any], committing: bool, where: str
) -> BaseException:
    """What the runner does next: retry (a private signal), or raise this.

    A statement's error may surface only at ``COMMIT`` (writes are pipelined),
    so what matters is whether the server answered: an error it reported
    (a SQLSTATE) means the transaction was rolled back.
    """
    if isinstance(exc, _CONFLICTS):
        return _Conflict(str(exc))
    if isinstance(exc, pgerrors.UniqueViolation):
        return _Duplicate(str(exc))
    if isinstance(exc, psycopg.Error) and exc.sqlstate is None and (raw.broken or raw.closed):
        if not committing:
            return _Lost(str(exc))  # nothing was committed: run it again
        # No answer to COMMIT: it may or may not have committed.
        return StoreError(
            f"lost the connection to PostgreSQL at {where} while committing; "
            "the outcome is unknown, so it is not reported as done"
        )
    if isinstance(exc, psycopg.OperationalError) and exc.sqlstate is not None:
        # The server refused (shutting down, out of resources, ...): rolled back.
        return _Lost(str(exc))
    if isinstance(exc, psycopg.DataError):  # the server refused a value: rolled back
        return RefusedValueError("PostgreSQL", exc)
    if isinstance(exc, psycopg.ProgrammingError) and "cannot adapt" in str(exc):
        return RefusedValueError("PostgreSQL", exc)  # a value of a type it cannot send
    if isinstance(exc, psycopg.Error):
        state = f" [{exc.sqlstate}]" if exc.sqlstate else ""
        return StoreError(f"PostgreSQL error{state}: {exc}")
    if isinstance(exc, ValueError | TypeError | OverflowError) and not isinstance(
        exc, KeepgoingError
    ):
        # Values are checked before they get here (keepgoing._payload); this is the
        # backstop for one that was not, such as text with a lone surrogate: the
        # store method that called names the field (keepgoing._store.refused).
        return RefusedValueError("PostgreSQL", exc)
    return exc  # a typed error the op raised, or a cancellation
