"""The SQLite store's token facet (mixed into ``SqliteStore``); table ``tokens`` (0004)."""

from __future__ import annotations

import sqlite3
from typing import Any

from keepgoing._payload import dumps, loads
from keepgoing._store.auth_protocol import AuthStore, TokenRecord
from keepgoing.errors import StoreError

__all__ = ["SqliteAuthMixin"]

_COLUMNS = "token_id, name, kind, permissions, secret_hash, created_at, created_by, revoked_at"


class SqliteAuthMixin(AuthStore):
    async def _read(self, op: Any) -> Any: ...  # provided by SqliteStore

    async def _write(self, op: Any, notify: Any = False) -> Any: ...

    async def create_token(self, token: TokenRecord) -> None:
        await self._write(lambda c: _create(c, token))

    async def get_token(self, token_id: str) -> TokenRecord | None:
        token: TokenRecord | None = await self._read(lambda c: _get(c, token_id))
        return token

    async def list_tokens(self, *, include_revoked: bool = False) -> list[TokenRecord]:
        where = "" if include_revoked else "WHERE revoked_at IS NULL "
        sql = f"SELECT {_COLUMNS} FROM tokens {where}ORDER BY created_at, rowid"
        tokens: list[TokenRecord] = await self._read(
            lambda c: [_record(r) for r in c.execute(sql).fetchall()]
        )
        return tokens

    async def revoke_token(self, token_id: str, now: float) -> TokenRecord | None:
        token: TokenRecord | None = await self._write(lambda c: _revoke(c, token_id, now))
        return token


def _record(row: tuple[Any, ...]) -> TokenRecord:
    return TokenRecord(
        token_id=row[0],
        name=row[1],
        kind=row[2],
        permissions=tuple(loads(row[3])),
        secret_hash=row[4],
        created_at=row[5],
        created_by=row[6],
        revoked_at=row[7],
    )


def _create(conn: sqlite3.Connection, t: TokenRecord) -> None:
    try:
        conn.execute(
            f"INSERT INTO tokens ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
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
    except sqlite3.IntegrityError:
        raise StoreError(f"a token with id {t.token_id!r} already exists") from None


def _get(conn: sqlite3.Connection, token_id: str) -> TokenRecord | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM tokens WHERE token_id = ?", (token_id,)).fetchone()
    return _record(row) if row is not None else None


def _revoke(conn: sqlite3.Connection, token_id: str, now: float) -> TokenRecord | None:
    conn.execute(
        "UPDATE tokens SET revoked_at = ? WHERE token_id = ? AND revoked_at IS NULL",
        (now, token_id),
    )
    return _get(conn, token_id)
