"""Retention in the browser: the runs list says when an ended run goes, and the page of
a run whose rows retention deleted says archived."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from keepgoing._history.events import WorkflowCompleted
from keepgoing._store.records import ActivationCommit, RunRecord, StartRequest
from keepgoing._worker.archive import write_archive

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
    now = time.time() - 3600
    run = await store.start_run(
        StartRequest(
            run_id="r-kept",
            workflow_id="kept-1",
            workflow_name="nightly",
            input={},
            task_queue="default",
            code_version="v1",
            now=now,
        )
    )
    (claim,) = await store.claim_activations(
        worker_id="w",
        queues=["default"],
        workflow_names=["nightly"],
        limit=1,
        lease_ttl=30,
        now=now,
    )
    await store.commit_activation(
        ActivationCommit(
            run_id=run.run_id,
            fence=claim.fence,
            worker_id="w",
            saw_upto=claim.run.last_input_seq,
            time=now,
            commands=[WorkflowCompleted(result=1)],
            now=now,
        )
    )


def _archived(archive: Path) -> None:
    run = RunRecord(
        run_id="r-gone",
        workflow_id="gone-1",
        workflow_name="nightly",
        status="completed",
        input={},
        task_queue="default",
        code_version="v1",
        created_at=1.0,
        updated_at=2.0,
        ended_at=2.0,
        result=7,
    )
    write_archive(archive, run, [WorkflowCompleted(seq=2, at=2.0, result=7)])


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
