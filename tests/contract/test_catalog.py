"""The workflow catalog: names served by workers, kept after they stop."""

from __future__ import annotations

from keepgoing._store.protocol import Store

NOW = 1_000_000.0


async def test_catalog_starts_empty(store: Store) -> None:
    assert await store.known_workflows() == {}


async def test_recorded_names_are_known_with_their_queues(store: Store) -> None:
    await store.record_workflows(["b", "a"], ["default"], NOW)
    await store.record_workflows(["a"], ["gpu"], NOW + 1)
    assert await store.known_workflows() == {"a": ["default", "gpu"], "b": ["default"]}


async def test_recording_twice_is_idempotent(store: Store) -> None:
    await store.record_workflows(["a"], ["default"], NOW)
    await store.record_workflows(["a"], ["default"], NOW + 5)
    assert await store.known_workflows() == {"a": ["default"]}
