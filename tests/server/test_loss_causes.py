"""Worker losses keepgoing was asked to cause never fail a run: the kill API pressed six
times during one long step, against a real server and real `keepgoing worker`
processes, on SQLite and on PostgreSQL."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.conftest import run_kg

from ._support import Stack, stack_on, wait_until
from .test_api import _id, result, start

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

KILLS = 6  # twice the default max_worker_losses (3)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    root = tmp_path_factory.mktemp(f"losses-{request.param}")
    s = stack_on(request.param, request, root)
    try:
        yield s
    finally:
        s.cleanup()


def _runner(root: Path, key: str, seen: set[int]) -> int:
    """The pid of the process that runs the step's newest attempt, once it runs."""

    def found() -> int | None:
        for path in root.glob(f"running-{key}-*"):
            pid = int(path.name.rsplit("-", 1)[1])
            if pid not in seen:
                return pid
        return None

    return wait_until(found, 60, f"a new attempt of {key}'s long step to start")


def test_six_kills_of_one_long_step_never_fail_the_run(stack: Stack) -> None:
    key = _id("kills")
    seen: set[int] = set()
    with stack.api(stack.admin) as admin:
        stack.start_worker("losses_app", name=f"worker-{key}-0")
        start(admin, "survives_kills", {"key": key}, workflow_id=key)
        for n in range(KILLS):
            pid = _runner(stack.root, key, seen)
            seen.add(pid)
            # The next attempt needs a worker to run on.
            stack.start_worker("losses_app", name=f"worker-{key}-{n + 1}")
            killed = admin.post(f"/api/v1/runs/{key}/kill-worker", json={"via": "ui"})
            assert killed.status_code == 200, killed.text
            assert killed.json()["pid"] == pid
            victim = next(p for p in stack.processes if p.proc.pid == pid)
            assert victim.proc.wait(timeout=20) == -signal.SIGKILL
        last = _runner(stack.root, key, seen)
        (stack.root / f"release-{key}").touch()
        run = result(admin, key, timeout=60)
        assert run["status"] == "completed" and run["result"] == f"released on {last}"

        history = admin.get(f"/api/v1/runs/{key}/history").json()["events"]
        lost = [e for e in history if e["type"] == "TaskAttemptFailed"]
        assert [(e["reason"], e["cause"], e["actor"], e["via"]) for e in lost] == [
            ("worker_lost", "killed_by_request", "alice", "ui")
        ] * KILLS
        assert not [e for e in history if e["type"] == "TaskFailed"]

        (step,) = admin.get(f"/api/v1/runs/{key}/steps").json()["steps"]
        attempts = step["attempts"]
        assert [a["outcome"] for a in attempts] == ["worker_lost"] * KILLS + ["completed"]
        assert {(a["cause"], a["killed_by"], a["via"]) for a in attempts[:KILLS]} == {
            ("killed_by_request", "alice", "ui")
        }
        assert all(a["cause_text"] == "worker killed from the UI by alice" for a in attempts[:-1])

    shown = run_kg(stack.root, "show", key, "--url", stack.url, "--token", stack.admin)
    assert shown.returncode == 0, shown.stderr
    # Once per lost attempt in the attempts table, and once as the step's last problem.
    assert shown.stdout.count("worker killed from the UI by alice") == KILLS + 1, shown.stdout


def test_a_kill_names_where_it_came_from_or_is_refused(stack: Stack) -> None:
    with stack.api(stack.admin) as admin:
        wrong = admin.post("/api/v1/workers/no-such-worker/kill", json={"via": "a browser"})
        assert wrong.status_code == 400, wrong.text
        assert "via" in wrong.text
        not_an_object = admin.post("/api/v1/workers/no-such-worker/kill", json=["ui"])
        assert not_an_object.status_code == 400, not_an_object.text
        # A kill of a worker that is not there records nothing and says so.
        missing = admin.post("/api/v1/workers/no-such-worker/kill", json={"via": "cli"})
        assert missing.status_code == 404 and missing.json()["code"] == "worker_not_found"
