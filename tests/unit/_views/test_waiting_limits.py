"""What a run waits for when a limit holds its task back, in the words every surface shows."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from keepgoing._history import events as ev
from keepgoing._store.limits_protocol import LimitWait
from keepgoing._store.records import ActivationCommit, StartRequest
from keepgoing._store.sqlite import SqliteStore
from keepgoing._views.queues import serving
from keepgoing._views.waiting import held_back, limit_text, waiting_for

NOW = 1_000_000.0


def test_a_full_slot_and_an_empty_bucket_in_words() -> None:
    slot = LimitWait("r1", "lookup_customer", "concurrency", "lookup_customer", held=2, cap=2)
    until = datetime(2026, 1, 2, 12, 0, 1, 250_000, tzinfo=UTC).timestamp()
    rate = LimitWait("r1", "lookup_customer", "rate", "crm", until=until)

    assert limit_text(slot) == "waiting for a concurrency slot of lookup_customer (2/2 held)"
    assert limit_text(rate) == "rate-limited by crm until 12:00:01.250"
    assert held_back([slot, slot, rate]) == {"r1": f"{limit_text(slot)}; {limit_text(rate)}"}


def test_a_run_whose_task_waits_for_a_slot_says_so(tmp_path: Path) -> None:
    async def scenario() -> str | None:
        store = SqliteStore(str(tmp_path / "kg.db"))
        await store.open()
        try:
            request = StartRequest("run-1", "wf-1", "wf", {}, "default", "v1", NOW)
            await store.start_run(request)
            (claim,) = await store.claim_activations(
                worker_id="w1",
                queues=["default"],
                workflow_names=["wf"],
                limit=1,
                lease_ttl=15.0,
                now=NOW,
            )
            limits = {"limit_name": "lookup", "limit_key": "", "concurrency_cap": 1}
            tasks = [ev.TaskScheduled(cmd=i, name="lookup", limits=limits) for i in (1, 2)]
            commit = ActivationCommit(
                run_id="run-1",
                fence=claim.fence,
                worker_id="w1",
                saw_upto=claim.run.last_input_seq,
                time=NOW,
                commands=tasks,
                now=NOW,
            )
            assert (await store.commit_activation(commit)).ok
            await store.claim_tasks(
                worker_id="w2",
                queues=["default"],
                task_names=["lookup"],
                limit=5,
                lease_ttl=15.0,
                now=NOW,
            )
            run = await store.get_run("run-1")
            assert run is not None
            return waiting_for(run, await serving(store, NOW + 1, [run]))
        finally:
            await store.close()

    assert asyncio.run(scenario()) == "waiting for a concurrency slot of lookup (1/1 held)"
