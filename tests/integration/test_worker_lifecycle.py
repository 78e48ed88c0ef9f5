"""Starting and stopping ``keepgoing worker``: a bad file writes nothing; SIGTERM is graceful."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import keepgoing
from keepgoing import WorkflowRunHandle
from keepgoing._history import events as ev

from ._support import Sandbox, WorkerProcess, Workers, cmd_of, of_type, pid_of, wait_until

pytestmark = pytest.mark.integration


def _rows(db: Path, table: str) -> int:
    with sqlite3.connect(db) as conn:
        (count,) = conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()
    conn.close()
    return int(count)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("app", "expected"),
    [
        ("broken", ["importing", "broken.py", "RuntimeError", "refuses to be imported"]),
        ("missing", ["no such file", "missing.py"]),
    ],
)
def test_a_bad_worker_file_exits_non_zero_and_writes_nothing(
    kg: Sandbox, app: str, expected: list[str]
) -> None:
    path = kg.app(app) if app != "missing" else kg.root / "missing.py"
    argv = [sys.executable, "-m", "keepgoing.cli", "worker", str(path), "--store", kg.url]

    done = subprocess.run(
        argv, cwd=kg.root, env=kg.env(), capture_output=True, text=True, timeout=25, check=False
    )

    print(f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}")
    assert done.returncode != 0
    for text in expected:
        assert text in done.stderr
    if kg.db.exists():
        assert _rows(kg.db, "runs") == 0
        assert _rows(kg.db, "workers") == 0


def _sigterm_mid_step(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> tuple[WorkerProcess, WorkerProcess, WorkflowRunHandle]:
    """Run a -> b (1 s) -> c; SIGTERM the worker while b runs; finish on a second worker."""
    app = kg.app("steps")
    first = workers.start(app)
    handle = client.trigger_workflow("abc", {"key": "k", "x": 1, "b_seconds": 1.0})

    wait_until(lambda: kg.effects("start", "b"), 30, "step b to start")
    signalled = time.monotonic()
    code = first.terminate(timeout=20)
    took = time.monotonic() - signalled
    print(f"SIGTERM -> exit {code} in {took:.2f}s")
    assert code == 0
    assert took < 10  # the step needs ~1 s; the grace period is 10 s

    second = workers.start(app)
    assert client.result(handle, timeout=30)["value"] == 21
    return first, second, handle


@pytest.mark.timeout(45)
def test_sigterm_lets_the_running_step_finish_and_exits_zero(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    first, _second, handle = _sigterm_mid_step(kg, workers, client)

    history = client.history(handle.workflow_id)
    for name in ("step_a", "step_b", "step_c"):
        assert len(of_type(history, ev.TaskCompleted, cmd=cmd_of(history, name))) == 1
    (completed_b,) = of_type(history, ev.TaskCompleted, cmd=cmd_of(history, "step_b"))
    assert (completed_b.attempt, pid_of(completed_b.worker)) == (1, first.pid)  # finished, not cut
    assert [e.pid for e in kg.effects("done", "a")] == [first.pid]
    assert [e.pid for e in kg.effects("done", "b")] == [first.pid]
    assert kg.effects("done", "c")


@pytest.mark.timeout(45)
def test_a_stopping_worker_claims_no_new_step(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    _first, second, handle = _sigterm_mid_step(kg, workers, client)

    history = client.history(handle.workflow_id)
    c = cmd_of(history, "step_c")
    attempts_of_c = of_type(history, ev.TaskCompleted, cmd=c) + of_type(
        history, ev.TaskAttemptFailed, cmd=c
    )
    # SIGTERM came while b ran: c is new work, which a stopping worker must leave alone.
    assert [pid_of(e.worker) for e in attempts_of_c] == [second.pid]
    assert [e.pid for e in kg.effects("start", "c")] == [second.pid]
    assert [e.pid for e in kg.effects("done", "c")] == [second.pid]


@pytest.mark.timeout(45)
def test_sigterm_on_a_step_longer_than_the_grace_period_exits_and_hands_it_over(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
    app = kg.app("steps")
    first = workers.start(app, "--shutdown-grace", "1")
    handle = client.trigger_workflow("abc", {"key": "k", "x": 1, "hold": True})
    wait_until(lambda: kg.effects("start", "b"), 30, "step b to start")

    first.signal(signal.SIGTERM)
    wait_until(lambda: not first.alive(), 10, "the worker to exit after its grace period")
    assert first.proc.returncode == 0

    second = workers.start(app)
    kg.release("release-k")
    assert client.result(handle, timeout=30)["b"]["pid"] == second.pid
    history = client.history(handle.workflow_id)
    (released,) = of_type(history, ev.TaskAttemptFailed, cmd=cmd_of(history, "step_b"))
    assert released.reason == "released"
    assert [e.pid for e in kg.effects("done", "b")] == [second.pid]
