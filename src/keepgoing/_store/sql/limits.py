"""Flow control's rules: who holds a concurrency slot, the token bucket, admission.

A task scheduled with limits carries them on its row (:data:`LIMIT_COLUMNS`,
resolved by ``keepgoing._limits.resolve`` when its workflow scheduled it). A
claim admits a pending attempt only when

* **a slot is free**: fewer than ``concurrency_cap`` attempts of the same
  ``(limit_name, limit_key)`` are :func:`held_rule` (running, lease unexpired).
  A slot is the attempt's lease: a SIGKILLed worker's slot frees when its lease
  expires, and a frozen worker cannot hold one past its lease (the heartbeat
  does not renew an expired limited lease: :data:`RENEWABLE`);
* **a token is there**: the bucket ``limit_buckets(rate_name, rate_key)``,
  refilled by the time elapsed at ``rate_tokens / rate_period`` up to
  ``rate_burst`` (:func:`refill`), gives one. An attempt with no token gets the
  instant its token is due as its ``available_at``, so it holds no worker and
  the workers' next wake-up (``leases.next_wakeup``) is that instant.

Both checks run in the claim's transaction (:func:`admit`), used by the claim
(``leases.claim_tasks``) and the eager claim of a task a commit schedules
(``leases.insert_task``). On PostgreSQL each ``(limit, key)`` is serialized by a
transaction-scoped advisory lock taken with ``try`` (``dialect.try_lock_key``):
a key another claim is admitting is skipped, never waited for, so two workers
cannot both take the last slot and a claim never blocks. SQLite has one writer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from keepgoing._store.limits_protocol import DeclaredLimit, LimitStore, LimitUse, LimitWait
from keepgoing._store.sql.admission import flow_use
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.dialect import try_lock_key
from keepgoing._store.sql.rows import columns, every, one, value

__all__ = [
    "ADMITTED",
    "LIMIT_COLUMNS",
    "RENEWABLE",
    "Admission",
    "LimitRow",
    "SqlLimitsMixin",
    "admit",
    "held",
    "held_rule",
    "limit_row",
    "limit_use",
    "limit_waits",
    "record_limits",
    "refill",
]


class LimitRow(NamedTuple):
    """A task's limit columns (None: no limit of that kind)."""

    limit_name: str | None = None
    limit_key: str | None = None
    concurrency_cap: int | None = None
    rate_name: str | None = None
    rate_key: str | None = None
    rate_tokens: int | None = None
    rate_period: float | None = None
    rate_burst: int | None = None


#: The task row's limit columns, in one place: the insert, the eager insert and
#: the claim all read or write these.
LIMIT_COLUMNS: tuple[str, ...] = LimitRow._fields


def limit_row(limits: Mapping[str, Any] | None) -> LimitRow:
    """The columns of a ``TaskScheduled``'s ``limits`` (unknown keys are ignored)."""
    if not limits:
        return LimitRow()
    return LimitRow(*(limits.get(name) for name in LIMIT_COLUMNS))


def held_rule(alias: str = "") -> str:
    """The rule of a held slot: the attempt runs and its lease has not expired.
    One parameter: now."""
    return f"{alias}status = 'running' AND {alias}lease_expires_at > ?"


#: A pending task is a claim candidate only while its concurrency key has a free
#: slot (re-checked per claim by :func:`admit`). One parameter: now.
ADMITTED = (
    "(tasks.limit_name IS NULL OR (SELECT COUNT(*) FROM tasks h "
    "WHERE h.limit_name = tasks.limit_name AND h.limit_key = tasks.limit_key AND "
    f"{held_rule('h.')}) < tasks.concurrency_cap)"
)

#: What a heartbeat may renew: a limited attempt whose lease expired gave its slot
#: back, and keeps it given back; nor is one renewed while the other holders of its
#: key fill it (a heartbeat whose ``now`` went stale while its worker was frozen
#: must not take back a slot a claim gave away meanwhile). Two parameters: now, now.
RENEWABLE = (
    "(tasks.limit_name IS NULL OR (tasks.lease_expires_at > ? AND (SELECT COUNT(*) FROM tasks h "
    "WHERE h.limit_name = tasks.limit_name AND h.limit_key = tasks.limit_key AND "
    f"NOT (h.run_id = tasks.run_id AND h.cmd = tasks.cmd) AND {held_rule('h.')}) "
    "< tasks.concurrency_cap))"
)


class Admission(NamedTuple):
    """Whether an attempt may start now; if not and a token is what it lacks, when."""

    admitted: bool
    retry_at: float | None = None


#: The buckets one claim has read, by ``(name, key)``: their tokens at the claim's
#: instant, or None for a bucket another claim holds (see :func:`admit`).
Buckets = dict[tuple[str, str], list[float] | None]


