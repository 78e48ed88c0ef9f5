"""``keepgoing demo`` (what ``make demo`` runs): a real SIGKILL mid-step, then recovery."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from keepgoing import Client
from keepgoing._history import events as ev

pytestmark = pytest.mark.integration


@pytest.mark.timeout(120)
def test_the_demo_kills_its_worker_mid_step_and_the_run_recovers(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    done = subprocess.run(
        [sys.executable, "-m", "keepgoing.cli", "demo", "--folder", str(folder)],
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )

    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "The workflow keeps going" in output
    assert "Retried step: draft_digest" in output
    # The store it leaves behind tells the same story: one lost attempt, one completion each.
    with Client(store=f"sqlite:///{folder / 'demo.db'}") as client:
        (run,) = client.list_runs()
        assert run.status == "completed"
        history = client.history(run.workflow_id)
    lost = [e for e in history if isinstance(e, ev.TaskAttemptFailed)]
    assert [(e.name, e.reason) for e in lost] == [("draft_digest", "worker_lost")]
    completed = [e for e in history if isinstance(e, ev.TaskCompleted)]
    assert len(completed) == len({e.cmd for e in completed}) == 7
