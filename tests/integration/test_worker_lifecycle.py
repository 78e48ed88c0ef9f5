"""Starting and stopping ``keepgoing worker``: a bad file writes nothing; SIGTERM is graceful."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import keepgoing
from keepgoing._history import events as ev

from ._support import Sandbox, Workers, cmd_of, of_type, wait_until

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


@pytest.mark.timeout(45)
def test_sigterm_lets_the_running_step_finish_and_exits_zero(
    kg: Sandbox, workers: Workers, client: keepgoing.Client
) -> None:
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
    result = client.result(handle, timeout=30)

    assert result["value"] == 21
    history = client.history(handle.workflow_id)
    for name in ("step_a", "step_b", "step_c"):
        assert len(of_type(history, ev.TaskCompleted, cmd=cmd_of(history, name))) == 1
    # No step's body ran to completion twice.
    done = sorted((e.task, e.pid) for e in kg.effects("done"))
    assert [t for t, _ in done] == ["a", "b", "c"], done
    (completed_c,) = of_type(history, ev.TaskCompleted, cmd=cmd_of(history, "step_c"))
    assert completed_c.result["b"]["pid"] in (first.pid, second.pid)
