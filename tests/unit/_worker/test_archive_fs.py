"""Retention archives behind fsspec URLs (the keepgoing[archive] extra): written by the
sweep, found by run or workflow id, and read by `runs show`, `history show` and `replay`."""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from keepgoing._store.sqlite import SqliteStore
from keepgoing._worker.archive import locate, read_history_text
from keepgoing._worker.archive_fs import is_url
from keepgoing._worker.retention import RetentionPolicy, RetentionSweep, parse_retention
from keepgoing.cli.__main__ import app
from keepgoing.errors import ConfigurationError
from keepgoing.testing import FakeClock

DAY = 86400.0


async def _archived(path: str, root: str) -> str:
    from contract._builders import NOW  # noqa: PLC0415
    from contract.test_retention import _ended  # noqa: PLC0415

    store = SqliteStore(path)
    await store.open()
    try:
        run_id = await _ended(store, "nightly-1")
        policy = RetentionPolicy(runs=DAY, archive=root)
        await RetentionSweep(store, policy, clock=FakeClock(NOW + 2 * DAY), owner="t").tick()
        assert await store.get_run(run_id) is None
    finally:
        await store.close()
    return run_id


async def test_a_file_url_writes_the_same_names_as_a_folder(tmp_path: Path) -> None:
    root = (tmp_path / "archive").as_uri()
    run_id = await _archived(str(tmp_path / "kg.db"), root)

    (url,) = locate(root, run_id)
    (on_disk,) = (tmp_path / "archive").glob(f"*/nightly-1.{run_id}.json.gz")
    assert url.startswith("file://") and url.endswith(on_disk.name)
    assert read_history_text(url) == read_history_text(on_disk)


def test_the_cli_reads_a_run_archived_in_memory(tmp_path: Path) -> None:
    root = f"memory://kg-{uuid.uuid4().hex}"
    store = str(tmp_path / "kg.db")
    run_id = asyncio.run(_archived(store, root))
    (url,) = locate(root, run_id)
    cli = CliRunner()

    url_of_store = f"sqlite:///{store}"
    shown = cli.invoke(app, ["runs", "show", run_id, "--archive", root, "--store", url_of_store])
    history = cli.invoke(app, ["history", "show", url])
    missing = cli.invoke(app, ["history", "show", f"{root}/nope.json.gz"])

    assert shown.exit_code == 0 and "status: completed" in shown.output, shown.output
    assert f"archived: {url}" in shown.output
    assert history.exit_code == 0 and "completed" in history.output.lower(), history.output
    assert missing.exit_code != 0


def test_urls_and_folders_are_told_apart() -> None:
    assert is_url("s3://bucket/kg") and is_url("memory://x") and is_url("file:///tmp/a")
    assert not is_url("/var/lib/archive") and not is_url("archive") and not is_url(None)


def test_a_url_needs_the_extra_and_a_known_scheme(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_retention({"retention": {"archive": "memory://kg"}}).archive == "memory://kg"
    with pytest.raises(ConfigurationError, match="nope"):
        parse_retention({"retention": {"archive": "nope://bucket/kg"}})
    monkeypatch.setitem(sys.modules, "fsspec", None)  # as if the extra were not installed
    with pytest.raises(ConfigurationError, match=r"keepgoing\[archive\]"):
        parse_retention({"retention": {"archive": "s3://bucket/kg"}})


def test_history_show_of_a_url_without_the_extra_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "fsspec", None)

    shown = CliRunner().invoke(app, ["history", "show", "s3://bucket/kg/a.json.gz"])

    assert shown.exit_code == 2 and "keepgoing[archive]" in shown.output, shown.output
