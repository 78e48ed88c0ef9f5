"""The guide's "Flow control" examples for workflows, as written."""

from __future__ import annotations

from pathlib import Path

import pytest

from keepgoing import Client, Concurrency, InvalidLimitError, workflow


@workflow(concurrency=Concurrency(2, key="account_id"))
async def account_digest(account_id: str, day: str) -> str:
    return f"digest of {account_id} for {day}"


@workflow(singleton="account_id", on_conflict="skip")
async def sync_account(account_id: str) -> None: ...


def test_the_guides_concurrency_and_priority_examples(tmp_path: Path) -> None:
    with Client(store=f"sqlite:///{tmp_path / 'kg.db'}") as client:
        for day in ("mon", "tue"):
            client.trigger_workflow(account_digest, {"account_id": "acme", "day": day})
        handle = client.trigger_workflow(
            account_digest, {"account_id": "acme", "day": "mon"}, priority=5
        )
        other = client.trigger_workflow(account_digest, {"account_id": "globex", "day": "mon"})

        run = client.get_run(handle.workflow_id)
        assert run.status == "queued" and run.priority == 5
        assert run.waiting_for == (
            'queued: waiting for a concurrency slot of account_digest for "acme" (2/2 held)'
        )
        assert client.get_run(other.workflow_id).status == "running"


def test_the_guides_singleton_example(tmp_path: Path) -> None:
    with Client(store=f"sqlite:///{tmp_path / 'kg.db'}") as client:
        first = client.trigger_workflow(sync_account, {"account_id": "acme"})
        again = client.trigger_workflow(sync_account, {"account_id": "acme"})
        assert again.existing and again.run_id == first.run_id


def test_a_singleton_and_a_concurrency_limit_do_not_mix() -> None:
    with pytest.raises(InvalidLimitError, match="not both"):

        @workflow(name="guide_both", singleton="a", concurrency=2)
        async def both(a: str) -> None: ...
