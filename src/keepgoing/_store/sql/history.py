"""A run's history: appending events (and the run's one update that goes with it), reading it.

Each append locks the run's row first (``SELECT next_seq ... FOR UPDATE`` unless
the caller holds it), inserts the events with the next seqs and updates the run
once: its counters, its trouble counts and whatever the caller adds (``then``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple, TypeVar

from keepgoing._history import events as ev
from keepgoing._history.codec import decode, encode_at
from keepgoing._payload import loads
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.rows import every, one, value
from keepgoing._store.trouble import count_events

__all__ = ["append", "append_returning", "read_history"]

R = TypeVar("R", bound=NamedTuple)

#: History rows per ``INSERT``: a step's events (1 to 3) are one statement, and a
#: long append stays far below either database's limit on bound parameters.
ROWS_PER_INSERT = 64


class _Body(NamedTuple):
    body: str


def read_history(conn: Connection, run_id: str, after_seq: int) -> list[ev.Event]:
    rows = every(
        conn,
        _Body,
        "SELECT body FROM history WHERE run_id = ? AND seq > ? ORDER BY seq",
        (run_id, after_seq),
    )
    return [decode(loads(r.body)) for r in rows]


def append(
    conn: Connection,
    run_id: str,
    events: Sequence[ev.Event],
    now: float,
    *,
    next_seq: int | None = None,
    then: str = "",
    then_params: Sequence[Any] = (),
) -> int:
    """Append ``events`` with the next seqs and ``at=now``; update the run row once.

    Returns the seq of the last event. ``next_seq`` saves a read when the caller
    has it; ``then`` adds SET clauses to the run's update (the rightmost
    assignment of a column wins; only a column assigned without parameters may
    be assigned twice), with ``then_params`` for its placeholders.
    """
    last, sql, params = _append(conn, run_id, events, now, next_seq, then, then_params, "", ())
    conn.execute(sql, params)
    return last


def append_returning(
    conn: Connection,
    run_id: str,
    events: Sequence[ev.Event],
    now: float,
    returning: tuple[type[R], str, Sequence[Any]],
    *,
    next_seq: int,
    then: str = "",
    then_params: Sequence[Any] = (),
) -> tuple[int, R]:
    """:func:`append`, whose update of the run also returns a row: ``returning`` is
    its type, the ``RETURNING`` expressions and their parameters."""
    row_type, sql, params = returning
    last, update, values = _append(
        conn, run_id, events, now, next_seq, then, then_params, sql, params
    )
    row = one(conn, row_type, update, values)
    assert row is not None  # the caller holds the run
    return last, row


def _insert(conn: Connection, rows: list[tuple[Any, ...]]) -> None:
    """The rows as multi-row ``INSERT``s: one statement per chunk, not one per event."""
    for start in range(0, len(rows), ROWS_PER_INSERT):
        chunk = rows[start : start + ROWS_PER_INSERT]
        conn.execute(_insert_sql(len(chunk)), [v for row in chunk for v in row])


@functools.lru_cache(maxsize=ROWS_PER_INSERT)
def _insert_sql(count: int) -> str:
    values = ", ".join(["(?, ?, ?, ?, ?)"] * count)
    return f"INSERT INTO history (run_id, seq, type, at, body) VALUES {values}"


def _append(
    conn: Connection,
    run_id: str,
    events: Sequence[ev.Event],
    now: float,
    next_seq: int | None,
    then: str,
    then_params: Sequence[Any],
    returning: str,
    returning_params: Sequence[Any],
) -> tuple[int, str, tuple[Any, ...]]:
    """Insert the events; return the last seq and the run's update (to run) with its
    parameters."""
    seq = next_seq
    if seq is None:
        seq = value(conn, "SELECT next_seq FROM runs WHERE run_id = ? /*FOR UPDATE*/", (run_id,))
    rows = []
    last_input = 0
    for event in events:
        if event.ROLE == "input":
            last_input = seq
        rows.append((run_id, seq, type(event).__name__, now, encode_at(event, seq, now)))
        seq += 1
    _insert(conn, rows)
    then = _trouble(conn, run_id, events) + then
    tail = f" WHERE run_id = ?{' RETURNING ' + returning if returning else ''}"
    if last_input:
        return (
            seq - 1,
            "UPDATE runs SET next_seq = ?, last_input_seq = ?, updated_at = ?, "
            "runnable_since = CASE WHEN runnable = 1 THEN runnable_since ELSE ? END, "
            f"runnable = 1{then}{tail}",
            (seq, last_input, now, now, *then_params, run_id, *returning_params),
        )
    return (
        seq - 1,
        f"UPDATE runs SET next_seq = ?, updated_at = ?{then}{tail}",
        (seq, now, *then_params, run_id, *returning_params),
    )


def _trouble(conn: Connection, run_id: str, events: Sequence[ev.Event]) -> str:
    """The SET clauses that keep the run's trouble counters (``_store/trouble.py``) for
    ``events``: literal numbers, in the append's own update of the run. Only a review
    wait or answer adds a statement (the operation's balance on its task row)."""
    delta = count_events(run_id, events)
    if not delta:
        return ""
    sets = [
        f", {column} = {column} + {n}"
        for column, n in (
            ("worker_losses", delta.worker_losses),
            ("retries", delta.retries),
            ("rate_limited", delta.rate_limited),
        )
        if n
    ]
    for cmd, change in delta.reviews:
        conn.execute(
            "UPDATE tasks SET review_waits = review_waits + ? WHERE run_id = ? AND cmd = ?",
            (change, run_id, cmd),
        )
    if delta.ends:
        sets.append(", reviews_waiting = 0")
    elif delta.reviews:
        sets.append(
            ", reviews_waiting = (SELECT COUNT(*) FROM tasks t "
            "WHERE t.run_id = runs.run_id AND t.review_waits > 0)"
        )
    return "".join(sets)