def admit(
    conn: Connection,
    row: LimitRow,
    now: float,
    counts: dict[tuple[str, str], int] | None = None,
    buckets: Buckets | None = None,
) -> Admission:
    """Admit one attempt of a task with ``row``'s limits, taking its token.

    The slot is checked before the token is taken, so an attempt that waits for a
    slot takes no token. ``counts``, kept by a caller admitting several attempts in
    one transaction, remembers the slots held per key (counted once, then one more
    per attempt admitted): the key is locked, or SQLite's one writer holds, until
    the transaction ends, so nothing else changes them meanwhile. ``buckets`` does
    the same for the token buckets: each is locked and read once, its tokens taken
    in memory, and :func:`save_buckets` writes what is left once at the end, so a
    claim of 16 attempts costs one bucket read and one write, not 16 of each.
    """
    if row.limit_name is not None and row.concurrency_cap is not None:
        key = (row.limit_name, row.limit_key or "")
        taken = None if counts is None else counts.get(key)
        if taken is None:
            if not try_lock_key(conn, "limit", *key):
                return Admission(False)  # another claim is admitting this key: the next pass
            taken = held(conn, *key, now)
        if counts is not None:
            counts[key] = taken
        if taken >= row.concurrency_cap:
            return Admission(False)
    if row.rate_name is not None and row.rate_tokens and row.rate_period:
        due = _take_token(conn, row, row.rate_key or "", now, buckets)
        if due is False:
            return Admission(False)  # another claim is taking this bucket's tokens: the next pass
        if due is not None:
            return Admission(False, due)
    if counts is not None and row.limit_name is not None:
        counts[(row.limit_name, row.limit_key or "")] += 1
    return Admission(True)


def held(conn: Connection, name: str, key: str, now: float) -> int:
    """How many slots of ``(name, key)`` are held now."""
    count = value(
        conn,
        f"SELECT COUNT(*) FROM tasks WHERE limit_name = ? AND limit_key = ? AND {held_rule()}",
        (name, key, now),
    )
    return int(count or 0)


def refill(
    tokens: float, updated_at: float, rate_tokens: int, period: float, burst: int, now: float
) -> float:
    """The bucket's tokens at ``now``: what it had plus what the time since added, capped."""
    return min(float(burst), tokens + max(0.0, now - updated_at) * rate_tokens / period)


class _Bucket(NamedTuple):
    tokens: float
    updated_at: float


def _take_token(
    conn: Connection, row: LimitRow, key: str, now: float, buckets: Buckets | None
) -> float | bool | None:
    """Take one token: None if taken, False if another claim holds the bucket, else
    the instant the next token is due. With ``buckets``, the bucket is read once
    per claim and written by :func:`save_buckets`; without, written at once."""
    assert row.rate_name is not None and row.rate_tokens and row.rate_period
    name = (row.rate_name, key)
    if buckets is not None and name in buckets:
        cached = buckets[name]
    else:
        cached = None
        if try_lock_key(conn, "rate", *name):
            cached = [_tokens_now(conn, row, key, now)]
        if buckets is not None:
            buckets[name] = cached
    if cached is None:
        return False
    if cached[0] < 1.0:
        return now + (1.0 - cached[0]) * row.rate_period / row.rate_tokens
    cached[0] -= 1.0
    if buckets is None:
        save_buckets(conn, {name: cached}, now)
    return None


def _tokens_now(conn: Connection, row: LimitRow, key: str, now: float) -> float:
    """The bucket's tokens at ``now``, refilled since it was last written."""
    assert row.rate_name is not None and row.rate_tokens and row.rate_period
    burst = max(1, row.rate_burst or 1)
    bucket = one(
        conn,
        _Bucket,
        "SELECT tokens, updated_at FROM limit_buckets WHERE name = ? AND key = ?",
        (row.rate_name, key),
    )
    if bucket is None:
        return float(burst)  # a bucket never used starts full
    return refill(bucket.tokens, bucket.updated_at, row.rate_tokens, row.rate_period, burst, now)


def save_buckets(conn: Connection, buckets: Buckets, now: float) -> None:
    """Write the tokens left in each bucket a claim read (one statement)."""
    rows = [(name, key, left[0], now) for (name, key), left in buckets.items() if left is not None]
    if rows:
        conn.executemany(
            "INSERT INTO limit_buckets (name, key, tokens, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (name, key) DO UPDATE SET tokens = excluded.tokens, "
            "updated_at = excluded.updated_at",
            rows,
        )


