"""Creating and revoking tokens, each change written to the audit log.

Used by the API (``/api/v1/tokens``) and by ``keepgoing token`` in store mode.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Sequence

from keepgoing._store.auth_protocol import PERMISSIONS, TokenKind, TokenRecord
from keepgoing._store.protocol import Store
from keepgoing._store.records import AuditEntry
from keepgoing.errors import InvalidRequestError, TokenNotFoundError

__all__ = ["check_permissions", "create_token", "hash_secret", "new_token", "revoke_token"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}$")


def hash_secret(secret: str) -> str:
    """The hex SHA-256 of a token's secret: all the store keeps of it."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def new_token() -> tuple[str, str, str]:
    """A fresh ``(token_id, token_text, secret_hash)``; the text is shown once.

    The text is ``kg_<id>_<secret>``: a 16-hex-digit public id, and 32 random
    bytes from :func:`secrets.token_urlsafe`.
    """
    token_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    return token_id, f"kg_{token_id}_{secret}", hash_secret(secret)


def check_permissions(permissions: Sequence[str]) -> tuple[str, ...]:
    """``permissions`` without repeats, in the canonical order.

    Raises:
        InvalidRequestError: empty, or a name that is not a permission.
    """
    unknown = sorted(set(permissions) - set(PERMISSIONS))
    if unknown or not permissions:
        raise InvalidRequestError(
            f"unknown permission(s) {', '.join(unknown)}; choose from {', '.join(PERMISSIONS)}"
            if unknown
            else f"a token needs at least one permission: {', '.join(PERMISSIONS)}"
        )
    return tuple(p for p in PERMISSIONS if p in permissions)


async def create_token(
    store: Store,
    *,
    name: str,
    kind: str,
    permissions: Sequence[str],
    actor_kind: str,
    actor_id: str,
    now: float,
) -> tuple[TokenRecord, str]:
    """Create a token; returns it and its secret text (the only time it is shown).

    Raises:
        InvalidRequestError: a bad name, kind or permission.
    """
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidRequestError(
            f"token name {name!r} is not valid: 1-100 letters, digits and ._@+- "
            "starting with a letter or digit"
        )
    if kind not in ("user", "service"):
        raise InvalidRequestError(f"token kind must be 'user' or 'service', not {kind!r}")
    granted = check_permissions(permissions)
    token_id, text, secret_hash = new_token()
    the_kind: TokenKind = "user" if kind == "user" else "service"
    record = TokenRecord(
        token_id=token_id,
        name=name,
        kind=the_kind,
        permissions=granted,
        secret_hash=secret_hash,
        created_at=now,
        created_by=f"{actor_kind}:{actor_id}",
    )
    await store.create_token(record)
    detail = {"token_id": token_id, "name": name, "kind": kind, "permissions": list(granted)}
    await store.append_audit(AuditEntry(now, actor_kind, actor_id, "token.create", detail=detail))
    return record, text


async def revoke_token(
    store: Store, token_id: str, *, actor_kind: str, actor_id: str, now: float
) -> TokenRecord:
    """Revoke ``token_id``; revoking a revoked token changes nothing.

    Raises:
        TokenNotFoundError: no token has that id.
    """
    record = await store.revoke_token(token_id, now)
    if record is None:
        raise TokenNotFoundError(f"no token has id {token_id!r}")
    if record.revoked_at == now:
        detail = {"token_id": token_id, "name": record.name, "kind": record.kind}
        await store.append_audit(
            AuditEntry(now, actor_kind, actor_id, "token.revoke", detail=detail)
        )
    return record
