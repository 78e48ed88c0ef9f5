"""Bad input to volumes is refused with an error that names the problem."""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest

from keepgoing._volumes.paths import (
    DEFAULT_MAX_FILE_SIZE,
    check_name,
    check_size,
    folder_prefix,
    max_file_size,
    normalise_path,
)
from keepgoing.errors import VolumeError


@pytest.mark.parametrize(
    ("given", "clean"),
    [
        ("notes.md", "notes.md"),
        ("./notes.md", "notes.md"),
        ("a//b/./c.txt", "a/b/c.txt"),
        ("a/b/", "a/b"),
        ("dir.with.dots/x..y", "dir.with.dots/x..y"),
        ("ünïcode/日本.md", "ünïcode/日本.md"),
        (PurePosixPath("a/b.md"), "a/b.md"),
    ],
)
def test_paths_are_normalised(given: object, clean: str) -> None:
    assert normalise_path(given) == clean


@pytest.mark.parametrize(
    ("given", "problem"),
    [
        ("../secrets", "contains '..'"),
        ("a/../../b", "contains '..'"),
        ("a/..", "contains '..'"),
        ("/etc/passwd", "is absolute"),
        ("\\\\server\\share", "is absolute"),
        ("a\x00b", "NUL byte"),
        ("line\nbreak", "control character"),
        ("", "names no file"),
        ("./", "names no file"),
        ("x" * 1100, "longer than 1024 bytes"),
    ],
)
def test_bad_paths_are_refused_with_the_reason(given: str, problem: str) -> None:
    with pytest.raises(VolumeError, match=problem):
        normalise_path(given)


@pytest.mark.parametrize("given", [None, 3, b"bytes/path"])
def test_a_path_must_be_text(given: object) -> None:
    with pytest.raises(VolumeError, match="must be a str"):
        normalise_path(given)


def test_a_listing_prefix_may_be_the_root() -> None:
    assert folder_prefix("") == ""
    assert folder_prefix("/") == ""
    assert folder_prefix("./") == ""
    assert folder_prefix("notes/") == "notes"
    with pytest.raises(VolumeError, match=r"'\.\.'"):
        folder_prefix("..")


@pytest.mark.parametrize("name", ["agent-memory", "a", "Run_2.notes", "x" * 128])
def test_good_names(name: str) -> None:
    assert check_name(name, "volume name") == name


@pytest.mark.parametrize("name", ["", "-lead", ".hidden", "has space", "a/b", "x" * 129, 7])
def test_bad_names(name: object) -> None:
    with pytest.raises(VolumeError, match=r"volume name .* is not valid"):
        check_name(name, "volume name")


def test_the_size_limit_defaults_to_64_mib_and_is_configurable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KEEPGOING_VOLUME_MAX_FILE_SIZE", raising=False)
    assert max_file_size(None) == DEFAULT_MAX_FILE_SIZE == 64 * 1024 * 1024
    assert max_file_size(10) == 10
    monkeypatch.setenv("KEEPGOING_VOLUME_MAX_FILE_SIZE", "2048")
    assert max_file_size(None) == 2048
    monkeypatch.setenv("KEEPGOING_VOLUME_MAX_FILE_SIZE", "lots")
    with pytest.raises(VolumeError, match="not a number of bytes"):
        max_file_size(None)
    for bad in (0, -1, True, 1.5):
        with pytest.raises(VolumeError, match="positive number of bytes"):
            max_file_size(bad)  # type: ignore[arg-type]


def test_a_file_over_the_limit_is_refused_naming_both_sizes() -> None:
    check_size("ok.bin", 100, 100)
    with pytest.raises(VolumeError, match=r"'big.bin' is 101 bytes, over .* 100 bytes"):
        check_size("big.bin", 101, 100)
