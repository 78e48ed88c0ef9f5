"""Trouble on the runs list over HTTP and in the CLI, against a real server and real
``keepgoing worker`` processes on SQLite and PostgreSQL: a run with 429 retries and a
killed worker is marked and found by its filters; a run waiting for a reviewer is in
the state ``waiting_for_review`` until the decision; the killed worker leaves the live
workers within its heartbeat deadline, with why, and its replacement is listed."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cli.conftest import run_kg
from keepgoing._store.lost_workers import HEARTBEAT_DEADLINE

from ._support import Stack, wait_until
from .test_api import _id, result, start

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    s = Stack(tmp_path_factory.mktemp(f"trouble-{request.param}"))
    if request.param == "postgresql":
        from postgres_support import migrated, reset  # noqa: PLC0415

        s.store_url = migrated(request.getfixturevalue("postgres_url"))
        reset(s.store_url)
    try:
        s.admin = s.token("alice", "admin")
        s.start_server()
        yield s
    finally:
        s.cleanup()


def _runner(root: Path, key: str) -> int:
    def found() -> int | None:
        paths = list(root.glob(f"running-{key}-*"))
        return int(paths[0].name.rsplit("-", 1)[1]) if paths else None

    return wait_until(found, 60, f"{key}'s held step to start")


def _listed(admin: httpx.Client, **params: Any) -> list[str]:
    response = admin.get("/api/v1/runs", params=params)
    assert response.status_code == 200, response.text
    return [r["workflow_id"] for r in response.json()["runs"]]


def _workers(admin: httpx.Client) -> dict[str, Any]:
    body: dict[str, Any] = admin.get("/api/v1/workers").json()
    return body


def test_a_troubled_run_is_marked_and_found_and_its_dead_worker_is_lost(stack: Stack) -> None:
    key = _id("troubled")
    calm = _id("calm")
    with stack.api(stack.admin) as admin:
        first = stack.start_worker("trouble_app", name=f"worker-{key}-0")
        start(admin, "troubled", {"key": key}, workflow_id=key)
        pid = _runner(stack.root, key)
        assert pid == first.proc.pid
        (victim,) = [w for w in _workers(admin)["workers"] if w["pid"] == pid]
        replacement = stack.start_worker("trouble_app", name=f"worker-{key}-1")
        # The replacement is listed as soon as it registers.
        assert replacement.proc.pid in [w["pid"] for w in _workers(admin)["workers"]]
        killed = admin.post(f"/api/v1/runs/{key}/kill-worker", json={"via": "ui"})
        assert killed.status_code == 200, killed.text
        assert first.proc.wait(timeout=20) == -signal.SIGKILL

        # Out of the live list within one heartbeat deadline, with when and why.
        def gone() -> dict[str, Any] | None:
            lost = {w["worker_id"]: w for w in _workers(admin)["lost"]}
            return lost.get(victim["worker_id"])

        lost = wait_until(gone, HEARTBEAT_DEADLINE, "the killed worker to be marked lost")
        assert lost["lost_reason"] == "worker killed from the UI by alice: its process ended"
        assert lost["lost_at"] >= victim["heartbeat_at"]
        live = _workers(admin)["workers"]
        assert victim["worker_id"] not in [w["worker_id"] for w in live]
        assert replacement.proc.pid in [w["pid"] for w in live]
        queues = {q["queue"]: q for q in admin.get("/api/v1/queues").json()["queues"]}
        assert queues["default"]["workers"] == 1  # the dead one is not counted

        (stack.root / f"release-{key}").touch()
        run = result(admin, key, timeout=60)
        assert run["status"] == "completed"
        assert run["trouble"] == {
            "worker_losses": 1,
            "retries": 2,
            "rate_limited": 2,
            "reviews_waiting": 0,
        }
        assert [m["text"] for m in run["markers"]] == [
            "worker lost \u00d71",
            "retried \u00d72",
            "rate-limited \u00d72",
        ]
        start(admin, "needs_review", {"key": calm}, workflow_id=calm)  # no loss, no retry
        assert _listed(admin, trouble="worker_lost", id=key) == [key]
        assert key in _listed(admin, trouble="rate_limited,retried")
        assert calm not in _listed(admin, trouble="worker_lost")
        bad = admin.get("/api/v1/runs", params={"trouble": "killed"})
        assert bad.status_code == 400 and "unknown trouble 'killed'" in bad.text
        counts = admin.get("/api/v1/run-counts", params={"id": key}).json()
        assert counts["trouble"]["worker_lost"] == 1 and counts["trouble"]["blocked"] == 0

    args = ("--url", stack.url, "--token", stack.admin)
    listed = run_kg(stack.root, "runs", "--trouble", "worker_lost", "--id", key, *args)
    assert listed.returncode == 0, listed.stderr
    assert "worker lost \u00d71" in listed.stdout and "rate-limited \u00d72" in listed.stdout
    found = json.loads(run_kg(stack.root, "runs", "--id", key, "--json", *args).stdout)
    assert found[0]["trouble"]["worker_losses"] == 1
    assert found[0]["markers"][0]["kind"] == "worker_lost"
    workers = run_kg(stack.root, "workers", *args)
    assert workers.returncode == 0, workers.stderr
    assert "lost worker(s)" in workers.stdout and "killed from the UI by alice" in workers.stdout
    # The store's own client says the same, without a server.
    direct = ("--store", stack.store_url)
    found = json.loads(
        run_kg(
            stack.root, "runs", "--trouble", "worker_lost", "--id", key, "--json", *direct
        ).stdout
    )
    assert [r["workflow_id"] for r in found] == [key] and found[0]["state"] == "completed"
    live = json.loads(run_kg(stack.root, "workers", "--json", *direct).stdout)
    everyone = json.loads(run_kg(stack.root, "workers", "--json", "--lost", *direct).stdout)
    assert victim["worker_id"] not in [w["worker_id"] for w in live]
    (gone,) = [w for w in everyone if w["worker_id"] == victim["worker_id"]]
    assert gone["lost_reason"] == "worker killed from the UI by alice: its process ended"


def test_a_run_waiting_for_review_is_a_state_until_the_decision(stack: Stack) -> None:
    key = _id("review")
    with stack.api(stack.admin) as admin:
        stack.start_worker("trouble_app", name=f"worker-{key}")
        start(admin, "needs_review", {"key": key}, workflow_id=key)

        def waiting() -> dict[str, Any] | None:
            run: dict[str, Any] = admin.get(f"/api/v1/runs/{key}").json()
            return run if run["state"] == "waiting_for_review" else None

        run = wait_until(waiting, 60, f"{key} to wait for a review")
        assert run["status"] == "running"  # the status is kept; the state says more
        assert [m["kind"] for m in run["markers"]] == ["waiting_for_review"]
        assert key in _listed(admin, trouble="waiting_for_review")
        counts = admin.get("/api/v1/run-counts").json()
        assert counts["trouble"]["waiting_for_review"] >= 1
        shown = run_kg(stack.root, "runs", "--id", key, "--url", stack.url, "--token", stack.admin)
        assert "waiting for review" in shown.stdout
        operation = f"op-{run['run_id']}-1"
        decided = admin.post(
            f"/api/v1/operations/{operation}/review",
            json={"decision": "approve", "result": {"version": 4}, "reason": "the CRM shows v4"},
        )
        assert decided.status_code == 202, decided.text
        done = result(admin, key, timeout=60)
        assert done["state"] == "completed" and done["trouble"]["reviews_waiting"] == 0
        assert key not in _listed(admin, trouble="waiting_for_review")
