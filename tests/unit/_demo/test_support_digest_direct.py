"""The support-digest agent runs in-process, as the demo page's "Test it in-process" says:
``asyncio.run(support_digest("k", ["FH-1041"]))`` on a direct call's private store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

AGENT = Path(__file__).resolve().parents[3] / "examples" / "support_digest"


def _direct(call: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    # In a process of its own: the agent's task names are registered there only.
    script = (
        "import asyncio, json, sys\n"
        f"sys.path.insert(0, {str(AGENT)!r})\n"
        "from agent import support_digest\n"
        f"print(json.dumps({call}))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KEEPGOING_", "DIGEST_"))}
    env["SUPPORT_DIGEST_STATE"] = str(tmp_path / "state")  # the directory's quota and log
    return subprocess.run(
        [sys.executable, "-c", script],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )


def test_a_direct_call_of_the_agent_returns_its_report(tmp_path: Path) -> None:
    done = _direct('asyncio.run(support_digest("k", ["FH-1041"]))', tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["run_key"] == "k" and result["tickets"] == 1
    assert result["model"] == "keepgoing-scripted-1"
    assert result["sections"] == 1 and not result["started_with_lessons"]
    assert result["lessons_learned"] and result["lessons_learned"][0].startswith("k: the ")
    # Nothing was written outside the call's private store: no store file appeared.
    assert not (tmp_path / ".keepgoing").exists()


def test_a_direct_call_looks_up_each_batch_through_the_directory(tmp_path: Path) -> None:
    # FH-1041..FH-1044 in two batches: each batch's two customers are looked up at
    # once, through the directory's quota (its log has an answer per request), and a
    # durable timer sits between the batches.
    ids = [f"FH-{1041 + n}" for n in range(4)]
    call = f"asyncio.run(support_digest('week', {ids!r}, batch_size=2, pause_seconds=0.1))"
    done = _direct(call, tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["tickets"] == 4
    answers = (tmp_path / "state" / "directory.log").read_text().split("\n")
    statuses = [line.split()[2] for line in answers if line.strip()]
    assert statuses.count("200") == 4, answers  # one lookup per customer
    assert json.loads((tmp_path / "state" / "directory.json").read_text())["tokens"] >= 0


def test_a_ticket_the_export_lacks_fails_the_step_by_name(tmp_path: Path) -> None:
    done = _direct('asyncio.run(support_digest("k", ["FH-9999"]))', tmp_path)
    assert done.returncode != 0
    assert "the helpdesk has no ticket FH-9999" in done.stderr
