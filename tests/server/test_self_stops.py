"""A task that stops its own worker pays for it: a SIGTERM or SIGINT sent from inside
the attempt, `os.killpg(0, ...)`, a kill request through the server naming its own
worker, or a stop recorded through the store (by the task, or by a process it
started) counts against its `max_worker_losses`, so the step fails instead of
running forever. The worker's other steps are handed back free, and so is a stop
from outside. Real server and `keepgoing worker` processes, on SQLite and
PostgreSQL."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from ._support import Process, Stack, stack_on, wait_until
from .test_api import _id, result, start

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

APP = "self_stops_app"
GRACE = ("--shutdown-grace", "0.5")


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp(f"self-stops-{request.param}")
    s = stack_on(request.param, request, root)
    try:
        yield s
    finally:
        s.cleanup()


@pytest.fixture
def admin(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[httpx.Client]:
    # Every worker of a test starts fresh, with what its tasks need to reach keepgoing.
    for process in stack.processes:
        if process.name.startswith("worker") and process.alive():
            process.terminate()
    monkeypatch.setenv("KG_SERVER_URL", stack.url)
    monkeypatch.setenv("KG_STORE_URL", stack.store_url)
    monkeypatch.setenv("KG_KILL_TOKEN", stack.token(_id("killer"), "workers.kill"))
    with stack.api(stack.admin) as client:
        yield client


def _workers(stack: Stack, n: int, key: str, *args: str) -> list[Process]:
    return [
        stack.start_worker(APP, f"worker-{key}-{i}", [*GRACE, *args], new_session=True)
        for i in range(n)
    ]


def _attempts(stack: Stack, key: str) -> list[dict[str, Any]]:
    path = stack.root / f"attempts-{key}.log"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def _ended(admin: httpx.Client, key: str) -> list[tuple[str, str | None]]:
    history = admin.get(f"/api/v1/runs/{key}/history").json()["events"]
    return [(e["reason"], e.get("cause")) for e in history if e["type"] == "TaskAttemptFailed"]


@pytest.mark.parametrize("how", ["sigterm", "sigint", "killpg"])
def test_a_task_that_signals_its_own_worker_fails_after_max_worker_losses(
    stack: Stack, admin: httpx.Client, how: str
) -> None:
    key = _id(how)
    started = _workers(stack, 3, key)  # two to stop, one to end the run
    start(admin, "self_stop", {"key": key, "kind": "signal", "how": how}, workflow_id=key)

    run = result(admin, key, timeout=60)
    assert run["status"] == "failed"
    assert "max_worker_losses=1" in run["error"]["message"]
    assert _ended(admin, key) == [("released", "signalled_by_task")] * 2
    assert len(_attempts(stack, key)) == 2  # once per allowed loss, then no more
    # Two drained and exited, as a SIGTERM asks; the third is still serving.
    wait_until(lambda: [w.alive() for w in started].count(False) == 2, 30, "two to exit")
    assert sorted(w.proc.returncode for w in started if not w.alive()) == [0, 0]
    steps = admin.get(f"/api/v1/runs/{key}/steps").json()["steps"]
    (step,) = steps
    assert [a["counted"] for a in step["attempts"]] == [True, True]
    assert "signal the task itself sent" in step["attempts"][0]["cause_text"]


def test_a_task_that_kills_its_own_worker_through_the_api_counts_it(
    stack: Stack, admin: httpx.Client
) -> None:
    key = _id("api")
    started = _workers(stack, 3, key)
    start(admin, "self_stop", {"key": key, "kind": "api"}, workflow_id=key)

    run = result(admin, key, timeout=60)
    assert run["status"] == "failed" and "max_worker_losses=1" in run["error"]["message"]
    assert _ended(admin, key) == [("worker_lost", "stopped_by_task")] * 2
    assert len(_attempts(stack, key)) == 2
    wait_until(lambda: [w.alive() for w in started].count(False) == 2, 30, "two to die")
    assert [w.proc.returncode for w in started if not w.alive()] == [-signal.SIGKILL] * 2
    kills = admin.get("/api/v1/audit", params={"action": "worker.kill"}).json()["entries"]
    assert len([k for k in kills if k["detail"]["via"] == "ui"]) >= 2  # audited as asked


@pytest.mark.parametrize("where", ["task", "child"])
def test_a_task_that_records_a_stop_of_its_own_worker_counts_it(
    stack: Stack, admin: httpx.Client, where: str
) -> None:
    key = _id(f"record-{where}")
    _workers(stack, 3, key)
    start(admin, "self_stop", {"key": key, "kind": "record", "how": where}, workflow_id=key)

    run = result(admin, key, timeout=60)
    assert run["status"] == "failed" and "max_worker_losses=1" in run["error"]["message"]
    # It claimed "scaled_down"; the store saw the worker's own code ask for it.
    assert _ended(admin, key) == [("worker_lost", "stopped_by_task")] * 2
    assert len(_attempts(stack, key)) == 2


def test_the_other_steps_of_a_self_signalled_worker_are_handed_back_free(
    stack: Stack, admin: httpx.Client
) -> None:
    innocent, hostile = _id("innocent"), _id("hostile")
    (first,) = _workers(stack, 1, innocent, "--concurrency", "4")
    start(admin, "self_stop", {"key": innocent, "kind": "bystander"}, workflow_id=innocent)
    wait_until(lambda: _attempts(stack, innocent), 30, "the bystander's step to run")
    start(
        admin,
        "self_stop",
        {"key": hostile, "kind": "signal", "how": "sigterm"},
        workflow_id=hostile,
    )
    assert first.proc.wait(timeout=30) == 0
    (second,) = _workers(stack, 1, hostile, "--concurrency", "4")
    assert second.proc.wait(timeout=30) == 0
    # The bystander (max_worker_losses=0) was handed back twice, counted against nothing.
    _workers(stack, 1, f"{innocent}-last")
    assert result(admin, hostile, timeout=60)["status"] == "failed"
    wait_until(lambda: len(_attempts(stack, innocent)) == 3, 30, "the bystander again")
    (stack.root / f"release-{innocent}").touch()
    assert result(admin, innocent, timeout=60)["status"] == "completed"
    handed = _ended(admin, innocent)
    assert handed == [("released", "stopped_by_other_step")] * 2
    assert _ended(admin, hostile) == [("released", "signalled_by_task")] * 2


def test_a_sigterm_from_outside_is_recorded_and_counted_against_nothing(
    stack: Stack, admin: httpx.Client
) -> None:
    key = _id("outside")
    (worker,) = _workers(stack, 1, key)
    start(admin, "self_stop", {"key": key, "kind": "bystander"}, workflow_id=key)
    wait_until(lambda: _attempts(stack, key), 30, "the step to run")
    assert worker.terminate() == 0  # the operator's SIGTERM: not the task's doing
    _workers(stack, 1, f"{key}-next")
    wait_until(lambda: len(_attempts(stack, key)) == 2, 30, "the step again")
    (stack.root / f"release-{key}").touch()
    assert result(admin, key, timeout=60)["status"] == "completed"
    assert _ended(admin, key) == [("released", "shutdown")]
