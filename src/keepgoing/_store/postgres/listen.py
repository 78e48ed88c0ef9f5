"""Wake-ups from PostgreSQL: one ``LISTEN`` connection per store, in its own thread.

A write that makes work runnable (or ends a run) sends ``NOTIFY keepgoing``
inside its transaction, so the notification is delivered when, and only
when, the change commits. The listener rings a
:class:`~keepgoing._store.doorbell.LocalBell` for each, which wakes every
``wait_for_change`` in this process, whatever event loop it waits on.
Notifications this store sent itself are skipped: it rang the bell when it
committed.

The connection is in autocommit mode (a ``LISTEN`` inside an open
transaction would hold notifications until it ends). When it breaks, the
thread reconnects with jittered exponential backoff and rings once on
reconnecting, since changes made while it was away were not heard; workers
also poll slowly as a safety net.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

import psycopg

from keepgoing._backoff import backoff
from keepgoing._store.postgres.pool import CHANNEL, Outage
from keepgoing.errors import StoreError

__all__ = ["Listener"]

_TURN = 0.25  # how often the thread looks up from waiting to see if it should stop


class Listener:
    def __init__(
        self, conninfo: str, *, ring: Callable[[], None], own_payload: str, outage: Outage
    ) -> None:
        self._conninfo = conninfo
        self._ring = ring
        self._own = own_payload
        self._outage = outage
        self._stop = threading.Event()
        self._conn: psycopg.Connection[Any] | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Connect and ``LISTEN`` before returning, so no later change is missed."""
        try:
            self._conn = self._connect()
        except psycopg.Error as exc:
            raise StoreError(
                f"could not LISTEN on PostgreSQL at {self._outage.where}: {exc}"
            ) from exc
        self._stop.clear()
        self._thread = threading.Thread(target=self._main, name="keepgoing-listen", daemon=True)
        self._thread.start()

    def stop(self, poke: Callable[[str], None] | None = None) -> None:
        """Stop listening. ``poke(payload)`` should send that ``NOTIFY`` payload: it
        ends the thread's wait at once instead of at its next turn."""
        self._stop.set()
        if poke is not None and self._thread is not None:
            with contextlib.suppress(Exception):
                poke(f"{self._own}:stop")
        if self._thread is not None:
            self._thread.join(timeout=5 * _TURN)
            self._thread = None
        self._close()

    def _connect(self) -> psycopg.Connection[Any]:
        conn = psycopg.connect(self._conninfo, autocommit=True)
        conn.execute(f"LISTEN {CHANNEL}")
        return conn

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _main(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                if self._conn is None:
                    self._conn = self._connect()
                    failures = 0
                    self._outage.up()
                    self._ring()  # whatever changed while we were away
                for note in self._conn.notifies(timeout=_TURN):
                    if self._stop.is_set():
                        return
                    if note.payload != self._own:
                        self._ring()
            except psycopg.Error as exc:
                if self._stop.is_set():
                    return
                self._outage.down(exc)
                self._close()
                failures += 1
                self._stop.wait(backoff(failures, base=0.05, cap=2.0))
