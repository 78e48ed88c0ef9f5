"""Recorded worker stops (``worker_stops``): written before a stop's signal, read
by the transaction that records the loss (rules: ``_store/worker_stops.py``)."""

from __future__ import annotations

from typing import NamedTuple

from keepgoing._store import records as rec
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.rows import columns, every
from keepgoing._store.worker_stops import KEEP, StopRow

__all__ = ["record_stop", "settle_stop", "stops_of"]


class _Stop(NamedTuple):
    stop_id: int
    cause: str
    actor_kind: str
    actor_id: str
    via: str
    state: str
    recorded_at: float
    blame_run_id: str | None
    blame_cmd: int | None


def record_stop(conn: Connection, stop: rec.WorkerStop, now: float) -> int:
    conn.execute("DELETE FROM worker_stops WHERE recorded_at < ?", (now - KEEP,))
    cursor = conn.execute(
        "INSERT INTO worker_stops (worker_id, cause, actor_kind, actor_id, via, detail, state, "
        "recorded_at, blame_run_id, blame_cmd) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            stop.worker_id,
            stop.cause,
            stop.actor_kind,
            stop.actor_id,
            stop.via,
            stop.detail,
            "pending",
            now,
            stop.blame_run_id,
            stop.blame_cmd,
        ),
    )
    return int(cursor.lastrowid or 0)


def settle_stop(conn: Connection, stop_id: int, signalled: bool) -> None:
    if signalled:
        conn.execute("UPDATE worker_stops SET state = 'sent' WHERE stop_id = ?", (stop_id,))
    else:
        conn.execute("DELETE FROM worker_stops WHERE stop_id = ?", (stop_id,))


def stops_of(conn: Connection, worker_id: str) -> list[StopRow]:
    """The stops recorded for ``worker_id``, oldest first."""
    rows = every(
        conn,
        _Stop,
        f"SELECT {columns(_Stop)} FROM worker_stops WHERE worker_id = ? ORDER BY stop_id",
        (worker_id,),
    )
    return [StopRow(*row) for row in rows]
