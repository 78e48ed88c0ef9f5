"""The store's token facet: API tokens, kept as hashes.

A token's secret is shown once, when it is created; the store keeps only its
SHA-256 hash. A token's id is public (it is the ``sender_id`` of a service
token's messages and it appears in the audit log); its secret never is.
Revoking keeps the row, so the audit log can still name the token.

Every backend implements :class:`AuthStore` as part of
:class:`~keepgoing._store.protocol.Store`; ``tests/contract/test_tokens.py``
checks them all.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Literal

__all__ = ["PERMISSIONS", "AuthStore", "SessionRecord", "TokenKind", "TokenRecord"]

TokenKind = Literal["user", "service"]

#: Every permission a token can carry; ``admin`` implies all the others.
PERMISSIONS: tuple[str, ...] = (
    "runs.read",
    "workflows.trigger",
    "messages.send",
    "events.publish",
    "runs.cancel",
    "runs.resume",
    "runs.fork",
    "volumes.read",
    "volumes.write",
    "groups.read",
    "groups.write",
    "groups.kill",
    "workers.kill",
    "gateway.use",
    "gateway.read",
    "schedules.read",
    "schedules.write",
    "admin",
)


@dataclass(frozen=True)
class TokenRecord:
    """One API token. ``secret_hash`` is the hex SHA-256 of its secret.

    For a ``user`` token, ``name`` is the user's id; for a ``service`` token
    it is a label, and the sender id of its messages is ``token_id``.
    """

    token_id: str
    name: str
    kind: TokenKind
    permissions: tuple[str, ...]
    secret_hash: str
    created_at: float
    created_by: str = ""
    revoked_at: float | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def allows(self, permission: str) -> bool:
        """Whether the token carries ``permission`` (``admin`` carries every one)."""
        return permission in self.permissions or "admin" in self.permissions


@dataclass(frozen=True)
class SessionRecord:
    """A browser session of the web UI: the cookie holds ``session_id`` and a secret,
    whose SHA-256 is ``secret_hash``; it acts as token ``token_id``. It lasts until
    ``expires_at`` at most, ends when idle too long after ``seen_at`` (the server's
    rule), and at sign-out (``ended_at``)."""

    session_id: str
    secret_hash: str
    token_id: str
    created_at: float
    seen_at: float
    expires_at: float
    ended_at: float | None = None


class AuthStore(abc.ABC):
    """API tokens. Methods may raise :class:`~keepgoing.errors.StoreError`."""

    @abc.abstractmethod
    async def create_token(self, token: TokenRecord) -> None:
        """Store a new token.

        Raises:
            StoreError: a token with ``token.token_id`` exists.
        """

    @abc.abstractmethod
    async def get_token(self, token_id: str) -> TokenRecord | None:
        """The token ``token_id`` (revoked or not), or None."""

    @abc.abstractmethod
    async def list_tokens(self, *, include_revoked: bool = False) -> list[TokenRecord]:
        """Tokens, oldest first; revoked ones only with ``include_revoked``."""

    @abc.abstractmethod
    async def revoke_token(self, token_id: str, now: float) -> TokenRecord | None:
        """Revoke ``token_id`` at ``now`` and return it; None if there is no such token.

        Revoking a revoked token changes nothing (its first ``revoked_at`` stays).
        """

    @abc.abstractmethod
    async def create_session(self, session: SessionRecord, *, forget_before: float) -> None:
        """Store a new session, and delete sessions that ended or expired before
        ``forget_before`` (so the table holds only the living and the recent).

        Raises:
            StoreError: a session with ``session.session_id`` exists.
        """

    @abc.abstractmethod
    async def get_session(self, session_id: str) -> SessionRecord | None:
        """The session ``session_id`` (ended or not), or None."""

    @abc.abstractmethod
    async def touch_session(self, session_id: str, now: float) -> None:
        """Record that the session was used at ``now`` (an ended one stays ended)."""

    @abc.abstractmethod
    async def end_session(self, session_id: str, now: float) -> None:
        """End the session at ``now`` (sign-out); ending an ended one changes nothing."""
