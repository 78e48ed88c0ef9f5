"""The token facet (``AuthStore``) on every store."""

from __future__ import annotations

import pytest

from keepgoing._store.auth_protocol import SessionRecord, TokenRecord
from keepgoing._store.protocol import Store
from keepgoing.errors import StoreError

from ._builders import NOW


def token(token_id: str = "0123456789abcdef", **changes: object) -> TokenRecord:
    fields: dict[str, object] = {
        "token_id": token_id,
        "name": "alice",
        "kind": "user",
        "permissions": ("runs.read", "messages.send"),
        "secret_hash": "ab" * 32,
        "created_at": NOW,
        "created_by": "user:root",
    }
    fields.update(changes)
    return TokenRecord(**fields)  # type: ignore[arg-type]


async def test_create_get_list(store: Store) -> None:
    first, second = token("a" * 16), token("b" * 16, name="ci", kind="service", created_at=NOW + 1)
    await store.create_token(first)
    await store.create_token(second)
    assert await store.get_token("a" * 16) == first
    assert await store.get_token("c" * 16) is None
    assert await store.list_tokens() == [first, second]


async def test_a_taken_id_is_refused(store: Store) -> None:
    await store.create_token(token())
    with pytest.raises(StoreError, match="already exists"):
        await store.create_token(token(name="mallory"))
    assert (await store.get_token(token().token_id)) == token()


async def test_revoke_keeps_the_row_and_its_first_time(store: Store) -> None:
    await store.create_token(token())
    revoked = await store.revoke_token(token().token_id, NOW + 5)
    assert revoked is not None and revoked.revoked_at == NOW + 5 and not revoked.active
    again = await store.revoke_token(token().token_id, NOW + 9)
    assert again is not None and again.revoked_at == NOW + 5
    assert await store.list_tokens() == []
    assert await store.list_tokens(include_revoked=True) == [revoked]
    assert await store.get_token(token().token_id) == revoked
    assert await store.revoke_token("f" * 16, NOW) is None


def test_admin_allows_everything() -> None:
    assert token(permissions=("admin",)).allows("messages.send")
    assert token().allows("messages.send") and not token().allows("runs.cancel")


def _session(session_id: str, **changes: object) -> SessionRecord:
    fields: dict[str, object] = {
        "session_id": session_id,
        "secret_hash": "ab" * 32,
        "token_id": "0123456789abcdef",
        "created_at": 1000.0,
        "seen_at": 1000.0,
        "expires_at": 5000.0,
    }
    fields.update(changes)
    return SessionRecord(**fields)  # type: ignore[arg-type]


async def test_a_session_is_stored_touched_and_ended(store: Store) -> None:
    await store.create_session(_session("s1"), forget_before=0.0)
    assert await store.get_session("s1") == _session("s1")
    with pytest.raises(StoreError, match="already exists"):
        await store.create_session(_session("s1"), forget_before=0.0)
    await store.touch_session("s1", 1200.0)
    assert (await store.get_session("s1")).seen_at == 1200.0  # type: ignore[union-attr]
    await store.end_session("s1", 1300.0)
    await store.end_session("s1", 1400.0)  # the first end stays
    await store.touch_session("s1", 1500.0)  # an ended session is not revived
    ended = await store.get_session("s1")
    assert ended is not None and (ended.ended_at, ended.seen_at) == (1300.0, 1200.0)
    assert await store.get_session("nope") is None


async def test_new_sessions_forget_the_expired_and_the_ended(store: Store) -> None:
    await store.create_session(_session("old", expires_at=2000.0), forget_before=0.0)
    await store.create_session(_session("out"), forget_before=0.0)
    await store.end_session("out", 2500.0)
    await store.create_session(_session("live"), forget_before=0.0)
    await store.create_session(_session("new", created_at=3000.0), forget_before=3000.0)
    assert await store.get_session("old") is None and await store.get_session("out") is None
    assert await store.get_session("live") is not None
