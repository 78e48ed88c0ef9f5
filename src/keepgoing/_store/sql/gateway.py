"""The SQL stores' gateway facet (mixed into ``SqlStore``): tables ``gateway_calls``,
``gateway_spend`` and ``gateway_keys`` (0010); the usage reports are in
``gateway_usage.py``.

``mark_attempt_calls`` is called by the task SQL (``tasks.py``) inside the
transaction that records an attempt's outcome.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from keepgoing._payload import dumps, loads
from keepgoing._store.gateway_protocol import (
    RESERVATION_TTL,
    GatewayCall,
    GatewayKey,
    GatewayStore,
    KeyUsage,
    ModelUsage,
    UsageQuery,
    UsageReport,
)
from keepgoing._store.refused import name_refused
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.gateway_usage import check_query, usage_report
from keepgoing.errors import StoreError

__all__ = [
    "CALL_COLUMNS",
    "OPEN_CALLS",
    "SqlGatewayMixin",
    "mark_attempt_calls",
    "storable",
    "utc_day",
]

CALL_COLUMNS: tuple[str, ...] = (
    "call_id",
    "key_id",
    "operation",
    "model_asked",
    "model_answered",
    "provider",
    "input_tokens",
    "output_tokens",
    "cost",
    "latency",
    "ttft",
    "status",
    "created_at",
    "error",
    "streamed",
    "tries",
    "run_id",
    "step",
    "attempt",
    "operation_id",
    "attempt_state",
    "prompt",
    "answer",
)
KEY_COLUMNS: tuple[str, ...] = (
    "token_id",
    "models",
    "requests_per_minute",
    "tokens_per_minute",
    "daily_budget",
    "total_budget",
    "updated_at",
)
_CALLS = ", ".join(CALL_COLUMNS)
_KEYS = ", ".join(KEY_COLUMNS)


def utc_day(at: float) -> str:
    """The UTC date of ``at`` (``YYYY-MM-DD``): the key of the daily roll-up."""
    return time.strftime("%Y-%m-%d", time.gmtime(at))


@name_refused
class SqlGatewayMixin(GatewayStore):
    async def _read(self, op: Any) -> Any: ...  # provided by SqlStore

    async def _write(self, op: Any, notify: Any = False) -> Any: ...

    async def _write_lease(self, op: Any, notify: Any = False) -> Any: ...

    async def record_gateway_call(self, call: GatewayCall) -> None:
        await self._write(lambda c: _record(c, call))

    async def reserve_gateway_call(
        self,
        call: GatewayCall,
        now: float,
        refuse: Callable[[GatewayKey, KeyUsage], Exception | None],
    ) -> Exception | None:
        # A reservation holds its key's budget as a lease holds a run (it expires after
        # RESERVATION_TTL): committed without an fsync of its own, as leases are. It
        # survives a crash of any process, and the settling write's fsync (which comes
        # before the call's answer is sent) flushes it too; only a power loss can take it
        # back, and that also ends the server whose call it held.
        refusal: Exception | None = await self._write_lease(
            lambda c: _reserve(c, call, now, refuse)
        )
        return refusal

    async def gateway_key_usage(self, key_id: str, now: float) -> KeyUsage:
        usage: KeyUsage = await self._read(lambda c: _usage(c, key_id, now))
        return usage

    async def gateway_key_state(
        self, token_id: str, now: float
    ) -> tuple[GatewayKey | None, KeyUsage | None]:
        state: tuple[GatewayKey | None, KeyUsage | None] = await self._read(
            lambda c: _key_state(c, token_id, now)
        )
        return state

    async def list_gateway_calls(
        self,
        *,
        key_id: str | None = None,
        run_id: str | None = None,
        since: float | None = None,
        limit: int = 100,
    ) -> list[GatewayCall]:
        where, params = ["1 = 1"], []
        for clause, value in (
            ("key_id = ?", key_id),
            ("run_id = ?", run_id),
            ("created_at >= ?", since),
        ):
            if value is not None:
                where.append(clause)
                params.append(value)
        sql = (
            f"SELECT {_CALLS} FROM gateway_calls WHERE {' AND '.join(where)} "
            "ORDER BY created_at DESC, call_id DESC LIMIT ?"
        )
        calls: list[GatewayCall] = await self._read(
            lambda c: [_call(r) for r in c.execute(sql, (*params, max(limit, 0))).fetchall()]
        )
        return calls

    async def gateway_usage(self, query: UsageQuery) -> UsageReport:
        check_query(query)
        report: UsageReport = await self._read(lambda c: usage_report(c, query))
        return report

    async def gateway_usage_by_model(self, *, since: float | None = None) -> list[ModelUsage]:
        rows: list[ModelUsage] = await self._read(lambda c: _by_model(c, since))
        return rows

    async def set_gateway_key(self, key: GatewayKey) -> None:
        await self._write(lambda c: _set_key(c, key))

    async def get_gateway_key(self, token_id: str) -> GatewayKey | None:
        sql = f"SELECT {_KEYS} FROM gateway_keys WHERE token_id = ?"
        key: GatewayKey | None = await self._read(
            lambda c: _key(row) if (row := c.execute(sql, (token_id,)).fetchone()) else None
        )
        return key

    async def list_gateway_keys(self) -> list[GatewayKey]:
        sql = f"SELECT {_KEYS} FROM gateway_keys ORDER BY updated_at, token_id"
        keys: list[GatewayKey] = await self._read(
            lambda c: [_key(r) for r in c.execute(sql).fetchall()]
        )
        return keys


#: The open ledger rows of one attempt (parameters: run id, step, attempt): the rows
#: :func:`mark_attempt_calls` settles. A completion asks ``EXISTS`` of it first.
OPEN_CALLS = (
    "SELECT 1 FROM gateway_calls "
    "WHERE run_id = ? AND step = ? AND attempt = ? AND attempt_state = 'open'"
)


def mark_attempt_calls(conn: Connection, run_id: str, step: int, attempt: int, state: str) -> None:
    """Settle the ledger rows of one attempt, in the transaction of its outcome."""
    conn.execute(
        "UPDATE gateway_calls SET attempt_state = ? "
        "WHERE run_id = ? AND step = ? AND attempt = ? AND attempt_state = 'open'",
        (state, run_id, step, attempt),
    )


#: Text a call's row holds that the caller chose (its model name, its prompt, errors
#: quoting them). Every value is made storable on both stores before it is written.
_TEXT_COLUMNS: tuple[str, ...] = ("model_asked", "model_answered", "provider", "error")
_TEXT_COLUMNS += ("run_id", "operation_id", "prompt", "answer", "key_id")


def storable(text: str | None) -> str | None:
    """``text`` as both stores accept it: a lone surrogate becomes its escape (``\\udc80``)
    and a NUL ``\\x00``, so a call is metered whatever its prompt held."""
    if text is None:
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text.replace("\x00", "\\x00") if "\x00" in text else text


_UPSERT = (
    f"INSERT INTO gateway_calls ({_CALLS}) VALUES ({', '.join('?' * len(CALL_COLUMNS))}) "
    "ON CONFLICT (call_id) DO UPDATE SET "
    + ", ".join(f"{name} = excluded.{name}" for name in CALL_COLUMNS[1:])
    + " WHERE gateway_calls.status = 'pending' RETURNING call_id"
)


def _values(call: GatewayCall) -> list[Any]:
    values = [getattr(call, name) for name in CALL_COLUMNS]
    for name in _TEXT_COLUMNS:
        index = CALL_COLUMNS.index(name)
        values[index] = storable(values[index])
    values[CALL_COLUMNS.index("streamed")] = int(call.streamed)
    return values


def _record(conn: Connection, call: GatewayCall) -> None:
    # A new row, or the settling of the call's reservation (its 'pending' row) in place.
    row = conn.execute(_UPSERT, _values(call)).fetchone()
    if row is None:
        raise StoreError(f"a gateway call with id {call.call_id!r} is already recorded")
    if call.status in ("refused", "pending"):
        return
    conn.execute(
        "INSERT INTO gateway_spend (key_id, day, requests, tokens, cost) VALUES (?, ?, 1, ?, ?) "
        "ON CONFLICT (key_id, day) DO UPDATE SET requests = gateway_spend.requests + 1, "
        "tokens = gateway_spend.tokens + excluded.tokens, "
        "cost = gateway_spend.cost + excluded.cost",
        (call.key_id, utc_day(call.created_at), call.total_tokens, call.cost),
    )


def _key_state(
    conn: Connection, token_id: str, now: float
) -> tuple[GatewayKey | None, KeyUsage | None]:
    row = conn.execute(
        f"SELECT {_KEYS} FROM gateway_keys WHERE token_id = ?", (token_id,)
    ).fetchone()
    if row is None:
        return None, None
    key = _key(row)
    limited = any(
        v is not None
        for v in (
            key.requests_per_minute,
            key.tokens_per_minute,
            key.daily_budget,
            key.total_budget,
        )
    )
    return key, _usage(conn, token_id, now) if limited else None


def _reserve(
    conn: Connection,
    call: GatewayCall,
    now: float,
    refuse: Callable[[GatewayKey, KeyUsage], Exception | None],
) -> Exception | None:
    # The key's row is the lock every admission of that key takes first (and the only
    # lock it takes), so two admissions never both see room for one more call.
    row = conn.execute(
        f"SELECT {_KEYS} FROM gateway_keys WHERE token_id = ? /*FOR UPDATE*/", (call.key_id,)
    ).fetchone()
    refusal = refuse(_key(row), _usage(conn, call.key_id, now)) if row is not None else None
    if refusal is None:
        _record(conn, replace(call, status="pending"))
        return None
    refused = replace(
        call,
        status="refused",
        input_tokens=0,
        output_tokens=0,
        cost=0.0,
        tries=0,
        error=str(refusal)[:2000],
    )
    _record(conn, refused)
    return refusal


def _usage(conn: Connection, key_id: str, now: float) -> KeyUsage:
    minute = conn.execute(
        "SELECT COUNT(*) AS requests, "
        "CAST(COALESCE(SUM(input_tokens + output_tokens), 0) AS BIGINT) AS tokens, "
        "MIN(created_at) AS oldest FROM gateway_calls "
        "WHERE key_id = ? AND created_at > ? AND status <> 'refused'",
        (key_id, now - 60.0),
    ).fetchone()
    spend = conn.execute(
        "SELECT CAST(COALESCE(SUM(CASE WHEN day = ? THEN cost ELSE 0 END), 0) "
        "AS DOUBLE PRECISION) AS day_cost, "
        "CAST(COALESCE(SUM(cost), 0) AS DOUBLE PRECISION) AS total_cost "
        "FROM gateway_spend WHERE key_id = ?",
        (utc_day(now), key_id),
    ).fetchone()
    # Reservations of calls still running count as spent (until they settle, or for
    # RESERVATION_TTL after a server that died mid-call left them behind).
    held = conn.execute(
        "SELECT CAST(COALESCE(SUM(cost), 0) AS DOUBLE PRECISION) AS held FROM gateway_calls "
        "WHERE key_id = ? AND status = 'pending' AND created_at > ?",
        (key_id, now - RESERVATION_TTL),
    ).fetchone()
    m = dict(zip(("requests", "tokens", "oldest"), minute, strict=True))
    s = dict(zip(("day_cost", "total_cost"), spend, strict=True))
    reserved = float(held[0])
    return KeyUsage(
        minute_requests=int(m["requests"]),
        minute_tokens=int(m["tokens"]),
        minute_oldest=m["oldest"],
        day_cost=float(s["day_cost"]) + reserved,
        total_cost=float(s["total_cost"]) + reserved,
    )


_BY_MODEL = (
    "model",
    "provider",
    "calls",
    "errors",
    "input_tokens",
    "output_tokens",
    "cost",
    "latency_sum",
)


def _by_model(conn: Connection, since: float | None) -> list[ModelUsage]:
    where = "WHERE created_at >= ?" if since is not None else ""
    rows = conn.execute(
        "SELECT COALESCE(model_answered, model_asked) AS model, provider, COUNT(*) AS calls, "
        "CAST(SUM(CASE WHEN status = 'ok' THEN 0 ELSE 1 END) AS BIGINT) AS errors, "
        "CAST(SUM(input_tokens) AS BIGINT), CAST(SUM(output_tokens) AS BIGINT), "
        "CAST(SUM(cost) AS DOUBLE PRECISION), CAST(SUM(latency) AS DOUBLE PRECISION) "
        f"FROM gateway_calls {where} "
        "GROUP BY COALESCE(model_answered, model_asked), provider ORDER BY 7 DESC, 1",
        () if since is None else (since,),
    ).fetchall()
    out = []
    for row in rows:
        r = dict(zip(_BY_MODEL, row, strict=True))
        out.append(
            ModelUsage(
                model=r["model"],
                provider=r["provider"],
                calls=int(r["calls"]),
                errors=int(r["errors"]),
                input_tokens=int(r["input_tokens"]),
                output_tokens=int(r["output_tokens"]),
                cost=float(r["cost"]),
                latency_sum=float(r["latency_sum"]),
            )
        )
    return out


def _call(row: Any) -> GatewayCall:
    r = dict(zip(CALL_COLUMNS, row, strict=True))
    r["streamed"] = bool(r["streamed"])
    return GatewayCall(**r)


def _key(row: Any) -> GatewayKey:
    r = dict(zip(KEY_COLUMNS, row, strict=True))
    models = r.pop("models")
    return GatewayKey(models=tuple(loads(models)) if models is not None else None, **r)


def _set_key(conn: Connection, key: GatewayKey) -> None:
    values = [getattr(key, name) for name in KEY_COLUMNS]
    values[1] = dumps(list(key.models)) if key.models is not None else None
    updates = ", ".join(f"{name} = excluded.{name}" for name in KEY_COLUMNS[1:])
    conn.execute(
        f"INSERT INTO gateway_keys ({_KEYS}) VALUES ({', '.join('?' * len(KEY_COLUMNS))}) "
        f"ON CONFLICT (token_id) DO UPDATE SET {updates}",
        values,
    )
