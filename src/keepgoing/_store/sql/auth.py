"""The SQL stores' token facet (mixed into ``SqlStore``): tables ``tokens`` (0004) and
``ui_sessions`` (0015)."""

from __future__ import annotations

from typing import Any, NamedTuple

from keepgoing._payload import dumps, loads
from keepgoing._store.auth_protocol import AuthStore, SessionRecord, TokenKind, TokenRecord
from keepgoing._store.refused import name_refused
from keepgoing._store.sql.connection import Connection
from keepgoing._store.sql.rows import columns, every, one
from keepgoing.errors import StoreError

__all__ = ["TOKEN_COLUMNS", "SqlAuthMixin"]


class TokenRow(NamedTuple):
    """A ``tokens`` row as :data:`TOKEN_COLUMNS` selects it."""

    token_id: str
    name: str
    kind: TokenKind
    permissions: str
    secret_hash: str
    created_at: float
    created_by: str
    revoked_at: float | None


class _TokenId(NamedTuple):
    token_id: str


class SessionRow(NamedTuple):
    """A ``ui_sessions`` row as :data:`SESSION_COLUMNS` selects it."""

    session_id: str
    secret_hash: str
    token_id: str
    created_at: float
    seen_at: float
    expires_at: float
    ended_at: float | None


class _SessionId(NamedTuple):
    session_id: str


TOKEN_COLUMNS = columns(TokenRow)
SESSION_COLUMNS = columns(SessionRow)


@name_refused
class SqlAuthMixin(AuthStore):
    async def _read(self, op: Any) -> Any: ...  # provided by SqlStore

    async def _write(self, op: Any, notify: Any = False) -> Any: ...

    async def create_token(self, token: TokenRecord) -> None:
        await self._write(lambda c: _create(c, token))

    async def get_token(self, token_id: str) -> TokenRecord | None:
        token: TokenRecord | None = await self._read(lambda c: _get(c, token_id))
        return token

    async def list_tokens(self, *, include_revoked: bool = False) -> list[TokenRecord]:
        where = "" if include_revoked else "WHERE revoked_at IS NULL "
        sql = f"SELECT {TOKEN_COLUMNS} FROM tokens {where}ORDER BY created_at, rowid"
        tokens: list[TokenRecord] = await self._read(
            lambda c: [_record(r) for r in every(c, TokenRow, sql)]
        )
        return tokens

    async def revoke_token(self, token_id: str, now: float) -> TokenRecord | None:
        token: TokenRecord | None = await self._write(lambda c: _revoke(c, token_id, now))
        return token

    async def create_session(self, session: SessionRecord, *, forget_before: float) -> None:
        await self._write(lambda c: _create_session(c, session, forget_before))

    async def get_session(self, session_id: str) -> SessionRecord | None:
        sql = f"SELECT {SESSION_COLUMNS} FROM ui_sessions WHERE session_id = ?"
        row: SessionRow | None = await self._read(lambda c: one(c, SessionRow, sql, (session_id,)))
        return SessionRecord(*row) if row is not None else None

    async def touch_session(self, session_id: str, now: float) -> None:
        sql = "UPDATE ui_sessions SET seen_at = ? WHERE session_id = ? AND ended_at IS NULL"
        await self._write(lambda c: c.execute(sql, (now, session_id)))

    async def end_session(self, session_id: str, now: float) -> None:
        sql = "UPDATE ui_sessions SET ended_at = ? WHERE session_id = ? AND ended_at IS NULL"
        await self._write(lambda c: c.execute(sql, (now, session_id)))


def _record(r: TokenRow) -> TokenRecord:
    return TokenRecord(
        token_id=r.token_id,
        name=r.name,
        kind=r.kind,
        permissions=tuple(loads(r.permissions)),
        secret_hash=r.secret_hash,
        created_at=r.created_at,
        created_by=r.created_by,
        revoked_at=r.revoked_at,
    )


def _create(conn: Connection, t: TokenRecord) -> None:
    # A failed statement aborts a PostgreSQL transaction, so the duplicate is
    # detected with ON CONFLICT rather than by catching the error.
    row = one(
        conn,
        _TokenId,
        f"INSERT INTO tokens ({TOKEN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (token_id) DO NOTHING RETURNING token_id",
        (
            t.token_id,
            t.name,
            t.kind,
            dumps(list(t.permissions)),
            t.secret_hash,
            t.created_at,
            t.created_by,
            t.revoked_at,
        ),
    )
    if row is None:
        raise StoreError(f"a token with id {t.token_id!r} already exists")


def _get(conn: Connection, token_id: str) -> TokenRecord | None:
    row = one(conn, TokenRow, f"SELECT {TOKEN_COLUMNS} FROM tokens WHERE token_id = ?", (token_id,))
    return _record(row) if row is not None else None


def _revoke(conn: Connection, token_id: str, now: float) -> TokenRecord | None:
    conn.execute(
        "UPDATE tokens SET revoked_at = ? WHERE token_id = ? AND revoked_at IS NULL",
        (now, token_id),
    )
    return _get(conn, token_id)


def _create_session(conn: Connection, s: SessionRecord, forget_before: float) -> None:
    conn.execute(
        "DELETE FROM ui_sessions WHERE expires_at < ? OR ended_at < ?",
        (forget_before, forget_before),
    )
    row = one(
        conn,
        _SessionId,
        f"INSERT INTO ui_sessions ({SESSION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (session_id) DO NOTHING RETURNING session_id",
        (s.session_id, s.secret_hash, s.token_id, s.created_at, s.seen_at, s.expires_at, None),
    )
    if row is None:
        raise StoreError(f"a session with id {s.session_id!r} already exists")
