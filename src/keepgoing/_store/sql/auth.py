"""The SQL stores' token facet (mixed into ``SqlStore``); table ``tokens`` (0004)."""

from __future__ import annotations

import sqlite3
from typing import Any, NamedTuple

from keepgoing._payload import dumps, loads
from keepgoing._store.auth_protocol import AuthStore, TokenKind, TokenRecord
from keepgoing._store.refused import name_refused
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


TOKEN_COLUMNS = columns(TokenRow)


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


def _create(conn: sqlite3.Connection, t: TokenRecord) -> None:
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


def _get(conn: sqlite3.Connection, token_id: str) -> TokenRecord | None:
    row = one(conn, TokenRow, f"SELECT {TOKEN_COLUMNS} FROM tokens WHERE token_id = ?", (token_id,))
    return _record(row) if row is not None else None


def _revoke(conn: sqlite3.Connection, token_id: str, now: float) -> TokenRecord | None:
    conn.execute(
        "UPDATE tokens SET revoked_at = ? WHERE token_id = ? AND revoked_at IS NULL",
        (now, token_id),
    )
    return _get(conn, token_id)
