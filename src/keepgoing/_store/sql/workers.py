"""The worker registry: registering workers, the workflow catalog they serve, and the
sweep that marks lost workers (rules: ``_store/lost_workers.py``).

The sweep reads the workers not yet marked lost and their liveness tokens,
then marks the lost ones in a write that repeats the heartbeat it read (a
worker that heartbeats in between is left alone) and that skips a row
another sweep marked first.
"""

from __future__ import annotations

from typing import NamedTuple

from keepgoing._payload import dumps, loads
from keepgoing._store import records as rec
from keepgoing._store.lost_workers import KEEP_LOST, deadline_of, lost_reason
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.leases import Probe
from keepgoing._store.sql.rows import columns, every, value
from keepgoing._store.sql.worker_stops import stops_of

__all__ = ["LostSweep", "find_lost", "mark_lost"]


class _Candidate(NamedTuple):
    worker_id: str
    heartbeat_at: float
    info: str
    liveness: str | None


class _Worker(NamedTuple):
    worker_id: str
    queues: str
    host: str
    pid: int
    started_at: float
    heartbeat_at: float
    info: str
    liveness: str | None
    lost_at: float | None
    lost_reason: str | None


class _Catalog(NamedTuple):
    name: str
    queue: str


class LostSweep(NamedTuple):
    """What a sweep found: ``(worker_id, heartbeat_at read, reason)`` per lost worker,
    and whether rows lost long ago are to be forgotten."""

    lost: list[tuple[str, float, str]]
    forget: bool


def find_lost(conn: Connection, now: float, probe: Probe) -> LostSweep:
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


def mark_lost(conn: Connection, sweep: LostSweep, now: float) -> int:
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


# -- the registry and the workflow catalog ----------------------------------------
def register_worker(conn: Connection, w: rec.WorkerRecord) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO workers (worker_id, queues, host, pid, started_at, heartbeat_at, "
        "info, liveness, lost_at, lost_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL)",
        (
            w.worker_id,
            dumps(w.queues),
            w.host,
            w.pid,
            w.started_at,
            w.heartbeat_at,
            dumps(w.info),
            w.liveness,
        ),
    )


def deregister_worker(conn: Connection, worker_id: str) -> None:
    conn.execute("DELETE FROM workers WHERE worker_id = ?", (worker_id,))


def list_workers(conn: Connection) -> list[rec.WorkerRecord]:
    rows = every(
        conn, _Worker, f"SELECT {columns(_Worker)} FROM workers ORDER BY started_at, worker_id"
    )
    return [
        rec.WorkerRecord(
            worker_id=r.worker_id,
            queues=loads(r.queues),
            host=r.host,
            pid=r.pid,
            started_at=r.started_at,
            heartbeat_at=r.heartbeat_at,
            info=loads(r.info),
            liveness=r.liveness,
            lost_at=r.lost_at,
            lost_reason=r.lost_reason,
        )
        for r in rows
    ]


def record_workflows(conn: Connection, names: list[str], queues: list[str], now: float) -> None:
    conn.executemany(
        "INSERT OR REPLACE INTO workflow_catalog (name, queue, last_seen) VALUES (?, ?, ?)",
        [(n, q, now) for n in names for q in queues],
    )


def known_workflows(conn: Connection) -> dict[str, list[str]]:
    known: dict[str, list[str]] = {}
    for r in every(
        conn, _Catalog, f"SELECT {columns(_Catalog)} FROM workflow_catalog ORDER BY name, queue"
    ):
        known.setdefault(r.name, []).append(r.queue)
    return known
