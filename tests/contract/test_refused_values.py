"""Values JSON takes but a database refuses come out as ``PayloadError`` naming the field.

Payloads are checked before the store (``test_payloads``); these are the other
values of a request, which reach the driver as they are. Nothing bare from
``sqlite3`` or psycopg escapes, nothing is written, and the store goes on.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import psycopg
import pytest

from keepgoing._store.protocol import Store
from keepgoing._store.records import AuditEntry, StartRequest
from keepgoing.errors import PayloadError, StoreError

from ._builders import NOW, QUEUE, WF, start

SURROGATE = "actor \ud800 here"


def _entry(actor_id: str) -> AuditEntry:
    return AuditEntry(NOW, "user", actor_id, "test.action", detail={"k": 1})


def _no_driver_error(exc: BaseException) -> None:
    """The error is the project's own: no driver error in its type."""
    assert not isinstance(exc, sqlite3.Error | psycopg.Error)


async def test_json_takes_a_lone_surrogate_the_store_names_the_field(store: Store) -> None:
    json.dumps(SURROGATE)  # JSON has no quarrel with it
    with pytest.raises(PayloadError) as caught:
        await store.append_audit(_entry(SURROGATE))
    _no_driver_error(caught.value)
    message = str(caught.value)
    assert "append_audit's entry.actor_id" in message
    assert "lone surrogate" in message and "index 6" in message
    assert await store.list_audit() == []  # nothing was written
    await store.append_audit(_entry("someone"))  # and the store goes on
    assert [e.actor_id for e in await store.list_audit()] == ["someone"]


async def test_a_lone_surrogate_in_a_start_request_is_named(store: Store) -> None:
    request = StartRequest(
        run_id="run-1",
        workflow_id="wf-1",
        workflow_name=WF,
        input={"x": 1},
        task_queue="queue-\udfff",
        code_version="v1",
        now=NOW,
    )
    with pytest.raises(PayloadError, match=r"start_run's request\.task_queue: text with a lone"):
        await store.start_run(request)
    assert await store.find_run("wf-1") is None
    await start(store, "wf-1", queue=QUEUE)


async def test_a_lone_surrogate_in_a_lookup_is_named(store: Store) -> None:
    with pytest.raises(PayloadError, match=r"get_run's run_id: text with a lone surrogate"):
        await store.get_run("run-\ud800")
    with pytest.raises(PayloadError, match=r"lineage's workflow_id: text with a lone surrogate"):
        await store.lineage("wf-\ud800")


async def test_an_integer_past_64_bits_is_named(store: Store) -> None:
    big = 2**64
    assert json.loads(json.dumps(big)) == big
    with pytest.raises(PayloadError, match=r"list_audit's limit: an integer beyond 64 bits"):
        await store.list_audit(limit=big)
    with pytest.raises(PayloadError, match=r"list_runs's offset: an integer beyond 64 bits"):
        await store.list_runs(offset=-big)


async def test_a_value_of_a_type_the_driver_cannot_bind_is_named(store: Store) -> None:
    odd: Any = {"test.action"}
    with pytest.raises(PayloadError, match=r"list_audit's action: a set, not a list") as caught:
        await store.list_audit(action=odd)
    _no_driver_error(caught.value)


async def test_a_nul_character_is_kept_or_refused_by_name(store: Store) -> None:
    """SQLite keeps text with NUL; PostgreSQL refuses it, naming the field."""
    actor = "a\x00b"
    try:
        await store.append_audit(_entry(actor))
    except PayloadError as exc:
        _no_driver_error(exc)
        assert "append_audit's entry.actor_id: text with a NUL character (at index 1)" in str(exc)
        assert await store.list_audit() == []
    else:
        assert [e.actor_id for e in await store.list_audit()] == [actor]


async def test_a_closed_store_says_so(store: Store) -> None:
    await start(store, "wf-1")
    await store.close()
    with pytest.raises(StoreError, match=r"closed|not open") as caught:
        await store.get_run("run-wf-1")
    _no_driver_error(caught.value)
    with pytest.raises(StoreError, match=r"closed|not open"):
        await start(store, "wf-2")
