"""Retention in the browser: the runs list says when an ended run goes, and the page of
a run whose rows retention deleted says archived."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from retention_support import end_run, write_archived

from ._stack import UiStack, run_store
from .conftest import sign_in


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiStack]:
    root = tmp_path_factory.mktemp("retention-ui")
    archive = root / "archive"
    (root / "keepgoing.toml").write_text(f'[retention]\nruns = "30d"\narchive = "{archive}"\n')
    s = UiStack(root)
    try:
        s.admin = s.token("root", "admin")
        run_store(s.store_url, _ended)
        _archived(archive)
        s.start_server()
        yield s
    finally:
        s.cleanup()


async def _ended(store: Any) -> None:
    await end_run(store, "r-kept", "kept-1", now=time.time() - 3600, result=1)


def _archived(archive: Path) -> None:
    write_archived(archive, "r-gone", "gone-1", 7)


def test_the_runs_list_says_when_an_ended_run_goes(context: Any, stack: UiStack) -> None:
    page = sign_in(context, stack, stack.admin)
    note = page.locator("tr[data-workflow-id='kept-1'] .deletes")
    note.wait_for()
    assert note.inner_text().startswith("deleted in ")
    assert page.errors == []


def test_the_page_of_a_deleted_run_says_archived(context: Any, stack: UiStack) -> None:
    page = sign_in(context, stack, stack.admin, "/run?id=gone-1")
    page.locator("#run-archived").wait_for()
    assert "archived" in page.locator("#run-archived").inner_text()
    assert "Archived run" in page.locator("#run-title").inner_text()
    page.click("#run-facts a[href^='/replay']")
    page.wait_for_url("**/replay?url=*")
    assert page.errors == []
