"""Volume retention on every store: what gc drops, what it never drops, and chunks."""

from __future__ import annotations

import pytest

from keepgoing._store.protocol import Store
from keepgoing._store.volume_records import CommitOrigin, StagedCommit, VersionInfo
from keepgoing._worker.retention import RetentionPolicy, RetentionSweep
from keepgoing.errors import VolumeNotFoundError
from keepgoing.testing import FakeClock

from ._builders import NOW, start
from .test_volumes import big_text

DAY = 86400.0


async def _put(
    store: Store,
    text: str,
    *,
    ref: str = "main",
    at: float = NOW,
    origin: CommitOrigin | None = None,
) -> VersionInfo:
    staged = StagedCommit("mem", ref, puts=(("notes.md", text.encode()),))
    info = await store.volume_commit(staged, now=at, origin=origin)
    assert info is not None
    return info


async def _ids(store: Store, ref: str = "main") -> list[int]:
    return [v.id for v in await store.volume_versions("mem", ref, 100)]


async def test_keep_versions_keeps_the_newest_and_unused_chunks_go(store: Store) -> None:
    await store.volume_open("mem", create=True, now=NOW)
    for i in range(5):
        await _put(store, f"version {i} " * 50, at=NOW + i)
    await store.volume_retain("mem", 2, None, NOW)

    dry = await store.volume_gc("mem", NOW + 10, dry_run=True)
    assert dry.versions == (("mem", 1), ("mem", 2), ("mem", 3)) and dry.objects > 0
    assert await _ids(store) == [1, 2, 3, 4, 5]  # a dry run deletes nothing

    done = await store.volume_gc("mem", NOW + 10)
    assert done.versions == dry.versions and done.objects == dry.objects
    assert await _ids(store) == [4, 5]
    assert await store.volume_read("mem", "main", 4, "notes.md") == ("version 3 " * 50).encode()
    again = await store.volume_gc("mem", NOW + 11)
    assert again.versions == () and again.objects == 0


async def test_what_a_run_or_a_ref_reads_survives_gc(store: Store) -> None:
    await store.volume_open("mem", create=True, now=NOW)
    run = await start(store, "reader")  # open: it may read its version back by id
    await _put(store, "written by the open run", origin=CommitOrigin(run.run_id, 1, 1))
    forked = await _put(store, "the fork's base")
    await store.volume_fork("mem", "main", "experiment", forked.id, NOW)
    for i in range(3):
        await _put(store, f"later {i}", at=NOW + 1 + i)
    await store.volume_retain("mem", 1, None, NOW)

    result = await store.volume_gc("mem", NOW + DAY)
    assert result.versions == (("mem", 3), ("mem", 4))
    assert await _ids(store) == [1, 2, 5]
    assert await store.volume_read("mem", "main", 1, "notes.md") == b"written by the open run"
    assert await store.volume_read("mem", "experiment", None, "notes.md") == b"the fork's base"


async def test_keep_for_drops_old_versions_but_never_the_head(store: Store) -> None:
    await store.volume_open("mem", create=True, now=NOW)
    await _put(store, "old", at=NOW)
    await _put(store, "older head", at=NOW + 1)
    await store.volume_retain("mem", None, 3600.0, NOW)

    assert (await store.volume_gc(None, NOW + 1000)).versions == ()
    assert (await store.volume_gc(None, NOW + DAY)).versions == (("mem", 1),)
    assert await _ids(store) == [2]
    assert await store.volume_read("mem", "main", None, "notes.md") == b"older head"


async def test_without_a_policy_gc_drops_nothing(store: Store) -> None:
    await store.volume_open("mem", create=True, now=NOW)
    for i in range(3):
        await _put(store, f"v{i}", at=NOW + i)
    result = await store.volume_gc("mem", NOW + 100 * DAY)
    assert result.versions == () and result.objects == 0
    assert await _ids(store) == [1, 2, 3]


async def test_the_services_sweep_runs_volume_gc_and_audits_it(store: Store) -> None:
    await store.volume_open("mem", create=True, now=NOW)
    for i in range(3):
        await _put(store, f"draft {i}", at=NOW + i)
    await store.volume_retain("mem", 1, None, NOW)
    sweep = RetentionSweep(store, RetentionPolicy(), clock=FakeClock(NOW + DAY), owner="s1")

    assert not await sweep.tick()

    assert await _ids(store) == [3]
    entries = [e for e in await store.list_audit(limit=50) if e.action == "retention.volumes"]
    assert [(e.detail["versions"], e.detail["objects"] > 0) for e in entries] == [(2, True)]


async def test_shared_chunks_and_deltas_survive_and_dropped_versions_are_gone(
    store: Store,
) -> None:
    await store.volume_open("mem", create=True, now=NOW)
    same = b"shared by every version\n" * 400
    texts = [big_text(changed=i * 7) for i in range(4)]  # each a one-line edit: deltas
    for i, text in enumerate(texts):
        staged = StagedCommit("mem", "main", puts=(("same.txt", same), ("big.txt", text)))
        await store.volume_commit(staged, now=NOW + i)
    await store.volume_retain("mem", 1, None, NOW)

    result = await store.volume_gc("mem", NOW + DAY)

    assert [v for _, v in result.versions] == [1, 2, 3] and result.objects > 0
    assert await store.volume_read("mem", "main", None, "big.txt") == texts[-1]
    assert await store.volume_read("mem", "main", None, "same.txt") == same
    with pytest.raises(VolumeNotFoundError):
        await store.volume_read("mem", "main", 2, "big.txt")
    # A new version may reuse content only a dropped version had.
    await store.volume_commit(
        StagedCommit("mem", "main", puts=(("big.txt", texts[0]),)), now=NOW + DAY
    )
    assert await store.volume_read("mem", "main", None, "big.txt") == texts[0]
