"""Several server processes on one SQLite store never double-fire a timer or
double-reap a lease: each is one conditional write, and they race for real here."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from keepgoing._history import events as ev
from keepgoing._store.protocol import Store
from keepgoing._store.records import ActivationCommit, StartRequest

from ._support import Stack, run_store, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

TIMERS = 200
TASKS = 50
QUEUE = "services-test"


@pytest.fixture
def two_servers(tmp_path: Path) -> Iterator[Stack]:
    stack = Stack(tmp_path)
    try:
        stack.admin = stack.token("root", "admin")
        stack.start_server(name="server-a")
        stack.start_server(name="server-b")
        yield stack
    finally:
        stack.cleanup()


async def _runs(store: Store, prefix: str, count: int, commands: list[ev.Event]) -> list[str]:
    """``count`` runs whose first activation committed ``commands``; returns their run ids."""
    now = time.time()
    ids = [f"{prefix}-{n}" for n in range(count)]
    await asyncio.gather(
        *(store.start_run(StartRequest(run_id, run_id, "wf", {}, QUEUE, "", now)) for run_id in ids)
    )
    claims = await store.claim_activations(
        worker_id="setup", queues=[QUEUE], workflow_names=["wf"], limit=count, lease_ttl=60, now=now
    )
    assert len(claims) == count
    results = await asyncio.gather(
        *(
            store.commit_activation(
                ActivationCommit(
                    run_id=c.run.run_id,
                    fence=c.fence,
                    worker_id="setup",
                    saw_upto=c.run.last_input_seq,
                    time=now,
                    commands=commands,
                    now=now,
                )
            )
            for c in claims
        )
    )
    assert all(r.ok for r in results)
    return ids


def _served(stack: Stack, metric: str) -> int:
    total = 0
    for server in stack.processes:
        text = httpx.get(
            f"{server.url}/metrics",  # type: ignore[attr-defined]
            headers={"Authorization": f"Bearer {stack.admin}"},
        ).text
        line = next(line for line in text.splitlines() if line.startswith(metric))
        total += int(float(line.split()[1]))
    return total


def _histories(stack: Stack, ids: list[str]) -> list[list[ev.Event]]:
    async def read(store: Store) -> list[list[ev.Event]]:
        return list(await asyncio.gather(*(store.read_history(i) for i in ids)))

    result: list[list[ev.Event]] = run_store(stack.store_url, read)
    return result


def test_two_servers_fire_each_of_200_timers_exactly_once(two_servers: Stack) -> None:
    fire_at = time.time() + 1.0  # both servers are up and polling by then
    timers = [ev.TimerStarted(cmd=1, fire_at=fire_at), ev.TimerStarted(cmd=2, fire_at=fire_at)]
    ids = run_store(two_servers.store_url, lambda s: _runs(s, "timer", TIMERS // 2, timers))

    def all_fired() -> bool:
        return _served(two_servers, "keepgoing_server_timers_fired_total") >= TIMERS

    wait_until(all_fired, 30, f"{TIMERS} timers to fire")
    fired = Counter(
        (run_id, e.cmd)
        for run_id, history in zip(ids, _histories(two_servers, ids), strict=True)
        for e in history
        if isinstance(e, ev.TimerFired)
    )
    assert len(fired) == TIMERS
    assert set(fired.values()) == {1}
    assert _served(two_servers, "keepgoing_server_timers_fired_total") == TIMERS


def test_two_servers_reap_each_expired_lease_exactly_once(two_servers: Stack) -> None:
    task = [ev.TaskScheduled(cmd=1, name="t", retries=0, max_worker_losses=5)]

    async def setup(store: Store) -> list[str]:
        ids = await _runs(store, "lease", TASKS, task)
        claims = await store.claim_tasks(
            worker_id="ghost",
            queues=[QUEUE],
            task_names=["t"],
            limit=TASKS,
            lease_ttl=0.5,
            now=time.time(),
        )
        assert len(claims) == TASKS
        return ids

    ids = run_store(two_servers.store_url, setup)
    wait_until(
        lambda: _served(two_servers, "keepgoing_server_leases_reaped_total") >= TASKS,
        30,
        f"{TASKS} leases to be reaped",
    )
    lost = Counter(
        run_id
        for run_id, history in zip(ids, _histories(two_servers, ids), strict=True)
        for e in history
        if isinstance(e, ev.TaskAttemptFailed) and e.reason == "worker_lost"
    )
    assert set(lost) == set(ids) and set(lost.values()) == {1}
    assert _served(two_servers, "keepgoing_server_leases_reaped_total") == TASKS


def test_a_server_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    stack = Stack(tmp_path)
    try:
        server = stack.start_server()
        assert server.terminate() == 0
        assert "keepgoing server stopped" in server.stderr()  # after the app's shutdown
    finally:
        stack.cleanup()
