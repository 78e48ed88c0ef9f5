"""Two server processes on one store fire the same schedule: every slot starts
exactly one run (the fire is a compare-and-set on the schedule's cursor)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from keepgoing._schedules import commands as ops
from keepgoing._schedules.commands import Actor, ScheduleRequest
from keepgoing._store.protocol import Store

from ._support import Stack, run_store, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

SLOTS = 20


@pytest.fixture(params=["sqlite", "postgresql"])
def two_servers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stack]:
    stack = Stack(tmp_path)
    try:
        if request.param == "postgresql":
            from postgres_support import migrated, reset  # noqa: PLC0415

            stack.store_url = migrated(request.getfixturevalue("postgres_url"))
            reset(stack.store_url)
        stack.admin = stack.token("root", "admin")
        stack.start_server(name="server-a")
        stack.start_server(name="server-b")
        yield stack
    finally:
        stack.cleanup()


def test_two_servers_start_one_run_per_slot(two_servers: Stack) -> None:
    now = time.time()
    first = float(int(now)) - 11  # 12 slots passed (caught up), 8 to come, one a second

    async def create(store: Store) -> None:
        await store.record_workflows(["wf"], ["default"], now)
        req = ScheduleRequest(
            workflow="wf",
            every="1s",
            overlap="allow_all",
            start_at=first,
            end_at=first + SLOTS - 1,
        )
        await ops.create(store, "race", req, actor=Actor("user", "t"), now=first - 0.5)

    run_store(two_servers.store_url, create)

    def acted() -> int:
        async def count(store: Store) -> int:
            return len(await store.schedule_actions("race", limit=100))

        done: int = run_store(two_servers.store_url, count)
        return done

    wait_until(lambda: acted() >= SLOTS, timeout=60)

    async def check(store: Store) -> None:
        actions = await store.schedule_actions("race", limit=100)
        assert len(actions) == SLOTS
        assert all(a.status == "started" for a in actions)
        runs = await store.list_runs(limit=100)
        assert len(runs) == SLOTS
        assert len({r.workflow_id for r in runs}) == SLOTS

    run_store(two_servers.store_url, check)
    for server in two_servers.processes:
        assert server.alive(), server.report()
