"""Deploy, then trigger, in store mode with nothing else started: the deploy starts a
background orchestrator for the store (autoscaler and timers), the next call finds it
again, the run completes, and the orchestrator stops itself once the store is idle;
``keepgoing orchestrator status`` and ``stop`` show and end it. Real processes; the
test itself starts none but the seed's two scripts and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from keepgoing._client import orchestrator as background

from ._support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

PIPELINE = textwrap.dedent(
    """
    # /// script
    # dependencies = ["keepgoing"]
    # ///
    import asyncio

    from keepgoing import task, workflow


    @task
    def score(rows: list[int]) -> list[float]:
        return [round(row * 0.1, 2) for row in rows]


    @task
    def summarize(batch_id: str, scores: list[float]) -> dict:
        return {"batch_id": batch_id, "rows": len(scores), "mean_score": sum(scores) / len(scores)}


    @workflow
    async def score_batch(batch_id: str, rows: list[int]) -> dict:
        scores = await score(rows)
        await asyncio.sleep(2)  # a durable timer: the group may scale to zero meanwhile
        return await summarize(batch_id, scores)
    """
)
# The seed's "Deploy the file as a worker", with keepgoing's names.
DEPLOY = textwrap.dedent(
    """
    import keepgoing

    worker = keepgoing.deploy_workflow_worker(
        source="pipeline.py", name="wf-score-batch", shutdown_delay_seconds=1
    )
    run = keepgoing.Client().trigger_workflow(
        "score_batch",
        {"batch_id": "batch-001", "rows": list(range(8))},
        task_queue=worker.task_queue,
        wait=False,
    )
    print(run.workflow_id)
    """
)
SUBMIT = textwrap.dedent(
    """
    import json, sys
    from keepgoing import Client

    result = Client().trigger_workflow(
        "score_batch",
        {"batch_id": "batch-002", "rows": [2, 4, 6]},
        task_queue="workflows.wf-score-batch",
        wait=True,
        timeout=120,
    )
    print(json.dumps(result))
    """
)


def _env(idle: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KEEPGOING_")}
    env.update(PYTHONUNBUFFERED="1", KEEPGOING_ORCHESTRATOR_IDLE=idle)
    return env


def _run(project: Path, argv: list[str], idle: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, cwd=project, env=_env(idle), capture_output=True, text=True, timeout=150, check=False
    )


def _status(project: Path) -> dict[str, object]:
    done = _run(
        project, [sys.executable, "-m", "keepgoing.cli", "orchestrator", "status", "--json"], "5"
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / ".keepgoing").mkdir()
    (folder / "pipeline.py").write_text(PIPELINE)
    (folder / "deploy.py").write_text(DEPLOY)
    (folder / "submit.py").write_text(SUBMIT)
    url = f"sqlite:///{folder / '.keepgoing' / 'keepgoing.db'}"
    try:
        yield folder
    finally:
        found = background.find_orchestrator(url)
        if found.running:
            background.stop_orchestrator(url, timeout=60)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def test_deploy_then_trigger_completes_with_nothing_else_started(project: Path) -> None:
    deployed = _run(project, [sys.executable, "deploy.py"], "6")
    assert deployed.returncode == 0, deployed.stderr
    workflow_id = deployed.stdout.strip().splitlines()[-1]
    assert "started a background orchestrator" in deployed.stderr
    status = _status(project)
    assert status["running"] is True
    pid = int(status["pid"])  # type: ignore[call-overload]
    log = Path(str(status["log"]))
    assert log.parent == project / ".keepgoing" / "orchestrator" and log.is_file()

    # Another process's trigger finds it again (no second one), and its run completes.
    submitted = _run(project, [sys.executable, "submit.py"], "6")
    assert submitted.returncode == 0, submitted.stderr + log.read_text()
    assert json.loads(submitted.stdout.splitlines()[-1]) == {
        "batch_id": "batch-002",
        "rows": 3,
        "mean_score": pytest.approx(0.4),
    }
    assert "started a background orchestrator" not in submitted.stderr
    assert _status(project)["pid"] == pid

    # The seed's first run completed too: its timer fired with no worker holding it.
    read = _run(
        project,
        [sys.executable, "-m", "keepgoing.cli", "show", workflow_id, "--json"],
        "6",
    )
    assert read.returncode == 0, read.stderr
    assert '"completed"' in read.stdout
    text = log.read_text()
    assert "wf-score-batch" in text and "scale up" in text

    # With no work left, it stops itself after the idle stretch (6 s here).
    wait_until(lambda: not _alive(pid), 90, "the background orchestrator to stop itself")
    assert _status(project)["running"] is False
    assert "no work for" in log.read_text()
    assert "stopping" in log.read_text()


def test_orchestrator_stop_ends_it_and_the_next_trigger_starts_another(project: Path) -> None:
    deployed = _run(project, [sys.executable, "deploy.py"], "600")
    assert deployed.returncode == 0, deployed.stderr
    first = int(_status(project)["pid"])  # type: ignore[call-overload]
    stopped = _run(project, [sys.executable, "-m", "keepgoing.cli", "orchestrator", "stop"], "600")
    assert stopped.returncode == 0 and "background orchestrator stopped" in stopped.stdout
    assert "store sqlite:///" in stopped.stderr
    assert not _alive(first)
    assert _status(project)["running"] is False
    again = _run(project, [sys.executable, "submit.py"], "600")
    assert again.returncode == 0, again.stderr
    assert "started a background orchestrator" in again.stderr
    second = int(_status(project)["pid"])  # type: ignore[call-overload]
    assert second != first and _alive(second)
    nothing = _run(project, [sys.executable, "-m", "keepgoing.cli", "orchestrator", "stop"], "600")
    assert "background orchestrator stopped" in nothing.stdout
    again_nothing = _run(
        project, [sys.executable, "-m", "keepgoing.cli", "orchestrator", "stop"], "600"
    )
    assert "no background orchestrator was running" in again_nothing.stdout


def test_starters_at_once_start_one_and_a_killed_one_is_replaced(project: Path) -> None:
    import concurrent.futures  # noqa: PLC0415
    import signal  # noqa: PLC0415

    url = f"sqlite:///{project / '.keepgoing' / 'keepgoing.db'}"
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        found = list(pool.map(lambda _: background.ensure_orchestrator(url, idle=600), range(4)))
    assert len({f.pid for f in found}) == 1
    assert sum(f.started_now for f in found) == 1
    pid = found[0].pid
    assert pid is not None and _alive(pid)
    os.kill(pid, signal.SIGKILL)  # the kernel frees its lock: the next call starts another
    wait_until(lambda: not background.find_orchestrator(url).running, 30, "its lock to be freed")
    again = background.ensure_orchestrator(url, idle=600)
    assert again.started_now and again.pid != pid and again.running
