"""What the shared SQL says for PostgreSQL, written so that SQLite ignores it.

The store's queries exist once: the functions in ``keepgoing._store.sql`` take a
connection (:class:`~keepgoing._store.sql.connection.Connection`) and run
SQLite's SQL on it. :class:`~keepgoing._store.postgres.PostgresStore`
runs the same functions on a psycopg connection wrapped by
:class:`~keepgoing._store.postgres.sql.PgConnection`, which rewrites the few
spellings that differ (``?`` placeholders, ``INSERT OR REPLACE``, scalar
``MIN(a, b)``, ``IS ?``, ``lastrowid``) and turns the lock markers below into
row locks.

Row locks
---------
SQLite has one writer: every write transaction is ``BEGIN IMMEDIATE``, so it
needs no row locks. PostgreSQL runs many writers under READ COMMITTED, and a
statement that reads a row and then writes what it read must lock it. A lock
is written as a SQL comment, which SQLite skips and PostgreSQL's adapter
uncomments::

    SELECT next_seq FROM runs WHERE run_id = ? /*FOR UPDATE*/
    SELECT run_id, cmd FROM tasks WHERE ... LIMIT ? /*FOR UPDATE SKIP LOCKED*/

Lock order (PostgreSQL)
-----------------------
1. A transaction that writes a run locks that run's ``runs`` row first
   (``commit_activation``, ``complete_task``, ``append``, ``open_run``,
   ``release_tasks``). The run's row guards its history (``next_seq``) and
   the status and fence of its tasks.
2. Then that run's ``tasks``, ``timers`` and ``event_waits`` rows.
3. Then other runs it touches: a child it starts or cancels, its parent when
   it ends, the target of a message. Runs locked together in one sweep
   (``publish_event``) are locked in ``run_id`` order.
4. Advisory locks on an event key, volume rows and metric counters last.
   A flow-control admission (``sql/limits.py``) only *tries* its advisory lock
   on a limit's key (``try_lock_key``) and skips the key when it is held, so it
   never waits either.
5. A gateway admission (``reserve_gateway_call``) locks its key's
   ``gateway_keys`` row and takes no other lock, so it never closes a cycle.

Exceptions, which never wait for a lock and so cannot close a cycle:

* Claims take ``runs`` or ``tasks`` rows with ``FOR UPDATE SKIP LOCKED``.
* Sweeps (due timers, expired leases) take their rows with ``SKIP LOCKED``
  and then the run with ``SKIP LOCKED``; a row skipped now is taken by the
  next sweep. This is what makes each due timer fire once and each expired
  lease be reaped once, with any number of servers and workers sweeping.
* ``heartbeat`` locks the worker's leased ``runs`` rows before its ``tasks``.

The cycles that remain are rare by construction (a parent and its child
ending in the same instant, two runs messaging each other in the same
instant, a publish meeting a run that starts a second wait on the same key):
PostgreSQL's deadlock detector breaks them and the store retries the losing
transaction (SQLSTATE 40P01) with jittered backoff.

A task's status and fence change only while its run's row is locked, except
in a claim, which moves a *pending* task to running under the task's own row
lock. A fenced completion therefore never races a claim.
"""

from __future__ import annotations

from typing import Any

__all__ = ["lock_key", "try_lock_key"]


def lock_key(conn: Any, *parts: str) -> None:
    """Serialize, until commit, the transactions that lock the same key.

    On PostgreSQL this is a transaction-scoped advisory lock; SQLite's single
    writer serializes everything already, so there it does nothing.
    """
    lock = getattr(conn, "lock_key", None)
    if lock is not None:
        lock("\x1f".join(parts))


def try_lock_key(conn: Any, *parts: str) -> bool:
    """:func:`lock_key` that never waits: False when another transaction holds the key.

    SQLite's single writer already serializes: there it is always True.
    """
    lock = getattr(conn, "try_lock_key", None)
    return True if lock is None else bool(lock("\x1f".join(parts)))
