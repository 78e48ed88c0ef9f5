"""Liveness tokens on PostgreSQL: a session advisory lock per worker, on its own connection.

The lock lives exactly as long as the session: the database frees it when the
worker's process dies (its socket closes) or when the server gives up on a
silent peer (the keepalives set below: about ten seconds). The lease reaper
reads ``pg_locks`` in its own transaction (:func:`advisory_states`).

The holder thread checks its connection every second and, if it broke,
reconnects and takes the lock again. Right after the server restarts nobody
holds anything yet, so for :data:`RESTART_GRACE` seconds a free lock says
nothing (the owner's lease decides) and only a held one counts.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
from typing import Any, NamedTuple

import psycopg

from keepgoing._backoff import backoff
from keepgoing._store.sql.rows import every, value

__all__ = ["ADVISORY", "AdvisoryToken", "advisory_key", "advisory_states"]

log = logging.getLogger("keepgoing.store")

ADVISORY = "pg-advisory:"  # the prefix of a token recorded in the registry
RESTART_GRACE = 15.0
_CHECK = 1.0
#: Server-side keepalives of the token's session: a worker whose machine
#: vanished without closing its socket loses its lock in about 5 + 2 * 3 s.
_KEEPALIVES = (
    "SET tcp_keepalives_idle = 5",
    "SET tcp_keepalives_interval = 2",
    "SET tcp_keepalives_count = 3",
)


class _Held(NamedTuple):
    """An advisory lock held in this database, by its 64-bit key."""

    lock_key: int


def advisory_key(worker_id: str) -> int:
    """A positive 63-bit lock key for ``worker_id``."""
    return int.from_bytes(hashlib.sha1(worker_id.encode()).digest()[:8], "big") >> 1


def advisory_states(conn: Any, owners: list[tuple[str, str]]) -> dict[str, bool | None]:
    """The state of each owner's advisory lock, read from ``pg_locks``."""
    up = value(conn, "SELECT EXTRACT(EPOCH FROM (now() - pg_postmaster_start_time()))")
    settled = up is not None and float(up) > RESTART_GRACE
    held = {
        int(r.lock_key)
        for r in every(
            conn,
            _Held,
            "SELECT (classid::bigint << 32) | objid::bigint AS lock_key FROM pg_locks "
            "WHERE locktype = 'advisory' AND objsubid = 1 AND granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        )
    }
    states: dict[str, bool | None] = {}
    for owner, token in owners:
        if not token.startswith(ADVISORY):
            states[owner] = None
        elif int(token[len(ADVISORY) :]) in held:
            states[owner] = True
        else:
            states[owner] = False if settled else None
    return states


class AdvisoryToken:
    """Holds one worker's advisory lock on a dedicated connection, in a thread."""

    def __init__(self, conninfo: str, worker_id: str, where: str) -> None:
        self.key = advisory_key(worker_id)
        self._conninfo = conninfo
        self._where = where
        self._stop = threading.Event()
        self._conn: psycopg.Connection[Any] | None = None
        self._thread: threading.Thread | None = None

    @property
    def token(self) -> str:
        return f"{ADVISORY}{self.key}"

    def start(self) -> None:
        """Take the lock before returning (raises ``psycopg.Error`` if it cannot)."""
        self._conn = self._lock()
        self._thread = threading.Thread(target=self._main, name="keepgoing-liveness", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5 * _CHECK)
            self._thread = None
        self._close()

    def _lock(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(self._conninfo, autocommit=True)
        try:
            for statement in _KEEPALIVES:
                conn.execute(statement)
            # An earlier session of this worker may still hold it (a connection the
            # server has not noticed is gone): the worker counts as alive meanwhile.
            while not self._stop.is_set():
                if value(conn, "SELECT pg_try_advisory_lock(%s)", (self.key,)):
                    return conn
                self._stop.wait(0.5)
        except BaseException:
            conn.close()
            raise
        conn.close()
        raise psycopg.OperationalError("stopped while taking the liveness lock")

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _main(self) -> None:
        failures = 0
        while not self._stop.wait(
            _CHECK if failures == 0 else backoff(failures, base=0.05, cap=2.0)
        ):
            try:
                if self._conn is None:
                    self._conn = self._lock()
                    log.info("liveness lock on PostgreSQL at %s taken again", self._where)
                else:
                    self._conn.execute("SELECT 1")
                failures = 0
            except psycopg.Error:
                self._close()
                failures += 1
