"""``keepgoing.Volume`` outside tasks, on SQLite in memory and in a file: each write commits."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from keepgoing import (
    FileInfo,
    VersionInfo,
    Volume,
    VolumeError,
    VolumeFileNotFoundError,
    VolumeNotFoundError,
)
from keepgoing._store.protocol import Store
from keepgoing._store.sqlite import SqliteStore
from keepgoing._volumes import access


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    path = ":memory:" if request.param == "memory" else str(tmp_path / "kg.db")
    backend: Store = SqliteStore(path)
    yield backend
    access.call(backend, backend.close())


def test_every_write_is_a_new_version(store: Store) -> None:
    notes = Volume("agent", store=store)
    assert notes.latest_version() is None and notes.versions() == []

    first = notes.put_file("notes.md", "hello\n")
    second = notes.put_file("scratch/pad.bin", b"\x00\x01")
    third = notes.remove_file("notes.md", message="tidy up")

    assert isinstance(first, VersionInfo) and (first.id, first.message) == (1, "put notes.md")
    assert second is not None and (second.id, second.parent_id) == (2, 1)
    assert third is not None and (third.id, third.message, third.paths) == (
        3,
        "tidy up",
        ("notes.md",),
    )
    assert [v.id for v in notes.versions()] == [1, 2, 3]
    assert notes.latest_version() == third
    assert [f.path for f in notes.listdir()] == ["scratch/pad.bin"]


def test_reads_see_the_latest_version_and_any_older_one(store: Store) -> None:
    notes = Volume("agent", store=store)
    notes.put_file("notes.md", "one")
    notes.put_file("notes.md", "two")

    assert notes.read_file("notes.md") == b"two"
    assert notes.read_text("./notes.md") == "two"
    assert notes.at_version(1).read_text("notes.md") == "one"
    assert Volume("agent", store=store, version_id=1).read_text("notes.md") == "one"
    assert notes.exists("notes.md") and not notes.exists("other.md")


def test_rollback_then_every_version_reads_and_diffs_as_expected(store: Store) -> None:
    notes = Volume("agent", store=store)
    contents = ["lesson 1\n", "lesson 1\nlesson 2\n", "lesson 1\nlesson 2 (revised)\n"]
    for text in contents:
        notes.put_file("lessons.md", text)
    notes.put_file("report.md", "final report\n")

    back = notes.rollback(2)

    assert back is not None and (back.id, back.parent_id) == (5, 4)
    expected = {
        1: {"lessons.md": contents[0]},
        2: {"lessons.md": contents[1]},
        3: {"lessons.md": contents[2]},
        4: {"lessons.md": contents[2], "report.md": "final report\n"},
        5: {"lessons.md": contents[1]},
    }
    for version, files in expected.items():
        view = notes.at_version(version)
        assert {f.path: view.read_text(f.path) for f in view.listdir()} == files
    changes = notes.diff(4, 5)
    assert (changes.added, changes.removed, changes.changed) == (
        [],
        ["report.md"],
        ["lessons.md"],
    )
    assert changes.unified["lessons.md"] == (
        "--- a/lessons.md\n+++ b/lessons.md\n@@ -1,2 +1,2 @@\n lesson 1\n"
        "-lesson 2 (revised)\n+lesson 2\n"
    )
    assert "-final report" in changes.unified["report.md"]
    assert not notes.diff(2, 5) and notes.diff(2, 5).text() == ""
    from_empty = notes.diff(None, 1)
    assert from_empty.added == ["lessons.md"] and "+lesson 1" in from_empty.text()


def test_diff_of_binary_files_lists_them_without_a_text_diff(store: Store) -> None:
    blobs = Volume("blobs", store=store)
    blobs.put_file("a.bin", b"\x00\xff")
    blobs.put_file("a.bin", b"\x00\xfe")

    changes = blobs.diff(1, 2)

    assert changes.changed == ["a.bin"] and changes.unified == {}
    with pytest.raises(VolumeNotFoundError, match="no version 9"):
        blobs.diff(1, 9)


def test_a_version_handle_is_read_only(store: Store) -> None:
    notes = Volume("agent", store=store)
    notes.put_file("a", "1")
    old = notes.at_version(1)

    assert old.read_only and old.version_id == 1 and not notes.read_only
    for write in (
        lambda: old.put_file("a", "2"),
        lambda: old.remove_file("a"),
        lambda: old.rollback(1),
    ):
        with pytest.raises(VolumeError, match="read-only view of version 1"):
            write()
    assert old.latest_version() == notes.versions()[0]
    with pytest.raises(VolumeNotFoundError, match="no version 7"):
        notes.at_version(7)
    with pytest.raises(VolumeNotFoundError, match="no version 7"):
        Volume("agent", store=store, version_id=7)


def test_missing_things_raise_typed_errors(store: Store) -> None:
    notes = Volume("agent", store=store)
    with pytest.raises(VolumeFileNotFoundError, match=r"no file 'nope\.md'"):
        notes.read_file("nope.md")
    with pytest.raises(VolumeFileNotFoundError, match=r"no file 'nope\.md'"):
        notes.remove_file("nope.md")
    with pytest.raises(VolumeNotFoundError, match="no volume named 'ghost'"):
        Volume("ghost", store=store, create_if_missing=False)
    with pytest.raises(VolumeNotFoundError, match="no ref named 'dev'"):
        Volume("agent", store=store, ref="dev").read_file("a")
    with pytest.raises(VolumeNotFoundError):
        notes.rollback(3)
    assert issubclass(VolumeFileNotFoundError, LookupError)


def test_bad_input_is_refused_and_nothing_is_stored(store: Store) -> None:
    notes = Volume("agent", store=store, max_file_size=10)
    with pytest.raises(VolumeError, match="over the volume's limit of 10 bytes"):
        notes.put_file("big.txt", "x" * 11)
    for path, reason in (("../up", "'..'"), ("/abs", "absolute"), ("a\x00", "NUL")):
        with pytest.raises(VolumeError, match=reason):
            notes.put_file(path, "x")
    with pytest.raises(VolumeError, match="bytes or str"):
        notes.put_file("a", 12)  # type: ignore[arg-type]
    with pytest.raises(VolumeError, match="not valid"):
        Volume("bad name", store=store)
    with pytest.raises(VolumeError, match="positive int"):
        notes.versions(limit=0)
    assert notes.versions() == []
    assert notes.put_file("ok.txt", "x" * 10) is not None


def test_listdir_filters_by_folder_and_folds_sub_folders(store: Store) -> None:
    notes = Volume("agent", store=store)
    with notes.batch_upload():
        for path in ("top.md", "notes/a.md", "notes/b.md", "notes/deep/c.md", "notesx.md"):
            notes.put_file(path, path)

    assert [f.path for f in notes.listdir()] == [
        "notes/a.md",
        "notes/b.md",
        "notes/deep/c.md",
        "notesx.md",
        "top.md",
    ]
    assert [f.path for f in notes.listdir("notes")] == [
        "notes/a.md",
        "notes/b.md",
        "notes/deep/c.md",
    ]
    shallow = notes.listdir("notes/", recursive=False)
    assert [(f.path, f.is_dir) for f in shallow] == [
        ("notes/a.md", False),
        ("notes/b.md", False),
        ("notes/deep/", True),
    ]
    assert shallow[2] == FileInfo("notes/deep/", len("notes/deep/c.md"), shallow[2].updated_at, "")
    assert [f.path for f in notes.listdir(recursive=False)] == ["notes/", "notesx.md", "top.md"]


def test_a_batch_is_one_version_and_sees_its_own_writes(store: Store) -> None:
    notes = Volume("agent", store=store)
    notes.put_file("old.md", "old")

    with notes.batch_upload(message="end of run") as batch:
        assert batch is notes
        notes.put_file("report.md", "report")
        notes.remove_file("old.md")
        assert notes.read_text("report.md") == "report"
        assert not notes.exists("old.md")
        assert [f.path for f in notes.listdir()] == ["report.md"]
        assert len(notes.versions()) == 1  # nothing committed yet

    assert [(v.id, v.message) for v in notes.versions()] == [(1, "put old.md"), (2, "end of run")]
    assert [f.path for f in notes.listdir()] == ["report.md"]


def test_a_failed_batch_stores_nothing(store: Store) -> None:
    notes = Volume("agent", store=store)
    with pytest.raises(RuntimeError, match="boom"), notes.batch_upload():
        notes.put_file("half.md", "half")
        raise RuntimeError("boom")

    assert notes.versions() == []
    with (
        pytest.raises(VolumeError, match="already inside batch_upload"),
        notes.batch_upload(),
        notes.batch_upload(),
    ):
        pass


def test_a_rollback_inside_a_batch_supersedes_earlier_batched_writes(store: Store) -> None:
    notes = Volume("agent", store=store)
    notes.put_file("a", "1")
    notes.put_file("a", "2")

    with notes.batch_upload():
        notes.put_file("b", "x")
        notes.rollback(1)
        assert notes.read_text("a") == "1" and not notes.exists("b")
        notes.put_file("c", "3")

    assert {f.path: notes.read_text(f.path) for f in notes.listdir()} == {"a": "1", "c": "3"}


def test_forks_are_independent_lines_of_versions(store: Store) -> None:
    main = Volume("agent", store=store)
    main.put_file("plan.md", "v1")
    experiment = main.fork("experiment")
    experiment.put_file("plan.md", "risky")
    main.put_file("plan.md", "v2")

    assert experiment.ref == "experiment"
    assert experiment.read_text("plan.md") == "risky"
    assert main.read_text("plan.md") == "v2"
    assert main.forks() == ["experiment"]
    assert Volume("agent", store=store, ref="experiment").read_text("plan.md") == "risky"
    with pytest.raises(VolumeError, match="already has a ref named 'experiment'"):
        main.fork("experiment")
    old = main.at_version(1).fork("from-v1")
    assert old.read_text("plan.md") == "v1" and not old.read_only


def test_content_is_shared_between_volumes(store: Store) -> None:
    data = bytes(range(256)) * 1000
    Volume("one", store=store).put_file("big.bin", data)
    Volume("two", store=store).put_file("copy.bin", data)

    assert Volume("two", store=store).read_file("copy.bin") == data
    assert (
        Volume("one", store=store).listdir()[0].hash == Volume("two", store=store).listdir()[0].hash
    )


def test_the_store_can_be_named_by_url(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'by-url.db'}"
    Volume("agent", store=url).put_file("a.md", "from url")
    assert Volume("agent", store=url).read_text("a.md") == "from url"
    assert (
        repr(Volume("agent", store=url).at_version(1))
        == "Volume('agent', ref='main', version_id=1)"
    )


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"keep_versions": 0}, "keep_versions"),
        ({"keep_versions": True}, "keep_versions"),
        ({"keep_versions": "3"}, "keep_versions"),
        ({"keep_for": "soon"}, "keep_for"),
        ({"keep_for": 0}, "keep_for"),
        ({"keep_for": -5}, "keep_for"),
    ],
)
def test_a_bad_retention_policy_is_refused_by_name(
    store: Store, options: dict[str, object], named: str
) -> None:
    with pytest.raises((VolumeError, ValueError), match=named):
        Volume("agent", store=store, **options)  # type: ignore[arg-type]
    assert access.call(store, store.volume_list()) == []  # nothing was created


def test_keep_versions_drops_old_versions_on_gc(store: Store) -> None:
    notes = Volume("agent", store=store, keep_versions=2, keep_for="1h")
    for i in range(4):
        notes.put_file("notes.md", f"draft {i}\n")
    assert notes.gc(dry_run=True).versions == ()  # every version is younger than an hour
    assert [v.id for v in notes.versions()] == [1, 2, 3, 4]
    assert Volume("agent", store=store, keep_versions=2).gc().versions == (
        ("agent", 1),
        ("agent", 2),
    )
    assert [v.id for v in notes.versions()] == [3, 4]
    assert notes.read_text("notes.md") == "draft 3\n"
