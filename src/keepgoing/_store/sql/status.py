"""Published progress in SQL: the ``run_status`` rows ``keepgoing.set_status`` keeps.

A ``StatusSet`` command is applied by :func:`record_status` in the commit that
appends it (``commands.apply_commands``), so the row and the event are one
write: a worker killed before the commit leaves neither, and the replay that
follows produces the command again, which is dropped (a marker, never matched).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from keepgoing._history import events as ev
from keepgoing._payload import encode, loads
from keepgoing._store.recovery_protocol import StatusValue
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.rows import columns, every

__all__ = ["record_status", "run_status"]


class _StatusRow(NamedTuple):
    name: str
    value: str
    at: float


def record_status(conn: Connection, run_id: str, command: ev.StatusSet, now: float) -> None:
    """Keep ``command``'s value as its name's newest (the event is appended beside it)."""
    text = encode(command.value, f"the value of status {command.name!r}")
    conn.execute(
        "INSERT INTO run_status (run_id, name, value, at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (run_id, name) DO UPDATE SET value = excluded.value, at = excluded.at",
        (run_id, command.name, text, now),
    )


def run_status(conn: Connection, run_id: str, name: str | None) -> list[StatusValue]:
    sql = f"SELECT {columns(_StatusRow)} FROM run_status WHERE run_id = ?"
    params: tuple[Any, ...] = (run_id,)
    if name is not None:
        sql, params = sql + " AND name = ?", (run_id, name)
    found = every(conn, _StatusRow, sql + " ORDER BY at, name", params)
    return [StatusValue(r.name, loads(r.value), r.at) for r in found]
