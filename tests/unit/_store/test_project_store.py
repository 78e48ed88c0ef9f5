"""One store per project: with no URL and no ``KEEPGOING_STORE``, the store is the
``.keepgoing/`` folder's of the working directory or its nearest parent that has one."""

from __future__ import annotations

from pathlib import Path

import pytest

from keepgoing._store.url import default_store_url, project_folder, resolve_store_url


def _no_folder_above(path: Path) -> None:
    if any((p / ".keepgoing").is_dir() for p in path.parents):
        pytest.skip("a folder above the test's has a .keepgoing folder of its own")


def test_the_working_directorys_folder_comes_first(tmp_path: Path) -> None:
    (tmp_path / ".keepgoing").mkdir()
    (tmp_path / "app" / ".keepgoing").mkdir(parents=True)
    assert project_folder(tmp_path / "app") == tmp_path / "app" / ".keepgoing"


def test_a_subfolder_finds_the_nearest_parents_folder(tmp_path: Path) -> None:
    (tmp_path / ".keepgoing").mkdir()
    deep = tmp_path / "jobs" / "nightly" / "scripts"
    deep.mkdir(parents=True)
    assert project_folder(deep) == tmp_path / ".keepgoing"
    assert default_store_url(deep) == f"sqlite:///{tmp_path}/.keepgoing/keepgoing.db"


def test_with_none_found_the_folder_is_the_working_directorys_and_is_not_made(
    tmp_path: Path,
) -> None:
    _no_folder_above(tmp_path)
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert project_folder(deep) == deep / ".keepgoing"
    assert not (deep / ".keepgoing").exists()  # the store makes it when it opens


def test_a_file_named_like_the_folder_is_not_a_project(tmp_path: Path) -> None:
    _no_folder_above(tmp_path)
    (tmp_path / ".keepgoing").write_text("not a folder")
    (tmp_path / "sub").mkdir()
    assert project_folder(tmp_path / "sub") == tmp_path / "sub" / ".keepgoing"


def test_the_default_follows_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".keepgoing").mkdir()
    (tmp_path / "sub").mkdir()
    monkeypatch.delenv("KEEPGOING_STORE", raising=False)
    monkeypatch.chdir(tmp_path / "sub")
    assert resolve_store_url(None) == f"sqlite:///{tmp_path}/.keepgoing/keepgoing.db"
    monkeypatch.setenv("KEEPGOING_STORE", "sqlite:///elsewhere.db")
    assert resolve_store_url(None) == "sqlite:///elsewhere.db"  # the variable wins
    assert resolve_store_url("memory://") == "memory://"  # and an explicit URL over both