# -- the limits workers declare, their use, who waits ----------------------------------
def record_limits(conn: Connection, declared: Sequence[DeclaredLimit], now: float) -> None:
    """Record (or update) the limits a starting worker declares."""
    conn.executemany(
        "INSERT INTO limits (name, concurrency_cap, keyed, rate_tokens, rate_period, rate_burst, "
        "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
        "concurrency_cap = excluded.concurrency_cap, keyed = excluded.keyed, "
        "rate_tokens = excluded.rate_tokens, rate_period = excluded.rate_period, "
        "rate_burst = excluded.rate_burst, updated_at = excluded.updated_at",
        [
            (
                d.name,
                d.concurrency_cap,
                int(d.keyed),
                d.rate_tokens,
                d.rate_period,
                d.rate_burst,
                now,
            )
            for d in declared
        ],
    )


class _UseRow(NamedTuple):
    name: str
    concurrency_cap: int | None
    keyed: int
    rate_tokens: int | None
    rate_period: float | None
    rate_burst: int | None
    held: int
    waiting: int
    tokens: float | None
    updated_at: float | None


def limit_use(conn: Connection, now: float) -> list[LimitUse]:
    """Every declared limit with the slots held, the attempts waiting, the tokens."""
    rows = every(
        conn,
        _UseRow,
        "SELECT l.name, l.concurrency_cap, l.keyed, l.rate_tokens, l.rate_period, l.rate_burst, "
        "(SELECT COUNT(*) FROM tasks h WHERE h.limit_name = l.name AND "
        f"{held_rule('h.')}) AS held, "
        "(SELECT COUNT(*) FROM tasks w WHERE w.status = 'pending' AND "
        "(w.limit_name = l.name OR w.rate_name = l.name)) AS waiting, "
        "b.tokens, b.updated_at FROM limits l "
        "LEFT JOIN limit_buckets b ON b.name = l.name AND b.key = '' ORDER BY l.name",
        (now,),
    )
    return [_use(r, now) for r in rows]


def _use(r: _UseRow, now: float) -> LimitUse:
    limit = DeclaredLimit(
        r.name, r.concurrency_cap, bool(r.keyed), r.rate_tokens, r.rate_period, r.rate_burst
    )
    tokens: float | None = None
    if r.rate_tokens and r.rate_period and not r.keyed:
        burst = max(1, r.rate_burst or 1)
        tokens = (
            float(burst)
            if r.tokens is None or r.updated_at is None
            else refill(r.tokens, r.updated_at, r.rate_tokens, r.rate_period, burst, now)
        )
    return LimitUse(limit, held=int(r.held), waiting=int(r.waiting), tokens=tokens)


class _Waiting(NamedTuple):
    run_id: str
    name: str
    available_at: float
    limit_name: str | None
    limit_key: str | None
    concurrency_cap: int | None
    rate_name: str | None


def limit_waits(conn: Connection, run_ids: Sequence[str], now: float) -> list[LimitWait]:
    """The pending tasks of ``run_ids`` held back by a full key or an empty bucket."""
    if not run_ids:
        return []
    rows = every(
        conn,
        _Waiting,
        f"SELECT {columns(_Waiting)} FROM tasks WHERE status = 'pending' "
        f"AND run_id IN ({','.join('?' * len(run_ids))}) "
        "AND (limit_name IS NOT NULL OR rate_name IS NOT NULL) ORDER BY run_id, cmd",
        tuple(run_ids),
    )
    waits = []
    for r in rows:
        if r.limit_name is not None and r.concurrency_cap is not None:
            taken = held(conn, r.limit_name, r.limit_key or "", now)
            if taken >= r.concurrency_cap:
                waits.append(
                    LimitWait(
                        r.run_id, r.name, "concurrency", r.limit_name, taken, r.concurrency_cap
                    )
                )
                continue
        if r.rate_name is not None and r.available_at > now:
            waits.append(LimitWait(r.run_id, r.name, "rate", r.rate_name, until=r.available_at))
    return waits


class SqlLimitsMixin(LimitStore):
    async def _read(self, op: Any) -> Any: ...  # provided by SqlStore

    async def _write(self, op: Any, notify: Any = False) -> Any: ...  # provided by SqlStore

    async def record_limits(self, limits: Sequence[DeclaredLimit], now: float) -> None:
        if limits:
            await self._write(lambda c: record_limits(c, list(limits), now))

    async def limit_use(self, now: float) -> list[LimitUse]:
        use: list[LimitUse] = await self._read(lambda c: limit_use(c, now) + flow_use(c))
        return use

    async def limit_waits(self, run_ids: Sequence[str], now: float) -> list[LimitWait]:
        waits: list[LimitWait] = await self._read(lambda c: limit_waits(c, list(run_ids), now))
        return waits
