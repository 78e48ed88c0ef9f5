"""Volumes on every store: versions, reads at any version, refs, rollback, concurrency."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from keepgoing._store.protocol import Store
from keepgoing._store.volume_records import CommitOrigin, FileInfo, StagedCommit, VersionInfo
from keepgoing.errors import VolumeError, VolumeFileNotFoundError, VolumeNotFoundError

T0 = 1_000.0


def put(*files: tuple[str, bytes], volume: str = "mem", ref: str = "main") -> StagedCommit:
    return StagedCommit(volume, ref, puts=files)


async def commit(store: Store, staged: StagedCommit, now: float = T0) -> VersionInfo:
    info = await store.volume_commit(staged, now=now)
    assert info is not None
    return info


async def opened(store: Store, name: str = "mem") -> Store:
    await store.volume_open(name, create=True, now=T0)
    return store


def big_text(lines: int = 4000, changed: int | None = None) -> bytes:
    body = [f"{i:05d} the agent keeps notes about step {i % 17}" for i in range(lines)]
    if changed is not None:
        body[changed] = f"{changed:05d} CHANGED"
    return ("\n".join(body) + "\n").encode()


# -- volumes -------------------------------------------------------------------------------


async def test_open_creates_once_with_an_empty_main_ref(store: Store) -> None:
    assert await store.volume_open("mem", create=True, now=T0) is True
    assert await store.volume_open("mem", create=True, now=T0 + 1) is False
    assert await store.volume_open("mem", create=False, now=T0 + 2) is False

    assert await store.volume_list() == ["mem"]
    assert await store.volume_version("mem", "main") is None
    assert await store.volume_versions("mem", "main", 10) == []
    assert await store.volume_files("mem", "main") == []
    assert await store.volume_forks("mem", "main") == []


async def test_a_missing_volume_is_not_created_unless_asked(store: Store) -> None:
    with pytest.raises(VolumeNotFoundError, match="no volume named 'nope'"):
        await store.volume_open("nope", create=False, now=T0)
    assert await store.volume_list() == []
    for call in (
        store.volume_version("nope", "main"),
        store.volume_versions("nope", "main", 5),
        store.volume_files("nope", "main"),
        store.volume_read("nope", "main", None, "a.md"),
        store.volume_forks("nope", "main"),
        store.volume_commit(put(("a.md", b"x"), volume="nope"), now=T0),
    ):
        with pytest.raises(VolumeNotFoundError):
            await call


async def test_volumes_are_listed_sorted_and_number_their_versions_apart(store: Store) -> None:
    for name in ("zeta", "alpha"):
        await store.volume_open(name, create=True, now=T0)
    a = await commit(store, put(("x", b"1"), volume="alpha"))
    z = await commit(store, put(("x", b"1"), volume="zeta"))

    assert await store.volume_list() == ["alpha", "zeta"]
    assert (a.id, a.volume, z.id, z.volume) == (1, "alpha", 1, "zeta")


# -- commits and reads -----------------------------------------------------------------------


async def test_a_commit_is_a_new_version_with_its_parent_paths_and_message(store: Store) -> None:
    await opened(store)
    first = await commit(store, put(("notes.md", b"one"), ("b/c.txt", b"c")), now=T0 + 1)
    second = await commit(store, put(("notes.md", b"two")), now=T0 + 2)

    assert first == VersionInfo(
        id=1,
        parent_id=None,
        created_at=T0 + 1,
        ref="main",
        message="2 put(s), 0 removal(s)",
        volume="mem",
        paths=("b/c.txt", "notes.md"),
    )
    assert (second.id, second.parent_id, second.paths) == (2, 1, ("notes.md",))
    assert second.message == "put notes.md"
    assert await store.volume_version("mem", "main") == second
    assert await store.volume_version("mem", "main", 1) == first


async def test_any_file_reads_at_any_version(store: Store) -> None:
    await opened(store)
    await commit(store, put(("notes.md", b"one")))
    await commit(store, put(("notes.md", b"two"), ("other", b"o")))

    assert await store.volume_read("mem", "main", 1, "notes.md") == b"one"
    assert await store.volume_read("mem", "main", 2, "notes.md") == b"two"
    assert await store.volume_read("mem", "main", None, "notes.md") == b"two"
    with pytest.raises(VolumeFileNotFoundError, match=r"'other'.*version 1"):
        await store.volume_read("mem", "main", 1, "other")
    with pytest.raises(VolumeNotFoundError, match="no version 9"):
        await store.volume_read("mem", "main", 9, "notes.md")


async def test_a_listing_has_size_time_and_content_hash(store: Store) -> None:
    await opened(store)
    await commit(store, put(("b.md", b"bee"), ("a/x.bin", bytes(range(256)))), now=T0 + 1)
    await commit(store, put(("b.md", b"bee!")), now=T0 + 2)

    assert await store.volume_files("mem", "main") == [
        FileInfo("a/x.bin", 256, T0 + 1, hashlib.sha256(bytes(range(256))).hexdigest()),
        FileInfo("b.md", 4, T0 + 2, hashlib.sha256(b"bee!").hexdigest()),
    ]
    assert [f.size for f in await store.volume_files("mem", "main", 1)] == [256, 3]


async def test_removed_files_stay_readable_at_older_versions(store: Store) -> None:
    await opened(store)
    await commit(store, put(("a", b"A"), ("b", b"B")))
    gone = await commit(store, StagedCommit("mem", removes=("a",)))

    assert (gone.paths, gone.message) == (("a",), "remove a")
    assert [f.path for f in await store.volume_files("mem", "main")] == ["b"]
    with pytest.raises(VolumeFileNotFoundError):
        await store.volume_read("mem", "main", None, "a")
    assert await store.volume_read("mem", "main", 1, "a") == b"A"


async def test_empty_binary_and_multi_chunk_files_round_trip(store: Store) -> None:
    await opened(store)
    large = big_text()
    assert len(large) > 100_000  # several chunks
    binary = bytes(range(256)) * 300
    await commit(store, put(("empty", b""), ("bin", binary), ("large.txt", large)))
    edited = big_text(changed=2000)
    await commit(store, put(("large.txt", edited)))

    assert await store.volume_read("mem", "main", 1, "empty") == b""
    assert await store.volume_read("mem", "main", 1, "bin") == binary
    assert await store.volume_read("mem", "main", 1, "large.txt") == large
    assert await store.volume_read("mem", "main", 2, "large.txt") == edited


async def test_a_commit_without_changes_makes_no_version(store: Store) -> None:
    await opened(store)
    assert await store.volume_commit(StagedCommit("mem"), now=T0) is None
    assert await store.volume_versions("mem", "main", 10) == []


async def test_a_version_records_the_attempt_that_made_it(store: Store) -> None:
    await opened(store)
    info = await store.volume_commit(
        put(("n", b"1")), now=T0, origin=CommitOrigin(run_id="r1", step=3, attempt=2)
    )

    assert info is not None
    assert (info.run_id, info.step, info.attempt) == ("r1", 3, 2)
    assert await store.volume_version("mem", "main", 1) == info


async def test_versions_are_the_newest_of_the_ref_oldest_first(store: Store) -> None:
    await opened(store)
    for i in range(5):
        await commit(store, put(("n", str(i).encode())), now=T0 + i)

    assert [v.id for v in await store.volume_versions("mem", "main", 3)] == [3, 4, 5]
    assert [v.id for v in await store.volume_versions("mem", "main", 100)] == [1, 2, 3, 4, 5]


# -- rollback ----------------------------------------------------------------------------------


async def test_rollback_is_a_new_version_equal_to_the_old_one(store: Store) -> None:
    await opened(store)
    await commit(store, put(("a", b"1"), ("b", b"1")), now=T0 + 1)
    await commit(store, put(("a", b"2"), ("c", b"2")), now=T0 + 2)
    back = await commit(store, StagedCommit("mem", restore=1), now=T0 + 3)

    assert (back.id, back.parent_id, back.paths) == (3, 2, ("a", "c"))
    assert back.message == "rollback to version 1"
    assert await store.volume_files("mem", "main", 3) == await store.volume_files("mem", "main", 1)
    assert await store.volume_read("mem", "main", 2, "a") == b"2"  # history is kept
    with pytest.raises(VolumeNotFoundError, match="no version 7"):
        await store.volume_commit(StagedCommit("mem", restore=7), now=T0)


async def test_writes_after_a_restore_apply_on_top_of_it(store: Store) -> None:
    await opened(store)
    await commit(store, put(("a", b"1")))
    await commit(store, put(("a", b"2"), ("b", b"2")))
    staged = StagedCommit("mem", restore=1, puts=(("c", b"3"),), removes=("a",))

    info = await commit(store, staged)

    assert [f.path for f in await store.volume_files("mem", "main", info.id)] == ["c"]


# -- refs --------------------------------------------------------------------------------------


async def test_a_fork_starts_at_the_head_and_then_goes_its_own_way(store: Store) -> None:
    await opened(store)
    await commit(store, put(("a", b"main-1")))
    await store.volume_fork("mem", "main", "exp", None, T0)
    on_fork = await commit(store, put(("a", b"exp-2"), ref="exp"))
    on_main = await commit(store, put(("a", b"main-3")))

    assert (on_fork.id, on_fork.parent_id, on_fork.ref) == (2, 1, "exp")
    assert (on_main.id, on_main.parent_id) == (3, 1)  # numbers are shared by the refs
    assert await store.volume_read("mem", "exp", None, "a") == b"exp-2"
    assert await store.volume_read("mem", "main", None, "a") == b"main-3"
    assert [v.id for v in await store.volume_versions("mem", "exp", 10)] == [2]
    assert await store.volume_forks("mem", "main") == ["exp"]
    assert await store.volume_forks("mem", "exp") == []


async def test_a_fork_can_start_at_an_older_version(store: Store) -> None:
    await opened(store)
    await commit(store, put(("a", b"1")))
    await commit(store, put(("a", b"2")))
    await store.volume_fork("mem", "main", "old", 1, T0)

    assert await store.volume_read("mem", "old", None, "a") == b"1"
    head = await store.volume_version("mem", "old")
    assert head is not None and head.id == 1


async def test_fork_refuses_existing_and_missing_names(store: Store) -> None:
    await opened(store)
    await store.volume_fork("mem", "main", "exp", None, T0)
    with pytest.raises(VolumeError, match="already has a ref named 'exp'"):
        await store.volume_fork("mem", "main", "exp", None, T0)
    with pytest.raises(VolumeNotFoundError, match="no ref named 'nope'"):
        await store.volume_fork("mem", "nope", "x", None, T0)
    with pytest.raises(VolumeNotFoundError, match="no version 4"):
        await store.volume_fork("mem", "main", "x", 4, T0)
    with pytest.raises(VolumeNotFoundError, match="no ref named 'x'"):
        await store.volume_read("mem", "x", None, "a")


async def test_a_staged_fork_is_created_by_its_commit(store: Store) -> None:
    await opened(store)
    await commit(store, put(("a", b"1")))
    staged = StagedCommit("mem", "exp", puts=(("b", b"2"),), fork_from=("main", 1))

    info = await commit(store, staged)
    again = await store.volume_commit(
        StagedCommit("mem", "exp", puts=(("b", b"3"),), fork_from=("main", 1)), now=T0
    )

    assert (info.ref, info.parent_id) == ("exp", 1)
    assert again is not None and again.parent_id == info.id  # the ref exists: just commit
    assert await store.volume_forks("mem", "main") == ["exp"]
    assert await store.volume_read("mem", "exp", None, "a") == b"1"


# -- concurrency -------------------------------------------------------------------------------


async def test_change_sets_apply_to_the_head_they_find_so_no_update_is_lost(store: Store) -> None:
    await opened(store)
    await commit(store, put(("shared", b"0")))
    # Both were prepared against version 1; each is re-applied on the head it meets.
    left = put(("left", b"L"), ("shared", b"left"))
    right = StagedCommit("mem", puts=(("right", b"R"),), removes=("shared",))

    first = await commit(store, left)
    second = await commit(store, right)

    assert (first.parent_id, second.parent_id) == (1, 2)
    assert [f.path for f in await store.volume_files("mem", "main")] == ["left", "right"]


async def test_concurrent_commits_all_land_in_one_line_of_versions(store: Store) -> None:
    await opened(store)

    await asyncio.gather(
        *(commit(store, put((f"w{i}.txt", str(i).encode())), now=T0 + i) for i in range(40))
    )

    versions = await store.volume_versions("mem", "main", 100)
    assert [v.id for v in versions] == list(range(1, 41))
    assert [v.parent_id for v in versions] == [None, *range(1, 40)]
    names = sorted(f.path for f in await store.volume_files("mem", "main"))
    assert names == sorted(f"w{i}.txt" for i in range(40))


async def test_unchanged_content_reads_the_same_from_every_version(store: Store) -> None:
    await opened(store)
    await opened(store, "other")
    keep = big_text(3000)
    await commit(store, put(("keep.txt", keep), ("n", b"0")))
    for i in range(1, 6):
        await commit(store, put(("n", str(i).encode())))
    await commit(store, put(("copy.txt", keep), volume="other"))

    for version in range(1, 7):
        assert await store.volume_read("mem", "main", version, "keep.txt") == keep
    assert await store.volume_read("other", "main", None, "copy.txt") == keep
