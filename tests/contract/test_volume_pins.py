"""Volume read pins and tags on every store: what an open run read, and a tagged
version, survive volume retention; a run's pins go with the run."""

from __future__ import annotations

import pytest

from keepgoing._history.events import WorkflowCompleted
from keepgoing._store.protocol import Store
from keepgoing._store.retention_protocol import RetentionWindow
from keepgoing.errors import VolumeNotFoundError

from ._builders import NOW, claim_run, schedule, start
from .test_retention import DAY, _ended
from .test_volume_retention import _ids, _put


async def _three_versions(store: Store) -> None:
    await store.volume_open("mem", create=True, now=NOW)
    for i in range(3):
        await _put(store, f"version {i}", at=NOW + i)
    await store.volume_retain("mem", 1, None, NOW)


async def test_a_version_an_open_run_read_survives_gc_until_the_run_ends(store: Store) -> None:
    await _three_versions(store)
    reader = await start(store, "reader")  # it wrote nothing: it only read version 1

    assert await store.volume_pin("mem", "main", 1, run_id=reader.run_id, now=NOW) == 1
    assert await store.volume_pin("mem", "main", None, run_id=reader.run_id, now=NOW) == 3
    kept = await store.volume_gc("mem", NOW + DAY)

    assert kept.versions == (("mem", 2),) and await _ids(store) == [1, 3]
    assert await store.volume_read("mem", "main", 1, "notes.md") == b"version 0"
    claim = await claim_run(store, reader.run_id)
    await schedule(store, claim, [WorkflowCompleted(result=None)])
    assert (await store.volume_gc("mem", NOW + DAY)).versions == (("mem", 1),)


async def test_a_pin_of_a_ref_without_versions_is_none(store: Store) -> None:
    await store.volume_open("mem", create=True, now=NOW)
    reader = await start(store, "reader")

    assert await store.volume_pin("mem", "main", None, run_id=reader.run_id, now=NOW) is None
    with pytest.raises(VolumeNotFoundError):
        await store.volume_pin("mem", "main", 7, run_id=reader.run_id, now=NOW)


async def test_a_tagged_version_is_never_dropped_and_untag_lets_it_go(store: Store) -> None:
    await _three_versions(store)

    tagged = await store.volume_tag("mem", "main", "golden", 1, NOW)
    await store.volume_tag("mem", "main", "latest", None, NOW)
    assert tagged.id == 1 and await store.volume_tags("mem") == {"golden": 1, "latest": 3}
    assert (await store.volume_gc("mem", NOW + DAY, dry_run=True)).versions == (("mem", 2),)
    assert (await store.volume_gc("mem", NOW + DAY)).versions == (("mem", 2),)
    assert await store.volume_untag("mem", "golden") and not await store.volume_untag("mem", "x")
    assert (await store.volume_gc("mem", NOW + DAY)).versions == (("mem", 1),)
    with pytest.raises(VolumeNotFoundError):
        await store.volume_tag("mem", "main", "gone", 1, NOW)
    with pytest.raises(VolumeNotFoundError):
        await store.volume_tags("nope")


async def test_a_tag_moves_when_given_again(store: Store) -> None:
    await _three_versions(store)
    await store.volume_tag("mem", "main", "release", 1, NOW)
    await store.volume_tag("mem", "main", "release", 2, NOW)

    assert await store.volume_tags("mem") == {"release": 2}


async def test_an_ended_runs_pins_go_with_its_rows(store: Store) -> None:
    await _three_versions(store)
    run_id = await _ended(store, "reader")
    await store.volume_pin("mem", "main", 1, run_id=run_id, now=NOW)

    swept = await store.delete_runs(
        [run_id], RetentionWindow(now=NOW + 2 * DAY, default=DAY), actor="t"
    )

    assert swept.runs == 1 and swept.rows["volume_reads"] == 1
