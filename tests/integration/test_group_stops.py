"""The local group backend says why it stops each replica: a scale-down, a replacement
by a new revision, a drain whose grace ran out. Real `keepgoing worker` replicas, on
SQLite and PostgreSQL; the step's task has max_worker_losses=0, so a loss that
counted would fail the run."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

import pytest

import keepgoing
from keepgoing._clock import system_clock
from keepgoing._groups.local import LocalBackend
from keepgoing._groups.spec import GroupRevision
from keepgoing._groups.worker_stops import store_hook
from keepgoing._history import events as ev
from keepgoing._open_store import store_from_url

from ._support import APPS, Sandbox, of_type, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

T = TypeVar("T")
GROUP = "stops"
QUEUE = "workflows.stops"


class Loop:
    """A store opened on an event loop in its own thread, as the autoscaler's is."""

    def __init__(self, url: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.store = store_from_url(url)
        self.run(self.store.open())

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def close(self) -> None:
        self.run(self.store.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def loop(kg: Sandbox) -> Iterator[Loop]:
    services = Loop(kg.url)
    try:
        yield services
    finally:
        services.close()


def _backend(kg: Sandbox, loop: Loop, grace: str) -> LocalBackend:
    backend = LocalBackend(
        kg.url,
        workdir=kg.root / "groups",
        log_dir=kg.root / "logs",
        worker_args=("--shutdown-grace", grace, "--heartbeat", "0.5"),
    )
    backend.on_stop = store_hook(loop.store, loop.loop, system_clock)
    return backend


def _revision(number: int) -> GroupRevision:
    source = (APPS / "stops_app.py").read_text()
    # A replica gets only its group's env (never this process's): the test folder too.
    env = {"KG_TEST_DIR": os.environ["KG_TEST_DIR"]}
    return GroupRevision(GROUP, number, QUEUE, source, "stops_app.py", concurrency=2, env=env)


def _runner(kg: Sandbox, key: str, seen: set[int]) -> int:
    def found() -> int | None:
        for path in kg.root.glob(f"running-{key}-*"):
            pid = int(path.name.rsplit("-", 1)[1])
            if pid not in seen:
                return pid
        return None

    pid = wait_until(found, 60, f"an attempt of {key} to run")
    seen.add(pid)
    return pid


def _serving(client: keepgoing.Client) -> None:
    """Until the replica's worker has registered: no group row names the queue here
    (the backend is driven without a deploy), so a start before it would warn of a
    queue nothing serves."""
    wait_until(
        lambda: any(QUEUE in w.queues for w in client.list_workers()), 60, "the replica to serve"
    )


@pytest.fixture(autouse=True)
def test_dir(kg: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KG_TEST_DIR", str(kg.root))  # each revision's env passes it on


def test_scaled_down_and_replaced_replicas_hand_back_their_step_with_the_cause(
    kg: Sandbox, loop: Loop, client: keepgoing.Client
) -> None:
    backend = _backend(kg, loop, "0.2")  # a held step is handed back 0.2 s after SIGTERM
    try:
        backend.ensure_group(_revision(1))
        backend.set_replicas(GROUP, 1)
        _serving(client)
        handle = client.trigger_workflow("hold", {"key": "k"}, task_queue=QUEUE)
        seen: set[int] = set()
        _runner(kg, "k", seen)
        backend.set_replicas(GROUP, 0)  # scale down while the step runs
        wait_until(lambda: backend.running(GROUP) == 0, 30, "the replica to stop")
        backend.set_replicas(GROUP, 1)
        _runner(kg, "k", seen)
        backend.ensure_group(_revision(2))  # a new revision replaces the replica
        backend.set_replicas(GROUP, 1)
        last = _runner(kg, "k", seen)
        (kg.root / "release-k").touch()
        assert client.result(handle, timeout=60) == f"released on {last}"
    finally:
        backend.close(grace=20)

    handed = of_type(client.history(handle.workflow_id), ev.TaskAttemptFailed)
    assert [(f.reason, f.cause, f.via) for f in handed] == [
        ("released", "scaled_down", "autoscaler"),
        ("released", "replaced", "autoscaler"),
    ]


def test_a_replica_whose_drain_times_out_is_lost_with_that_cause_and_not_counted(
    kg: Sandbox, loop: Loop, client: keepgoing.Client
) -> None:
    backend = _backend(kg, loop, "60")  # it would drain for a minute: longer than close's grace
    backend.ensure_group(_revision(1))
    backend.set_replicas(GROUP, 1)
    _serving(client)
    handle = client.trigger_workflow("hold", {"key": "d"}, task_queue=QUEUE)
    _runner(kg, "d", set())
    backend.close(grace=0.5)  # SIGTERM, then SIGKILL half a second later

    (exited,) = [i for i in backend.list_instances(GROUP) if i.state == "exited"]
    assert exited.exit_status == -9
    # No worker is left to sweep: this test reaps the dead replica's lease itself.
    wait_until(
        lambda: loop.run(loop.store.reap_expired_leases(now=system_clock.now(), limit=10)),
        30,
        "the lost attempt to be reaped",
    )
    (lost,) = of_type(client.history(handle.workflow_id), ev.TaskAttemptFailed)
    assert (lost.reason, lost.cause, lost.via) == ("worker_lost", "drain_timeout", "autoscaler")
    assert lost.retry_at is not None  # max_worker_losses=0, yet it is retried
    assert client.get_run(handle.workflow_id).status == "running"
