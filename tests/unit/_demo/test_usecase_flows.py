"""The use cases' workflow files: the ones the demo deploys are the ones in examples/,
and each runs in-process (a direct call) as its docstring says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from keepgoing._demo.usecases.common import FLOWS

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
NAMES = ("billing_question.py", "crm_sync.py", "monthly_reconciliation.py")


@pytest.mark.parametrize("name", NAMES)
def test_the_demo_deploys_the_examples_files(name: str) -> None:
    assert (FLOWS / name).read_bytes() == (EXAMPLES / name).read_bytes(), (
        f"examples/{name} and keepgoing/_demo/usecases/flows/{name} differ: copy one over the other"
    )


def test_the_billing_question_runs_in_process() -> None:
    # In a process of its own: its task names (intake, ...) are registered there only.
    script = (
        "import asyncio, importlib.util, json, sys\n"
        f"spec = importlib.util.spec_from_file_location('flow', {str(EXAMPLES / NAMES[0])!r})\n"
        "flow = importlib.util.module_from_spec(spec); spec.loader.exec_module(flow)\n"
        "print(json.dumps(asyncio.run(flow.billing_question('TKT-2418'))))\n"
    )
    env = {**os.environ, "DEMO_STEP_SECONDS": "0"}
    env.pop("DEMO_JOURNAL", None)
    done = subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["routing"] == {
        "queue": "billing-refunds",
        "priority": "high",
        "reason": "a duplicate charge on INV-3307",
    }
    assert "INV-3307" in result["reply"]["draft"]
