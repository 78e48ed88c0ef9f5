"""The worker registry's sweep: marking lost workers (rules: ``_store/lost_workers.py``).

The sweep reads the workers not yet marked lost and their liveness tokens,
then marks the lost ones in a write that repeats the heartbeat it read (a
worker that heartbeats in between is left alone) and that skips a row
another sweep marked first.
"""

from __future__ import annotations

import sqlite3
from typing import NamedTuple

from keepgoing._payload import loads
from keepgoing._store.lost_workers import KEEP_LOST, deadline_of, lost_reason
from keepgoing._store.sql.leases import Probe
from keepgoing._store.sql.rows import columns, every, value
from keepgoing._store.sql.stops import stops_of

__all__ = ["LostSweep", "find_lost", "mark_lost"]


class _Candidate(NamedTuple):
    worker_id: str
    heartbeat_at: float
    info: str
    liveness: str | None


class LostSweep(NamedTuple):
    """What a sweep found: ``(worker_id, heartbeat_at read, reason)`` per lost worker,
    and whether rows lost long ago are to be forgotten."""

    lost: list[tuple[str, float, str]]
    forget: bool


def find_lost(conn: sqlite3.Connection, now: float, probe: Probe) -> LostSweep:
    rows = every(
        conn, _Candidate, f"SELECT {columns(_Candidate)} FROM workers WHERE lost_at IS NULL"
    )
    tokens = [(r.worker_id, r.liveness) for r in rows if r.liveness]
    states = probe(conn, tokens) if tokens else {}
    lost = []
    for r in rows:
        alive = states.get(r.worker_id)
        deadline = deadline_of(loads(r.info))
        if alive is True or (alive is None and now - r.heartbeat_at <= deadline):
            continue  # the common case, decided without reading its stops
        reason = lost_reason(
            heartbeat_at=r.heartbeat_at,
            now=now,
            deadline=deadline,
            alive=alive,
            stops=stops_of(conn, r.worker_id),
        )
        if reason is not None:
            lost.append((r.worker_id, r.heartbeat_at, reason))
    old = value(
        conn,
        "SELECT COUNT(*) FROM workers WHERE lost_at IS NOT NULL AND lost_at < ?",
        (now - KEEP_LOST,),
    )
    return LostSweep(lost, bool(old))


def mark_lost(conn: sqlite3.Connection, sweep: LostSweep, now: float) -> int:
    marked = 0
    for worker_id, seen, reason in sweep.lost:
        cursor = conn.execute(
            "UPDATE workers SET lost_at = ?, lost_reason = ? "
            "WHERE worker_id = ? AND lost_at IS NULL AND heartbeat_at = ?",
            (now, reason, worker_id, seen),
        )
        marked += max(0, cursor.rowcount)
    if sweep.forget:
        conn.execute(
            "DELETE FROM workers WHERE lost_at IS NOT NULL AND lost_at < ?", (now - KEEP_LOST,)
        )
    return marked
