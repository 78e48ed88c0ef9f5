"""The guide's "When a run fails" example runs as written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "recovery.py"


def test_the_recovery_example_runs() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "status: drafted" in done.stdout
    assert "published: NOTES ON REFUNDS" in done.stdout
    assert (
        "refused: run " in done.stdout
        and "fork refused: step 1 fetch was recorded with topic='billing', the new input "
        "schedules topic='refunds'; fork from step 1 or earlier"
        in done.stdout
    )
